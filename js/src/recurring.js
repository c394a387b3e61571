/**
 * The rounds of a recurring survey (descriptor format 3 with `"recurring": true`), byte for byte the
 * derivations of `deniable.client.memo` (`survey_answer_id`, `survey_permanent`, `survey_round_report_id`).
 * In the bundle's second file (survey-extra.js): only surveys load it.
 *
 * - permanent response of question q: HMAC_DRBG(secret, survey nonce ‖ len(qid) (1 byte) ‖ qid ‖
 *   SHA-256(canonical JSON of the answer), "deniable/survey-permanent/v1"); the first 16 bytes are the
 *   permanent id (the ledger pays ε_q for it once, over all rounds), then the question's randomizer draws;
 *   a skipped question (null) randomizes its dummy, whose report is discarded (a fixed draw pattern);
 * - answer id (the same in every round): HMAC_DRBG(secret, survey nonce ‖ answers digest,
 *   "deniable/survey-answer-id/v1"), 16 bytes;
 * - report id of a round: HMAC_DRBG(secret, survey nonce ‖ answers digest ‖ round,
 *   "deniable/round-report-id/v1"), 16 bytes.
 * The survey nonce is I2OSP(len(id), 2) ‖ id ‖ fingerprint; the answers digest is SHA-256 of the
 * canonical JSON of the normalized answers (memo.js).
 */
import { canonicalJson } from './canonical.js';
import { concat, sha256, toHex, utf8 } from './bytes.js';
import { HmacDrbg } from './drbg.js';
import { drawnQuestion, surveyNonce } from './memo.js';
import { add, exactFraction, frac } from './rational.js';

const PERMANENT = utf8('deniable/survey-permanent/v1');
const ANSWER_ID = utf8('deniable/survey-answer-id/v1');
const ROUND = utf8('deniable/round-report-id/v1');

const id16 = async (secret, nonce, personalization) => toHex(await (await HmacDrbg.create(secret, nonce, personalization)).generate(16));

/** `{permanentId, report}` of the permanent randomized response of question `i`'s `answer` (null: skipped). */
export async function surveyPermanent(campaign, secret, i, answer) {
  const q = campaign.questions[i];
  const qid = utf8(q.id);
  const nonce = concat(surveyNonce(campaign), Uint8Array.of(qid.length), qid, await sha256(canonicalJson(answer)));
  const drbg = await HmacDrbg.create(secret, nonce, PERMANENT);
  const permanentId = toHex(await drbg.generate(16));
  return { permanentId, report: await q.randomize(answer === null ? q.dummy : answer, drbg.randbelower()) };
}

/**
 * A round of a recurring survey: `{answerId, reportId, reports, permanents}` for the normalized answers,
 * where `drawn` is the question a sampling survey asks this device (null under per_question). `reports`
 * holds each asked question's report (null: skipped); `permanents` the `[question, permanentId]` of each
 * answered one, what the ledger pays for once.
 */
export async function surveyRound(campaign, secret, normalized, round, drawn) {
  const asked = drawn === null ? campaign.questions.map((_, i) => i) : [drawn];
  const reports = {};
  const permanents = [];
  for (const i of asked) { // every asked question draws, a skipped one its dummy: a fixed pattern
    const q = campaign.questions[i];
    const answer = normalized[q.id];
    const { permanentId, report } = await surveyPermanent(campaign, secret, i, answer);
    reports[q.id] = answer === null ? null : report;
    if (answer !== null) permanents.push([q, permanentId]);
  }
  const digest = await sha256(canonicalJson(normalized));
  const base = concat(surveyNonce(campaign), digest);
  return {
    answerId: await id16(secret, base, ANSWER_ID),
    reportId: await id16(secret, concat(base, utf8(round)), ROUND),
    reports,
    permanents,
  };
}

/**
 * One round's answer to a recurring survey (`Client._answer_survey_round` of Python), for `Client.submit`:
 * each asked question's permanent response of its answer under the round's own report id. The ledger pays
 * ε_q once per distinct answer of question q (its permanent id) over all rounds: an unchanged survey costs
 * nothing more, a changed answer to one question costs that question's ε. A sampling survey always asks
 * this device the same question. `inner` is the client's state and helpers (client.js `#inner`).
 */
export async function answerSurveyRound(inner, config, answers, groups, round, reanswer) {
  const { secret } = inner;
  const checked = config.checkGroups(groups);
  const { answerId, reportId, reports, permanents } = await surveyRound(config, secret, answers, round, await drawnQuestion(config, secret));
  const key = `${config.id}\u0000${round}`;
  const given = await inner.givenRound(config, key, answerId, reanswer, round);
  if (given?.receipt) return given.receipt;
  const check = async (t) => { // the permanent ids not paid yet, and their ε (checked against the budget)
    const due = [];
    for (const [q, pid] of permanents) if (!(await t.get('reports', pid))) due.push([pid, exactFraction(q.epsilon)]);
    const cost = due.reduce((sum, [, e]) => add(sum, e), frac(0n));
    if (due.length) await inner.checkBudget(t, config, cost);
    return [due, cost];
  };
  const token = await inner.pickToken(config, check);
  const envelope = JSON.stringify(await inner.seal(config.makeSurveyPayload(reports, checked, round, token), { campaign: config, secret, reportId, token }));
  return inner.store.tx('readwrite', async (t) => {
    if (given) {
      await t.delete('outbox', given.row.report_id);
      await t.delete('rounds', key);
    }
    if (token) await t.delete('tokens', token);
    const [due, cost] = await check(t);
    for (const [pid, e] of due) {
      await inner.recordSpend(t, {
        report_id: pid, campaign_id: config.id, recurring: true, trust_model: config.trustModel, cost: [e.n.toString(), e.d.toString()], envelope, answer_tag: null,
      });
    }
    await t.put('rounds', key, { campaign_id: config.id, round, report_id: reportId, answer_id: answerId, envelope, created: inner.now() });
    await inner.enqueue(t, reportId, config.id, envelope);
    return inner.receipt(config.id, reportId, Number(cost.n) / Number(cost.d), false, true, config.trustModel, true, round);
  });
}
