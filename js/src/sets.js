/**
 * Set-valued answers ("select all that apply", at most m of k options), `deniable.shared.mechanisms.sets`:
 *
 * - `bitvector`: one bit per option, r_m = expLower(ε/m): a selected bit is a fair coin, an unselected one
 *   is 1 with q = 1/(r_m + 1); k draws of one bound 2(a + b) whatever the set (`unarySetBits`);
 * - `padding` (padding-and-sampling): the set padded to m items with distinct dummies k, k+1, …, one item
 *   picked by randbelow(m), reported by randomized response over k + m symbols at r′ = 1 + m(r − 1),
 *   r = expLower(ε): one randbelow(m) and one RR draw whatever the set.
 *
 * Reports: bitvector a BigInt mask (wire: ⌈k/4⌉ hex digits), padding a symbol index (wire: integer; ≥ k
 * is a dummy that supports no option).
 */
import { InvalidParameter, InvalidReport, pyRepr } from './errors.js';
import { isJsonInt } from './json.js';
import { add, div, exactFraction, frac, mul, sub } from './rational.js';
import { expLower, randomizedResponse, secureRandbelow, unarySetBits } from './sampling.js';

const HEX_RE = /^[0-9a-f]*$/;

class SetBase {
  constructor(name, epsilon, k, m) {
    Object.assign(this, { name, epsilon, k, m });
  }

  /** The selected option indices, distinct integers in [0, k), at most m of them. */
  checkSet(selected) {
    if (!Array.isArray(selected)) throw new InvalidParameter(`a set answer must be a list of option indices, got ${selected}`);
    for (const v of selected) {
      if (!Number.isInteger(v) || v < 0 || v >= this.k) throw new InvalidParameter(`an option index must be an integer in [0, ${this.k}), got ${v}`);
    }
    if (new Set(selected).size !== selected.length) throw new InvalidParameter(`a set answer names an option twice: ${[...selected].sort((a, b) => a - b)}`);
    if (selected.length > this.m) throw new InvalidParameter(`at most ${this.m} options may be selected, got ${selected.length}`);
    return [...selected].sort((a, b) => a - b);
  }
}

export class BitVector extends SetBase {
  constructor(epsilon, k, m) {
    super('bitvector', epsilon, k, m);
    this.weight = expLower(div(exactFraction(epsilon), frac(BigInt(m))));
  }

  async randomize(selected, randbelow = secureRandbelow) {
    let mask = 0n;
    for (const v of this.checkSet(selected)) mask |= 1n << BigInt(v);
    return unarySetBits(mask, this.k, this.weight, randbelow);
  }

  get hexDigits() {
    return Math.ceil(this.k / 4);
  }

  encode(mask) {
    return this.decodeMask(mask).toString(16).padStart(this.hexDigits, '0');
  }

  decodeMask(mask) {
    if (typeof mask !== 'bigint' || mask < 0n || mask >> BigInt(this.k)) throw new InvalidReport(`a bitvector report sets a bit at or above k=${this.k}`);
    return mask;
  }

  decode(wire) {
    if (typeof wire !== 'string' || wire.length !== this.hexDigits || !HEX_RE.test(wire)) {
      throw new InvalidReport(`a bitvector report must be ${this.hexDigits} lowercase hex digits, got ${pyRepr(String(wire))}`);
    }
    return this.decodeMask(BigInt(`0x${wire}`));
  }

  widest() {
    return (1n << BigInt(this.k)) - 1n;
  }

  support(report) {
    const mask = typeof report === 'bigint' ? report : this.decode(report);
    const out = [];
    for (let v = 0; v < this.k; v += 1) if ((mask >> BigInt(v)) & 1n) out.push(v);
    return out;
  }
}

export class Padding extends SetBase {
  constructor(epsilon, k, m) {
    super('padding', epsilon, k, m);
    this.symbols = k + m;
    this.weight = add(frac(1n), mul(frac(BigInt(m)), sub(expLower(epsilon), frac(1n))));
  }

  async randomize(selected, randbelow = secureRandbelow) {
    const chosen = this.checkSet(selected);
    const items = [...chosen];
    for (let i = 0; i < this.m - chosen.length; i += 1) items.push(this.k + i);
    const item = items[Number(await randbelow(BigInt(this.m)))];
    return randomizedResponse(item, this.symbols, this.weight, randbelow);
  }

  encode(report) {
    return this.decode(report);
  }

  decode(wire) {
    if (!isJsonInt(wire) || wire < 0 || wire >= this.symbols) {
      throw new InvalidReport(`a padding report must be an integer in [0, ${this.symbols}), got ${wire}`);
    }
    return wire;
  }

  widest() {
    return this.symbols - 1;
  }

  support(report) {
    const y = this.decode(report);
    return y < this.k ? [y] : [];
  }
}

export function setMechanism(name, epsilon, k, m) {
  if (name === 'bitvector') return new BitVector(epsilon, k, m);
  if (name === 'padding') return new Padding(epsilon, k, m);
  throw new InvalidParameter(`a multi question's mechanism must be one of bitvector, padding, got ${pyRepr(String(name))}`);
}
