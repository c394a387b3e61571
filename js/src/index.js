/** deniable's device client in JavaScript: what exists so far (see README.md). */
export { InvalidParameter, exactFraction, frac } from './rational.js';
export {
  RR_DIGITS, bernoulli, bernoulliExp, discreteGaussian, discreteLaplace, expLower, geometricExp,
  randomizedResponse, secureRandbelow, seededRandbelow, unaryBits, unarySetBits,
} from './sampling.js';
export { HmacDrbg } from './drbg.js';
export { canonicalJson, canonicalText, pinnedFingerprint, pinnedForm } from './canonical.js';
