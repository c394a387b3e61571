/** deniable's device client in JavaScript (see README.md): the browser twin of `deniable.client`. */
export { exactFraction, frac } from './rational.js';
export {
  RR_DIGITS, bernoulli, bernoulliExp, discreteGaussian, discreteLaplace, expLower, geometricExp,
  randomizedResponse, secureRandbelow, seededRandbelow, unaryBits, unarySetBits,
} from './sampling.js';
export { HmacDrbg } from './drbg.js';
export { canonicalJson, canonicalText, pinnedFingerprint, pinnedForm } from './canonical.js';
export * from './errors.js';
export { parseJson } from './json.js';
export { Campaign, FORMAT_VERSION, SUITE_ID } from './descriptor.js';
export { olhHash } from './mechanisms.js';
export { devicePublicKey, hpkeInfo, makePseudonym, seal } from './envelope.js';
export { answerTag, drawnQuestion, oneShotAnswer, permanentResponse, roundReportId, surveyOneShot } from './memo.js';
export { Client, readBatchReply, retryAfterSeconds } from './client.js';
export { DeviceStore } from './store.js';
