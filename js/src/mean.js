/**
 * Means of a bounded number, `deniable.shared.mechanisms.mean`, exactly: a value in [lo, hi] is put on a
 * grid of `steps` steps by unbiased randomized rounding (one randbelow(2^64)), then randomized by
 *
 * - `duchi`: report 1 (+C) with probability D⁻¹·[J(a²+b²) + (2j − J)(a² − b²)], D = 2J(a²+b²), s = a/b =
 *   expLower(ε/2) (one randbelow(D));
 * - `piecewise`: the Piecewise Mechanism on a lattice of N cells, its exact rational law P(k | j) sampled
 *   against the integer CDF over the common denominator 2·N·a·b·J²·(a+b)² (one draw);
 * - `hybrid`: a branch coin randbelow(α.d) < α.n with α = 1 − 1/s above ε* (0 below), then BOTH a PM and a
 *   Duchi draw, one selected afterwards (reports 0..N PM, N+1 / N+2 Duchi's −C / +C).
 *
 * The same draws, bounds and outputs as Python for the same `randbelow` (tests/vectors/browser-v1.json).
 */
import { InvalidParameter, InvalidReport } from './errors.js';
import { isJsonInt } from './json.js';
import { add, div, exactFraction, floor, frac, lt, mul, sub } from './rational.js';
import { expLower, secureRandbelow } from './sampling.js';

export const HYBRID_THRESHOLD = 0.6094;
const ROUNDING_BITS = 64n;
const ONE = frac(1n);
const ZERO = frac(0n);
const le = (x, y) => !lt(y, x);

/** The exact rational value of any finite double (Python's `Fraction(float)`), negative ones too. */
function exactSigned(x) {
  if (x >= 0) return exactFraction(x);
  const f = exactFraction(-x);
  return frac(-f.n, f.d);
}

/** H(t) = ∫_{−∞}^t max(0, 1 − |w|) dw. */
function hatCdf(t) {
  if (le(t, frac(-1n))) return ZERO;
  if (le(t, ZERO)) return div(mul(add(t, ONE), add(t, ONE)), frac(2n));
  if (le(t, ONE)) return sub(ONE, div(mul(sub(ONE, t), sub(ONE, t)), frac(2n)));
  return ONE;
}

/** The grid index of `value` in [lo, hi] (`NumberRange.grid_index`): one randbelow(2^64) always. */
export async function gridIndex(value, lo, hi, steps, { clip = false, randbelow = secureRandbelow } = {}) {
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw new InvalidParameter(`the answer must be a finite number in [${lo}, ${hi}], got ${value}`);
  }
  let v = exactSigned(value);
  const low = exactSigned(lo);
  const high = exactSigned(hi);
  if (lt(v, low) || lt(high, v)) {
    if (!clip) {
      throw new InvalidParameter(`the answer must lie in [${lo}, ${hi}], got ${value} (values are not clipped silently)`);
    }
    v = lt(v, low) ? low : high;
  }
  const position = div(mul(sub(v, low), frac(BigInt(steps))), sub(high, low));
  const below = floor(position);
  const fraction = sub(position, frac(below));
  const scaled = mul(fraction, frac(1n << ROUNDING_BITS));
  const threshold = -floor(frac(-scaled.n, scaled.d)); // ceil
  const up = (await randbelow(1n << ROUNDING_BITS)) < threshold;
  const j = below + (up ? 1n : 0n);
  return Number(j < BigInt(steps) ? j : BigInt(steps));
}

class MeanBase {
  constructor(name, epsilon, steps, lattice) {
    Object.assign(this, { name, epsilon, steps, lattice });
    this.s = expLower(div(exactFraction(epsilon), frac(2n)));
  }

  checkIndex(j) {
    if (!Number.isInteger(j) || j < 0 || j > this.steps) throw new InvalidParameter(`a grid index must be an integer in [0, ${this.steps}], got ${j}`);
    return j;
  }

  encode(report) {
    return this.decode(report);
  }

  decode(wire) {
    if (!isJsonInt(wire) || wire < 0 || wire >= this.outputs) {
      throw new InvalidReport(`a ${this.name} report must be an integer in [0, ${this.outputs}), got ${wire}`);
    }
    return wire;
  }

  widest() {
    return this.outputs - 1;
  }
}

export class Duchi extends MeanBase {
  constructor(epsilon, steps, lattice) {
    super('duchi', epsilon, steps, lattice);
    this.outputs = 2;
    const { n: a, d: b } = this.s;
    this.denominator = 2n * BigInt(steps) * (a * a + b * b);
  }

  numerator(j) {
    const { n: a, d: b } = this.s;
    const J = BigInt(this.steps);
    return J * (a * a + b * b) + (2n * BigInt(j) - J) * (a * a - b * b);
  }

  async randomize(j, randbelow = secureRandbelow) {
    return (await randbelow(this.denominator)) < this.numerator(this.checkIndex(j)) ? 1 : 0;
  }
}

export class Piecewise extends MeanBase {
  #cdfs = new Map();

  constructor(epsilon, steps, lattice) {
    super('piecewise', epsilon, steps, lattice);
    this.outputs = lattice + 1;
    const { n: a, d: b } = this.s;
    this.denominator = 2n * BigInt(lattice) * a * b * BigInt(steps) ** 2n * (a + b) ** 2n;
  }

  /** P(k | j) for k = 0..N, exactly (Python's `Piecewise.pmf`). */
  pmf(j) {
    const { s } = this;
    const N = frac(BigInt(this.lattice));
    const J = frac(BigInt(this.steps));
    const jj = frac(BigInt(this.checkIndex(j)));
    const sPlus = add(s, ONE);
    const left = div(mul(mul(N, s), jj), mul(J, sPlus));
    const right = div(mul(N, add(div(mul(s, jj), J), ONE)), sPlus);
    const inner = div(s, N);
    const outer = div(ONE, mul(s, N));
    const law = [];
    for (let k = 0; k <= this.lattice; k += 1) {
      const kk = frac(BigInt(k));
      const hLeft = hatCdf(sub(left, kk));
      const hRight = hatCdf(sub(right, kk));
      const tails = add(sub(hLeft, hatCdf(frac(BigInt(-k)))), sub(hatCdf(frac(BigInt(this.lattice - k))), hRight));
      law.push(add(mul(inner, sub(hRight, hLeft)), mul(outer, tails)));
    }
    return law;
  }

  cdf(j) {
    let cdf = this.#cdfs.get(j);
    if (cdf) return cdf;
    cdf = [];
    let running = 0n;
    for (const p of this.pmf(j)) {
      const scaled = mul(p, frac(this.denominator));
      if (scaled.d !== 1n) throw new Error(`piecewise: P(k | ${j}) is not a multiple of 1/D`);
      running += scaled.n;
      cdf.push(running);
    }
    if (running !== this.denominator) throw new Error(`piecewise: the law of index ${j} does not sum to 1`);
    if (this.#cdfs.size > 64) this.#cdfs.clear();
    this.#cdfs.set(j, cdf);
    return cdf;
  }

  async randomize(j, randbelow = secureRandbelow) {
    const cdf = this.cdf(this.checkIndex(j));
    const u = await randbelow(this.denominator);
    let r = 0; // bisect_right: the first index whose cdf exceeds u
    while (r < cdf.length && cdf[r] <= u) r += 1;
    return r;
  }
}

export class Hybrid extends MeanBase {
  constructor(epsilon, steps, lattice) {
    super('hybrid', epsilon, steps, lattice);
    this.outputs = lattice + 3;
    this.piecewise = new Piecewise(epsilon, steps, lattice);
    this.duchi = new Duchi(epsilon, steps, lattice);
    this.alpha = epsilon > HYBRID_THRESHOLD ? sub(ONE, div(ONE, this.s)) : ZERO;
  }

  async randomize(j, randbelow = secureRandbelow) {
    this.checkIndex(j);
    const branch = (await randbelow(this.alpha.d)) < this.alpha.n;
    const pm = await this.piecewise.randomize(j, randbelow);
    const du = await this.duchi.randomize(j, randbelow);
    return branch ? pm : this.lattice + 1 + du;
  }
}

export function meanMechanism(name, epsilon, steps, lattice = 256) {
  if (name === 'duchi') return new Duchi(epsilon, steps, lattice);
  if (name === 'piecewise') return new Piecewise(epsilon, steps, lattice);
  if (name === 'hybrid') return new Hybrid(epsilon, steps, lattice);
  throw new InvalidParameter(`a number question's mechanism must be one of duchi, piecewise, hybrid, got ${name}`);
}
