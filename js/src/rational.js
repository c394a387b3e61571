/**
 * Exact rationals over BigInt, the little that the samplers need (Python's `fractions.Fraction`).
 *
 * A rational is a frozen `{ n, d }` with `d > 0n` and `gcd(|n|, d) = 1`, so two equal values have equal
 * fields, exactly like `Fraction.numerator` / `Fraction.denominator` in Python. The samplers draw with
 * bounds made from these fields, so the reduction must be the same as Python's for the draws to match.
 */

export class InvalidParameter extends Error {
  /** A parameter (ε, k, a value) is outside its allowed range; `code` as in `deniable.shared.errors`. */
  constructor(message) {
    super(message);
    this.name = 'InvalidParameter';
    this.code = 'invalid_parameter';
  }
}

export function gcd(a, b) {
  a = a < 0n ? -a : a;
  b = b < 0n ? -b : b;
  while (b) [a, b] = [b, a % b];
  return a;
}

/** The reduced rational n/d (integers or BigInts), d ≠ 0. */
export function frac(n, d = 1n) {
  n = BigInt(n);
  d = BigInt(d);
  if (d === 0n) throw new InvalidParameter('a rational needs a non-zero denominator');
  if (d < 0n) [n, d] = [-n, -d];
  const g = gcd(n, d) || 1n;
  return Object.freeze({ n: n / g, d: d / g });
}

export const add = (x, y) => frac(x.n * y.d + y.n * x.d, x.d * y.d);
export const sub = (x, y) => frac(x.n * y.d - y.n * x.d, x.d * y.d);
export const mul = (x, y) => frac(x.n * y.n, x.d * y.d);
export const div = (x, y) => frac(x.n * y.d, x.d * y.n);
export const abs = (x) => (x.n < 0n ? frac(-x.n, x.d) : x);
export const lt = (x, y) => x.n * y.d < y.n * x.d;

/** ⌊a/b⌋ for BigInts, b > 0 (Python's `//`; BigInt `/` truncates toward zero). */
export function floorDiv(a, b) {
  const q = a / b;
  return (a % b !== 0n && (a < 0n) !== (b < 0n)) ? q - 1n : q;
}

/** a mod b in [0, b) for b > 0 (Python's `%`). */
export function mod(a, b) {
  const r = a % b;
  return r < 0n ? r + b : r;
}

/** ⌊x⌋ of a rational as a BigInt. */
export const floor = (x) => floorDiv(x.n, x.d);

/** ⌊√x⌋ for a BigInt x ≥ 0 (Python's `math.isqrt`). */
export function isqrt(x) {
  if (x < 0n) throw new InvalidParameter('isqrt needs x >= 0');
  if (x < 2n) return x;
  let r = 1n << BigInt((bitLength(x) + 1) >> 1); // r ≥ √x
  for (;;) {
    const next = (r + x / r) >> 1n;
    if (next >= r) return r;
    r = next;
  }
}

/** Number of bits of a BigInt n ≥ 0 (Python's `int.bit_length`). */
export function bitLength(n) {
  return n === 0n ? 0 : n.toString(2).length;
}

/**
 * The exact rational value of a finite, non-negative JS number (Python's `Fraction(float)`): `0.1` is the
 * binary double 3602879701896397/36028797018963968, not 1/10. BigInts and `{ n, d }` pass through.
 */
export function exactFraction(x, name = 'epsilon') {
  let value;
  if (typeof x === 'bigint') value = frac(x);
  else if (x !== null && typeof x === 'object' && typeof x.n === 'bigint' && typeof x.d === 'bigint') value = frac(x.n, x.d);
  else if (typeof x === 'number') {
    if (!Number.isFinite(x)) throw new InvalidParameter(`'${name}' must be finite, got ${x}`);
    const view = new DataView(new ArrayBuffer(8));
    view.setFloat64(0, x);
    const bits = view.getBigUint64(0);
    const sign = bits >> 63n ? -1n : 1n;
    const exponent = Number((bits >> 52n) & 0x7ffn);
    const fraction = bits & ((1n << 52n) - 1n);
    const mantissa = exponent === 0 ? fraction : fraction | (1n << 52n);
    const shift = (exponent === 0 ? 1 : exponent) - 1075; // value = mantissa · 2^shift
    value = shift >= 0 ? frac(sign * (mantissa << BigInt(shift))) : frac(sign * mantissa, 1n << BigInt(-shift));
  } else {
    throw new TypeError(`'${name}' must be a number, got ${x === null ? 'null' : typeof x}`);
  }
  if (value.n < 0n) throw new InvalidParameter(`'${name}' must be non-negative, got ${x}`);
  return value;
}
