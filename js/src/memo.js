/**
 * The device-secret-derived randomness of `deniable.client.memo`, byte for byte: a one-shot answer and its
 * report id are a function of (secret, campaign, fingerprint, value), so a browser whose storage was
 * wiped re-derives the identical report under the same id (a retry, not a fresh randomization); a
 * recurring campaign's permanent response of a value is a function of (secret, campaign, value), with a
 * report id per round. All draws come from HMAC_DRBG (SP 800-90A, SHA-256) keyed with the secret.
 *
 * - one-shot: nonce = I2OSP(len(id), 2) ‖ id ‖ fingerprint (32 bytes) ‖ I2OSP(value, 4),
 *   personalization "deniable/one-shot/v1"; the first 16 bytes are the report id, the rest drive the sampler;
 * - permanent: nonce = id ‖ 0x00 ‖ I2OSP(value, 4), personalization "deniable/permanent-rr/v2";
 * - round report id: nonce = id ‖ 0x00 ‖ I2OSP(value, 4) ‖ 0x00 ‖ round, "deniable/round-report-id/v1";
 * - answer tag: hex HMAC-SHA256("deniable/answer-tag/v1" ‖ secret, canonical JSON [id, value, groups]).
 */
import { canonicalJson } from './canonical.js';
import { concat, fromHex, hmacSha256, i2osp, sha256, toHex, utf8 } from './bytes.js';
import { HmacDrbg } from './drbg.js';

const ONE_SHOT = utf8('deniable/one-shot/v1');
const PERMANENT = utf8('deniable/permanent-rr/v2');
const ROUND = utf8('deniable/round-report-id/v1');
const ANSWER_TAG = utf8('deniable/answer-tag/v1');
const ZERO = Uint8Array.of(0);

/** A report of `campaign` for category `index` drawn by `randbelow`: randomized (local) or the index (central). */
export async function randomizeIndex(campaign, index, randbelow) {
  if (campaign.trustModel === 'central') return index;
  return campaign.mechanismImpl.randomize(index, randbelow);
}

/** `{reportId, report}` of the one-shot answer `index` to `campaign`. */
export async function oneShotAnswer(campaign, secret, index) {
  const id = utf8(campaign.id);
  const nonce = concat(i2osp(id.length, 2), id, fromHex(campaign.fingerprint), i2osp(index, 4));
  const drbg = await HmacDrbg.create(secret, nonce, ONE_SHOT);
  const reportId = toHex(await drbg.generate(16));
  return { reportId, report: await randomizeIndex(campaign, index, drbg.randbelower()) };
}

/** `{reportId, report}` of the permanent randomized response of `index` (recurring campaigns). */
export async function permanentResponse(campaign, secret, index) {
  const nonce = concat(utf8(campaign.id), ZERO, i2osp(index, 4));
  const drbg = await HmacDrbg.create(secret, nonce, PERMANENT);
  const reportId = toHex(await drbg.generate(16));
  return { reportId, report: await campaign.mechanismImpl.randomize(index, drbg.randbelower()) };
}

/** The report id of the answer `index` in `round` of a recurring campaign. */
export async function roundReportId(secret, campaignId, index, round) {
  const nonce = concat(utf8(campaignId), ZERO, i2osp(index, 4), ZERO, utf8(round));
  return toHex(await (await HmacDrbg.create(secret, nonce, ROUND)).generate(16));
}

/** A keyed fingerprint of one answer (value and groups): tells a repeat from a changed answer. */
export async function answerTag(secret, campaignId, index, groups) {
  const value = index !== null && typeof index === 'object' ? { ...index } : index; // a survey's normalized answers
  return toHex(await hmacSha256(concat(ANSWER_TAG, secret), canonicalJson([campaignId, value, { ...groups }])));
}

// -- surveys (descriptor format 3), deniable.client.memo's survey_* ------------------------------------
const SURVEY_QUESTION = utf8('deniable/survey-question/v1');
const SURVEY_ONE_SHOT = utf8('deniable/survey-one-shot/v1');

/** I2OSP(len(id), 2) ‖ id ‖ fingerprint (32 bytes): the campaign part of every survey DRBG nonce. */
export function surveyNonce(campaign) {
  const id = utf8(campaign.id);
  return concat(i2osp(id.length, 2), id, fromHex(campaign.fingerprint));
}

/** The question a sampling survey asks this device (null under per_question): from secret and campaign only. */
export async function drawnQuestion(campaign, secret) {
  if (campaign.split.mode !== 'sampling') return null;
  const drbg = await HmacDrbg.create(secret, surveyNonce(campaign), SURVEY_QUESTION);
  return Number(await drbg.randbelow(BigInt(campaign.questions.length)));
}

/** `{reportId, reports}` of the one-shot answer to a survey: HMAC_DRBG(secret, nonce ‖ SHA-256(canonical
 * JSON of the normalized answers), "deniable/survey-one-shot/v1"); 16 bytes of report id, then each asked
 * question draws in descriptor order. */
export async function surveyOneShot(campaign, secret, normalized) {
  const digest = await sha256(canonicalJson(normalized));
  const drbg = await HmacDrbg.create(secret, concat(surveyNonce(campaign), digest), SURVEY_ONE_SHOT);
  const reportId = toHex(await drbg.generate(16));
  const drawn = await drawnQuestion(campaign, secret);
  const reports = await campaign.survey.randomizeAnswers(campaign.questions, campaign.split.mode, normalized, drawn, drbg.randbelower());
  return { reportId, reports, drawn };
}
