/** wire-v1.json / wire-v2.json: the JS client parses every campaign, reproduces fingerprints, padded
 * lengths, device keys, pseudonyms and info strings, and opens Python's envelopes (test-only decrypt). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Campaign } from '../src/descriptor.js';
import { devicePublicKey, hpkeInfo, makePseudonym } from '../src/envelope.js';
import { openEnvelope } from '../src/open.js';
import { parseJson } from '../src/json.js';
import { fromHex, load, toHex } from './vectors.js';

for (const file of ['wire-v1.json', 'wire-v2.json']) {
  const vectors = load(file);
  const privateKey = fromHex(vectors.keypair.private_key_hex);
  for (const vector of vectors.campaigns) {
    test(`${file} ${vector.name}: descriptor, fingerprint, padded length, envelopes`, async () => {
      const campaign = await Campaign.fromJson(parseJson(JSON.stringify(vector.config)));
      assert.equal(campaign.fingerprint, vector.fingerprint);
      assert.equal(campaign.paddedLength, vector.padded_length ?? null);
      for (const e of vector.envelopes) {
        const secret = fromHex(e.device_secret_hex);
        const version = e.envelope.v;
        if (e.device_key_hex) assert.equal(toHex(await devicePublicKey(secret, campaign.id)), e.device_key_hex);
        assert.equal(await makePseudonym(secret, campaign.id, version), e.envelope.pseudonym);
        assert.equal(toHex(hpkeInfo(campaign.id, version, e.envelope.report_id, e.envelope.pseudonym)), e.info_hex);
        const opened = await openEnvelope(e.envelope, { campaignId: campaign.id, privateKey, paddedLength: campaign.paddedLength });
        assert.equal(opened.text, e.plaintext);
        if (version >= 2) assert.equal(opened.padded.length, campaign.paddedLength);
        const decoded = campaign.decode(opened.payload);
        if (e.support) assert.deepEqual(campaign.mechanismImpl.support(decoded.value), e.support);
      }
    });
  }
  for (const bad of vectors.forged ?? []) {
    test(`${file} forged ${bad.name}: the proof of possession fails before decryption`, async () => {
      await assert.rejects(openEnvelope(bad.envelope, { campaignId: bad.campaign_id, privateKey }), /proof of possession/);
    });
  }
  for (const bad of vectors.undecryptable ?? []) {
    test(`${file} undecryptable ${bad.name}: does not open`, async () => {
      await assert.rejects(openEnvelope(bad.envelope, { campaignId: bad.campaign_id, privateKey }), { code: 'invalid_report' });
    });
  }
}
