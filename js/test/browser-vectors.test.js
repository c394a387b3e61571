/** browser-v1.json: one-shot and permanent reports, report ids, plaintexts, pseudonyms, answer tags, and
 * the refusal of invalid descriptors with Python's code and message. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { canonicalText } from '../src/canonical.js';
import { Campaign } from '../src/descriptor.js';
import { devicePublicKey, makePseudonym } from '../src/envelope.js';
import { parseJson } from '../src/json.js';
import { answerTag, oneShotAnswer, permanentResponse, roundReportId } from '../src/memo.js';
import { fromHex, load, toHex } from './vectors.js';

const vectors = load('browser-v1.json');
const parse = (obj) => Campaign.fromJson(parseJson(JSON.stringify(obj)));

test('one-shot answers: report id, plaintext, padded length, pseudonym, device key, answer tag', async () => {
  for (const v of vectors.one_shot) {
    const campaign = await parse(v.config);
    const secret = fromHex(v.device_secret_hex);
    let reportId;
    let report;
    if (campaign.recurring) {
      ({ report } = await permanentResponse(campaign, secret, v.index));
      reportId = await roundReportId(secret, campaign.id, v.index, v.round);
    } else ({ reportId, report } = await oneShotAnswer(campaign, secret, v.index));
    const where = `${campaign.id} secret ${v.device_secret_hex.slice(0, 4)} index ${v.index}`;
    assert.equal(reportId, v.report_id, where);
    assert.equal(canonicalText(campaign.makePayload(report, v.groups, v.round)), v.plaintext, where);
    assert.equal(campaign.paddedLength, v.padded_length, where);
    assert.equal(await makePseudonym(secret, campaign.id, campaign.formatVersion), v.pseudonym, where);
    if (v.device_key_hex) assert.equal(toHex(await devicePublicKey(secret, campaign.id)), v.device_key_hex);
    assert.equal(await answerTag(secret, campaign.id, v.index, v.groups), v.answer_tag, where);
  }
});

test('permanent responses and round report ids', async () => {
  for (const v of vectors.permanent) {
    const campaign = await parse(v.config);
    const secret = fromHex(v.device_secret_hex);
    const { reportId, report } = await permanentResponse(campaign, secret, v.index);
    assert.equal(reportId, v.report_id);
    assert.deepEqual(campaign.mechanismImpl.encode(report), v.report);
    for (const [round, id] of Object.entries(v.rounds)) assert.equal(await roundReportId(secret, campaign.id, v.index, round), id);
  }
});

for (const v of vectors.invalid_descriptors) {
  test(`invalid descriptor refused like Python: ${v.name}`, async () => {
    const obj = v.text === undefined ? parseJson(JSON.stringify(v.descriptor)) : parseJson(v.text);
    await assert.rejects(Campaign.fromJson(obj), (error) => {
      assert.equal(error.code, v.code);
      assert.equal(error.message, v.message);
      return true;
    });
  });
}
