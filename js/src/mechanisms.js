/**
 * The local mechanisms on the device: randomize a category index with the exact samplers (sampling.js) and
 * encode the report for the wire (docs/wire-format.md §8), as `deniable.shared.mechanisms` does.
 *
 * | mechanism | draws (whatever the value)                         | report              | wire                       |
 * |-----------|----------------------------------------------------|---------------------|----------------------------|
 * | binary-rr | one randbelow(a + b)                               | 0 or 1              | JSON integer               |
 * | grr       | one randbelow(a + (k−1)·b)                         | index in [0, k)     | JSON integer               |
 * | oue       | k × randbelow(2(a + b))                            | BigInt k-bit mask   | ⌈k/4⌉ lowercase hex digits |
 * | olh       | randbelow(2^64) (seed), randbelow(a + (g−1)·b)     | {seed: BigInt, y}   | {"seed": 16 hex, "y": int} |
 *
 * r = a/b = `expLower(ε)` ≤ e^ε is the rational weight of randomized response (exactly ln(r)-LDP). The
 * number of draws and their bounds are the same for every true value; the estimators live on the
 * aggregator. `support(report)` lists the categories a report counts for (what the aggregator tallies).
 */

import { InvalidParameter, InvalidReport, pyRepr } from './errors.js';
import { isJsonInt, isPlainObject } from './json.js';
import { expLower, randomizedResponse, secureRandbelow, unaryBits } from './sampling.js';

export const OLH_PRIME = (1n << 31n) - 1n;
const SEED_BITS = 64n;
const HEX_RE = /^[0-9a-f]*$/;

/** H_seed(v) = ((a·v + b) mod P) mod g with a = 1 + ((seed >> 32) mod (P − 1)), b = (seed & 0xFFFFFFFF) mod P. */
export function olhHash(seed, value, g) {
  const s = BigInt(seed);
  const a = 1n + ((s >> 32n) % (OLH_PRIME - 1n));
  const b = (s & 0xffffffffn) % OLH_PRIME;
  return Number(((a * BigInt(value) + b) % OLH_PRIME) % BigInt(g));
}

const pyShort = (x) => pyRepr(String(x).slice(0, 80));

class Base {
  constructor(name, epsilon, k) {
    this.name = name;
    this.epsilon = epsilon;
    this.k = k;
    this.weight = expLower(epsilon);
  }

  checkValue(value) {
    if (!Number.isInteger(value) || value < 0 || value >= this.k) {
      throw new InvalidParameter(`value must be an integer in [0, ${this.k}), got ${value}`);
    }
    return value;
  }
}

class GRR extends Base {
  async randomize(value, randbelow = secureRandbelow) {
    return randomizedResponse(this.checkValue(value), this.k, this.weight, randbelow);
  }

  encode(report) {
    return this.decode(report);
  }

  widest() {
    return this.k - 1;
  }

  decode(wire) {
    if (!isJsonInt(wire) || wire < 0 || wire >= this.k) {
      throw new InvalidReport(`a ${this.name} report must be an integer in [0, ${this.k}), got ${wire}`);
    }
    return wire;
  }

  support(report) {
    return [this.decode(report)];
  }
}

class OUE extends Base {
  get hexDigits() {
    return Math.ceil(this.k / 4);
  }

  async randomize(value, randbelow = secureRandbelow) {
    return unaryBits(this.checkValue(value), this.k, this.weight, randbelow);
  }

  encode(mask) {
    if (typeof mask !== 'bigint' || mask < 0n || mask >> BigInt(this.k)) {
      throw new InvalidReport(`an oue report must be a bitmask in [0, 2^${this.k}), got ${mask}`);
    }
    return mask.toString(16).padStart(this.hexDigits, '0');
  }

  widest() {
    return (1n << BigInt(this.k)) - 1n;
  }

  decode(wire) {
    if (typeof wire !== 'string' || wire.length !== this.hexDigits || !HEX_RE.test(wire)) {
      throw new InvalidReport(
        `an oue report must be a string of exactly ${this.hexDigits} lowercase hex digits (k=${this.k} bits), got ${pyShort(wire)}`,
      );
    }
    const mask = BigInt(`0x${wire}`);
    if (mask >> BigInt(this.k)) throw new InvalidReport(`an oue report sets a bit at or above k=${this.k}`);
    return mask;
  }

  support(report) {
    const mask = typeof report === 'bigint' ? report : this.decode(report);
    const out = [];
    for (let v = 0; v < this.k; v += 1) if ((mask >> BigInt(v)) & 1n) out.push(v);
    return out;
  }
}

class OLH extends Base {
  constructor(name, epsilon, k, g) {
    super(name, epsilon, k);
    this.g = g;
  }

  async randomize(value, randbelow = secureRandbelow) {
    const x = this.checkValue(value);
    const seed = await randbelow(1n << SEED_BITS);
    const y = await randomizedResponse(olhHash(seed, x, this.g), this.g, this.weight, randbelow);
    return { seed, y };
  }

  encode(report) {
    return { seed: report.seed.toString(16).padStart(16, '0'), y: this.#bucket(report.y) };
  }

  widest() {
    return { seed: 0n, y: this.g - 1 };
  }

  #bucket(y) {
    if (!isJsonInt(y) || y < 0 || y >= this.g) {
      throw new InvalidReport(`an olh bucket 'y' must be an integer in [0, ${this.g}), got ${y}`);
    }
    return y;
  }

  decode(wire) {
    if (!isPlainObject(wire) || Object.keys(wire).sort().join() !== 'seed,y') {
      throw new InvalidReport('an olh report must be an object {"seed": "<16 hex digits>", "y": <int>}');
    }
    if (typeof wire.seed !== 'string' || wire.seed.length !== 16 || !HEX_RE.test(wire.seed)) {
      throw new InvalidReport(`an olh seed must be 16 lowercase hex digits, got ${pyRepr(String(wire.seed).slice(0, 40))}`);
    }
    return { seed: BigInt(`0x${wire.seed}`), y: this.#bucket(wire.y) };
  }

  support(report) {
    const { seed, y } = typeof report.seed === 'bigint' ? report : this.decode(report);
    const out = [];
    for (let v = 0; v < this.k; v += 1) if (olhHash(seed, v, this.g) === y) out.push(v);
    return out;
  }
}

/** The mechanism of a validated descriptor (`params` already checked against k and g). */
export function buildMechanism(name, epsilon, k, params) {
  switch (name) {
    case 'binary-rr':
    case 'grr':
      return new GRR(name, epsilon, k);
    case 'oue':
      return new OUE(name, epsilon, k);
    case 'olh':
      return new OLH(name, epsilon, k, params.g);
    default:
      throw new InvalidParameter(`unknown mechanism ${pyRepr(String(name))}`);
  }
}
