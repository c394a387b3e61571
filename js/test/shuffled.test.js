/** shuffled-v1.json (docs/wire-format.md §12): the descriptor, dedup tokens, both info strings, Python's
 * envelopes opened layer by layer, the JS client's own envelopes, and the batch signature. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as ed from '@noble/ed25519';
import { b64urlDecode } from '../src/bytes.js';
import { Campaign, isSmallOrder } from '../src/descriptor.js';
import { hpkeSuite, seal } from '../src/envelope.js';
import { dedupToken, innerInfo, outerInfo } from '../src/shuffle.js';
import { parseJson } from '../src/json.js';
import { batchMessage, openShuffled } from '../src/open.js';
import { fromHex, load, toHex } from './vectors.js';

const v = load('shuffled-v1.json');
const keys = { shufflerKey: fromHex(v.shuffler_keypair.private_key_hex), aggregatorKey: fromHex(v.aggregator_keypair.private_key_hex) };

test('the shuffled descriptor: fingerprint, padded length, inner info', async () => {
  const campaign = await Campaign.fromJson(parseJson(JSON.stringify(v.config)));
  assert.equal(campaign.fingerprint, v.fingerprint);
  assert.equal(campaign.paddedLength, v.padded_length);
  assert.equal(toHex(innerInfo(campaign.id)), v.inner_info_hex);
  const bad = (change) => Campaign.fromJson(parseJson(JSON.stringify({ ...v.config, ...change })));
  await assert.rejects(bad({ group_fields: ['country'] }), /take no group fields/);
  await assert.rejects(bad({ delta: null }), /needs 'delta'/);
  await assert.rejects(bad({ shuffler: { ...v.config.shuffler, url: 'ftp://x/' } }), /'shuffler.url'/);
  await assert.rejects(bad({ shuffler: { ...v.config.shuffler, min_batch: 1 } }), /'shuffler.min_batch'/);
  await assert.rejects(bad({ trust_model: 'local', delta: null }), /'shuffler' applies to shuffled campaigns only/);
});

test("Python's shuffled envelopes: dedup, outer info, both layers open to the recorded plaintexts", async () => {
  const campaign = await Campaign.fromJson(parseJson(JSON.stringify(v.config)));
  for (const e of v.envelopes) {
    assert.equal(await dedupToken(fromHex(e.device_secret_hex), campaign.id), e.dedup);
    assert.equal(toHex(outerInfo(campaign.id, e.envelope.report_id)), e.outer_info_hex);
    const opened = await openShuffled(e.envelope, { campaignId: campaign.id, paddedLength: campaign.paddedLength, ...keys });
    assert.equal(opened.outerText, e.outer_plaintext);
    assert.equal(opened.innerText, e.inner_plaintext);
  }
});

test('the JS client seals a shuffled report twice, with nothing of the device in the inner layer', async () => {
  const campaign = await Campaign.fromJson(parseJson(JSON.stringify(v.config)));
  const secret = fromHex(v.envelopes[0].device_secret_hex);
  const envelope = await seal(campaign.makePayload(1, {}), { campaign, secret, reportId: 'ab'.repeat(16) });
  assert.deepEqual(Object.keys(envelope).sort(), ['ct', 'report_id', 'v']);
  const opened = await openShuffled(envelope, { campaignId: campaign.id, paddedLength: campaign.paddedLength, ...keys });
  assert.equal(opened.innerText, '{"report":1}');
  assert.equal(opened.outer.dedup, v.envelopes[0].dedup);
  assert.equal(opened.padded.length, campaign.paddedLength);
});

test("the batch message and the shuffler's signature", async () => {
  const { body } = v.batch;
  const message = await batchMessage(v.config.id, body.batch_id, body.reports.map(b64urlDecode));
  assert.equal(toHex(message), v.batch.message_hex);
  assert.ok(await ed.verifyAsync(b64urlDecode(body.sig), message, b64urlDecode(v.config.shuffler.verify_key)));
});

test('the small-order check equals a trial X25519 exchange', async () => {
  const P = (1n << 255n) - 19n;
  const le = (u) => Uint8Array.from({ length: 32 }, (_, i) => Number((u >> BigInt(8 * i)) & 0xffn));
  const kem = (await hpkeSuite()).kem;
  const exchanges = async (raw) => {
    try {
      await kem.encap({ recipientPublicKey: await kem.deserializePublicKey(raw.slice().buffer) });
      return true;
    } catch {
      return false;
    }
  };
  const small = [0n, 1n, P - 1n, 325606250916557431795983626356110631294008115727848805560023387167927233504n,
    39382357235489614581723060781553021112529911719440698176882885853963445705823n];
  for (const u of [...small, ...small.map((x) => x + P).filter((x) => x < 1n << 255n), ...small.map((x) => x | (1n << 255n))]) {
    assert.equal(isSmallOrder(le(u)), true);
    assert.equal(await exchanges(le(u)), false, `u = ${u}`);
  }
  for (let i = 0; i < 40; i += 1) {
    const raw = globalThis.crypto.getRandomValues(new Uint8Array(32));
    assert.equal(isSmallOrder(raw), !(await exchanges(raw)));
  }
});
