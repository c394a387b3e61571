/**
 * The exact samplers of `deniable.shared.sampling`, in BigInt: integer arithmetic only, no floats.
 *
 * Every sampler draws through a `randbelow(n)` that returns a uniform BigInt in [0, n) (or a promise of
 * one: the HMAC_DRBG runs on WebCrypto, which is asynchronous, so every sampler is `async`). Given the
 * same `randbelow`, each function makes the same calls with the same bounds in the same order as its
 * Python twin and returns the same value; `test/sampling.test.js` checks this against
 * `tests/vectors/device-v1.json`.
 *
 * - `secureRandbelow` draws from `crypto.getRandomValues` (the browser's and Node's CSPRNG) by rejection:
 *   ⌈log₂ n⌉ random bits, redrawn while ≥ n, so there is no modulo bias (P(redraw) < 1/2).
 * - `seededRandbelow(source)` is Python's `seeded_randbelow`: the same rule over `source.bytes(size)`
 *   (size = ⌈bits/8⌉ bytes, big-endian, the low bits kept), for tests and audits only.
 * - `expLower(ε)` is Python's `exp_lower`, digit for digit: the rational r with
 *   e^ε·(1 − 10⁻³⁸) < r ≤ e^ε, computed here from ε with BigInt decimal arithmetic (not copied from a
 *   table), so a device derives r from the descriptor's `epsilon` alone.
 *
 * The device randomizers (`randomizedResponse`, `unaryBits`, `unarySetBits`) draw a fixed pattern: the
 * number of draws and their bounds never depend on the true value (docs in `shared/sampling.py`).
 * Limits: as in Python, a JS engine is not a constant-time machine (BigInt comparison and selection take
 * value-dependent nanoseconds).
 */

import {
  InvalidParameter, abs, bitLength, div, exactFraction, floor, floorDiv, frac, isqrt, mod, mul, sub,
} from './rational.js';

/** Significant decimal digits of the rational weight r ≤ e^ε of randomized response (`RR_DIGITS`). */
export const RR_DIGITS = 40;

function bytesToBigInt(bytes) {
  let x = 0n;
  for (const byte of bytes) x = (x << 8n) | BigInt(byte);
  return x;
}

function checkBound(n) {
  n = BigInt(n);
  if (n < 1n) throw new InvalidParameter(`randbelow needs n >= 1, got ${n}`);
  return n;
}

/** A `randbelow` over a byte source (`{ bytes(size) }`, sync or async): Python's `seeded_randbelow`. */
export function seededRandbelow(source) {
  return async function randbelow(n) {
    n = checkBound(n);
    const bits = bitLength(n - 1n);
    const size = (bits + 7) >> 3;
    for (;;) {
      const x = bytesToBigInt(await source.bytes(size)) >> BigInt(8 * size - bits);
      if (x < n) return x;
    }
  };
}

/** Uniform BigInt in [0, n) from `crypto.getRandomValues`, by rejection (no modulo bias). */
export function secureRandbelow(n) {
  n = checkBound(n);
  if (n === 1n) return 0n;
  const bits = bitLength(n - 1n);
  const size = (bits + 7) >> 3;
  const shift = BigInt(8 * size - bits);
  const buffer = new Uint8Array(size);
  for (;;) {
    globalThis.crypto.getRandomValues(buffer);
    const x = bytesToBigInt(buffer) >> shift;
    if (x < n) return x;
  }
}

/** Bernoulli(num/den) exactly: `randbelow(den) < num`, for integers 0 ≤ num ≤ den, den ≥ 1. */
export async function bernoulli(num, den, randbelow = secureRandbelow) {
  num = BigInt(num);
  den = BigInt(den);
  if (den < 1n || num < 0n || num > den) {
    throw new InvalidParameter(`bernoulli needs 0 <= num <= den and den >= 1, got ${num}/${den}`);
  }
  return (await randbelow(den)) < num;
}

/** Bernoulli(e^(−γ)) for 0 ≤ γ ≤ 1 (CKS 2020, Alg. 1): A_k ~ Bernoulli(γ/k) until the first 0; odd k. */
async function bernoulliExpUnit(gamma, randbelow) {
  const { n: num, d: den } = gamma;
  if (num === 0n) return true;
  let k = 1n;
  // a certain coin (γ/k = 1) needs no draw, as in Python's short-circuiting `or`
  while (num >= den * k || (await randbelow(den * k)) < num) k += 1n;
  return k % 2n === 1n;
}

/** Bernoulli(e^(−γ)) exactly for rational γ ≥ 0: (e^(−1))^⌊γ⌋ · e^(−(γ−⌊γ⌋)), independent coins. */
export async function bernoulliExp(gamma, randbelow = secureRandbelow) {
  gamma = toFraction(gamma);
  if (gamma.n < 0n) throw new InvalidParameter(`bernoulli_exp needs gamma >= 0, got ${gamma.n}/${gamma.d}`);
  const whole = floor(gamma);
  const one = frac(1n);
  for (let i = 0n; i < whole; i += 1n) {
    if (!(await bernoulliExpUnit(one, randbelow))) return false;
  }
  return bernoulliExpUnit(sub(gamma, frac(whole)), randbelow);
}

/** V ≥ 0 with P(V = v) = (1 − e^(−γ))·e^(−γv): the number of successes of Bernoulli(e^(−γ)). */
export async function geometricExp(gamma, randbelow = secureRandbelow) {
  gamma = toFraction(gamma);
  let v = 0n;
  while (await bernoulliExp(gamma, randbelow)) v += 1n;
  return v;
}

/** Z with P(Z = z) ∝ a^|z|, a = e^(−1/scale), rational scale = t/s > 0 (CKS 2020, Alg. 2). */
export async function discreteLaplace(scale, randbelow = secureRandbelow) {
  scale = toFraction(scale);
  if (scale.n <= 0n) throw new InvalidParameter(`discrete_laplace needs scale > 0, got ${scale.n}/${scale.d}`);
  const { n: t, d: s } = scale;
  const one = frac(1n);
  for (;;) {
    const u = await randbelow(t);
    if (!(await bernoulliExp(frac(u, t), randbelow))) continue;
    const v = await geometricExp(one, randbelow);
    const y = floorDiv(u + t * v, s);
    const negative = await randbelow(2n);
    if (negative && y === 0n) continue;
    return negative ? -y : y;
  }
}

/** Y with P(Y = y) ∝ e^(−y²/(2σ²)) on ℤ, rational σ² > 0 (CKS 2020, Alg. 3), by rejection from DLap(t). */
export async function discreteGaussian(sigma2, randbelow = secureRandbelow) {
  sigma2 = toFraction(sigma2);
  if (sigma2.n <= 0n) throw new InvalidParameter(`discrete_gaussian needs sigma2 > 0, got ${sigma2.n}/${sigma2.d}`);
  const t = isqrt(sigma2.n * sigma2.d) / sigma2.d + 1n;
  const shift = div(sigma2, frac(t));
  const twice = mul(frac(2n), sigma2);
  for (;;) {
    const y = await discreteLaplace(frac(t), randbelow);
    const gap = sub(abs(frac(y)), shift);
    if (await bernoulliExp(div(mul(gap, gap), twice), randbelow)) return y;
  }
}

/**
 * k-ary randomized response with one draw: P(y = x) = r/(r+k−1), P(y = j) = 1/(r+k−1) for j ≠ x.
 * u = randbelow(a + (k−1)·b) for r = a/b: u < a keeps x, otherwise y = x + 1 + ⌊(u−a)/b⌋ mod k. The one
 * draw has the same bound for every x; both candidates are computed before one is selected.
 */
export async function randomizedResponse(trueIndex, k, weight, randbelow = secureRandbelow) {
  const x = BigInt(trueIndex);
  const kk = BigInt(k);
  const { n: a, d: b } = weight;
  const u = await randbelow(a + (kk - 1n) * b);
  const other = mod(x + 1n + floorDiv(u - a, b), kk);
  const keep = u < a;
  return Number(keep ? x : other);
}

/** k bits (a BigInt mask): bit x is 1 with probability 1/2, every other bit with q = 1/(r+1) (OUE). */
export function unaryBits(trueIndex, k, weight, randbelow = secureRandbelow) {
  return unarySetBits(1n << BigInt(trueIndex), k, weight, randbelow);
}

/**
 * `unaryBits` for a set: the bits in the mask `selected` take the fair coin u mod 2, the others the q-coin
 * ⌊u/2⌋ < b, one draw u = randbelow(2(a+b)) per bit whatever the set.
 */
export async function unarySetBits(selected, k, weight, randbelow = secureRandbelow) {
  const sel = BigInt(selected);
  const { n: a, d: b } = weight;
  const bound = 2n * (a + b);
  let mask = 0n;
  for (let v = 0n; v < BigInt(k); v += 1n) {
    const u = await randbelow(bound);
    const coins = [(u >> 1n) < b ? 1n : 0n, u & 1n];
    const chosen = coins[Number((sel >> v) & 1n)];
    mask |= chosen << v;
  }
  return mask;
}

function toFraction(x) {
  if (x !== null && typeof x === 'object') return frac(x.n, x.d);
  if (typeof x === 'number' && !Number.isInteger(x)) return exactFraction(x, 'gamma');
  return frac(BigInt(x));
}

const pow10 = (e) => 10n ** BigInt(e);
const digits = (n) => n.toString().length;

/** The floor of the rational p/q (p, q > 0) to `prec` significant decimal digits: [coefficient, exponent]. */
function floorSignificant(p, q, prec) {
  let adjusted = digits(p) - digits(q); // ⌊log10(p/q)⌋ is this or one less
  const atLeast = (e) => (e >= 0 ? p >= q * pow10(e) : p * pow10(-e) >= q);
  if (!atLeast(adjusted)) adjusted -= 1;
  const s = prec - 1 - adjusted; // decimal places
  const coefficient = s >= 0 ? (p * pow10(s)) / q : p / (q * pow10(-s));
  return [coefficient, -s];
}

/** Round V·10^e (V > 0) to `prec` significant digits, half to even: [coefficient of prec digits, exponent]. */
function roundHalfEven(value, exponent, prec) {
  const drop = digits(value) - prec;
  if (drop <= 0) return [value * pow10(-drop), exponent + drop];
  const unit = pow10(drop);
  let q = value / unit;
  const twice = 2n * (value % unit);
  if (twice > unit || (twice === unit && q % 2n === 1n)) q += 1n;
  let e = exponent + drop;
  if (digits(q) > prec) { q /= 10n; e += 1; }
  return [q, e];
}

/** e^(m·10^e) rounded half-even to `prec` digits (Python's correctly rounded `Decimal.exp`), m > 0. */
function decimalExp(m, e, prec) {
  // X = m·10^e = num/den; Taylor in fixed point of `work` decimals, every step rounded down, so the sum S
  // is a lower bound; the truncation and tail errors together stay below `slack` units (generous bound).
  const num = e >= 0 ? m * pow10(e) : m;
  const den = e >= 0 ? 1n : pow10(-e);
  const whole = num / den + 1n;
  for (let work = prec + 30 + 2 * digits(whole); ; work += 40) {
    const one = pow10(work);
    let term = one;
    let sum = one;
    let n = 1n;
    while (term !== 0n || n <= 2n * whole) {
      term = (term * num) / (den * n);
      sum += term;
      n += 1n;
    }
    const slack = 4n * (n + 2n) * 4n ** whole; // ≥ the accumulated floor errors (< e^X per term) + tail
    const low = roundHalfEven(sum, -work, prec);
    const high = roundHalfEven(sum + slack, -work, prec);
    if (low[0] === high[0] && low[1] === high[1]) return low;
  }
}

const expCache = new Map();

/**
 * A rational r with e^ε·(1 − 10^(2−RR_DIGITS)) < r ≤ e^ε for rational ε ≥ 0 (r = 1 at ε = 0), equal to
 * Python's `exp_lower`: ε_low = ε rounded toward −∞ to RR_DIGITS + 20 digits; y = e^(ε_low) rounded half
 * to even to RR_DIGITS digits; r = y − 1 ulp. A JS number is taken at its exact binary value.
 */
export function expLower(epsilon) {
  const eps = exactFraction(epsilon);
  const key = `${eps.n}/${eps.d}`;
  const cached = expCache.get(key);
  if (cached) return cached;
  let r;
  if (eps.n === 0n) r = frac(1n);
  else {
    const [m, e] = floorSignificant(eps.n, eps.d, RR_DIGITS + 20);
    const [y, ye] = decimalExp(m, e, RR_DIGITS);
    r = ye >= 0 ? frac((y - 1n) * pow10(ye)) : frac(y - 1n, pow10(-ye));
  }
  if (expCache.size >= 1024) expCache.clear();
  expCache.set(key, r);
  return r;
}
