/** wire-v3.json (surveys, descriptor format 3): every campaign parsed with its fingerprint and padded length;
 * every envelope's report id and plaintext re-derived from the device secret and the answers (the one-shot
 * survey derivation, sampling draw included) and opened with the test-only decrypt. */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { canonicalText } from '../src/canonical.js';
import { Campaign } from '../src/descriptor.js';
import { parseJson } from '../src/json.js';
import { drawnQuestion, surveyOneShot } from '../src/memo.js';
import { openEnvelope } from '../src/open.js';
import { checkAnswers } from '../src/questions.js';
import { fromHex, load } from './vectors.js';

const FILE = new URL('../../tests/vectors/wire-v3.json', import.meta.url);
const vectors = existsSync(FILE) ? load('wire-v3.json') : { campaigns: [] };

for (const vector of vectors.campaigns) {
  test(`wire-v3.json ${vector.name}: descriptor, padding, one-shot derivation, envelopes`, async () => {
    const campaign = await Campaign.fromJson(parseJson(JSON.stringify(vector.config)));
    assert.equal(campaign.fingerprint, vector.fingerprint);
    assert.equal(campaign.paddedLength, vector.padded_length);
    const privateKey = fromHex(vectors.keypair.private_key_hex);
    for (const e of vector.envelopes) {
      const secret = fromHex(e.device_secret_hex);
      const normalized = checkAnswers(campaign.questions, e.answers);
      assert.deepEqual(normalized, e.normalized);
      assert.equal(await drawnQuestion(campaign, secret), e.drawn);
      const opened = await openEnvelope(e.envelope, { campaignId: campaign.id, privateKey, paddedLength: campaign.paddedLength });
      assert.equal(opened.text, e.plaintext);
      campaign.decode(opened.payload);
      if (!campaign.recurring && campaign.trustModel === 'local') {
        const { reportId, reports } = await surveyOneShot(campaign, secret, normalized);
        assert.equal(reportId, e.envelope.report_id);
        assert.equal(canonicalText(campaign.makeSurveyPayload(reports, e.payload.groups)), e.plaintext);
      }
    }
  });
}
