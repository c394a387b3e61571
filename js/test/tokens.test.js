/** Admission tokens in the browser client: RSABSSA-SHA384-PSS-Deterministic and the Privacy Pass token of
 * tests/vectors/admission-tokens-v1.json byte for byte, and the wallet: obtained through the app's backend,
 * spent one per new report inside its payload, never on a re-sent one. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IDBFactory } from 'fake-indexeddb';
import { b64urlDecode, b64urlEncode } from '../src/bytes.js';
import { Client } from '../src/client.js';
import { Campaign } from '../src/descriptor.js';
import { openEnvelope } from '../src/open.js';
import { TokenBatch, blind, emsaPssEncode, finalize, loadIssuerKey, tokenInput } from '../src/tokens.js';
import { fromHex, load, toHex } from './vectors.js';

const v = load('admission-tokens-v1.json');
const wire = load('wire-v2.json');
const big = (hex) => BigInt(`0x${hex}`);
const modPow = (b, e, n) => {
  let r = 1n;
  for (b %= n; e; e >>= 1n, b = (b * b) % n) if (e & 1n) r = (r * b) % n;
  return r;
};
const admitted = () => ({
  ...structuredClone(wire.campaigns.find((c) => c.name === 'grr').config), id: 'admitted',
  admission: { type: 'privacy-pass-blind-rsa', token_type: 2, issuer_key: v.issuer_key, tokens_per_account: 5 },
});

/** The issuer (test-only, the vector's private key): s = blinded^d mod n for each TokenRequest. */
const issue = (requests) => requests.map((text) => {
  const raw = b64urlDecode(text);
  assert.equal(raw.length, 2 + 1 + 256);
  assert.deepEqual([...raw.subarray(0, 3)], [0, 2, fromHex(v.token_key_id)[31]]);
  const s = modPow(big(toHex(raw.subarray(3))), big(v.d), big(v.n));
  return b64urlEncode(fromHex(s.toString(16).padStart(512, '0')));
});

test('blinding, unblinding and the token are the vector of the Python issuer, byte for byte', async () => {
  const issuer = await loadIssuerKey(v.issuer_key);
  assert.equal(issuer.n, big(v.n));
  assert.equal(toHex(issuer.keyId), v.token_key_id);
  const msg = await tokenInput(fromHex(v.nonce), v.campaign_id, issuer.keyId);
  assert.equal(toHex(msg), v.token_input);
  assert.equal(toHex(await emsaPssEncode(msg, 2047, fromHex(v.salt))), v.encoded_message);
  const { blinded } = await blind(issuer, msg, { salt: fromHex(v.salt), inv: big(v.inv) });
  assert.equal(toHex(blinded), v.blinded_msg);
  const sig = await finalize(issuer, msg, fromHex(v.blind_sig), big(v.inv));
  assert.equal(toHex(sig), v.sig);
  assert.equal(b64urlEncode(new Uint8Array([...msg, ...sig])), v.token);
  const forged = fromHex(v.blind_sig);
  forged[100] ^= 1;
  await assert.rejects(finalize(issuer, msg, forged, big(v.inv)), /does not verify/);
});

test('a campaign with admission takes one token per new report, obtained blinded through the app', async () => {
  const config = admitted();
  const posted = [];
  const fetch = async (url, init) => {
    if (init.method === 'GET') return new Response(JSON.stringify(config), { status: 200 });
    const { reports } = JSON.parse(init.body);
    posted.push(...reports);
    const results = reports.map((r) => ({ report_id: r.report_id, status: 'accepted', reason: null }));
    return new Response(JSON.stringify({ results, accepted: reports.length, duplicate: 0, rejected: 0 }), { status: 200 });
  };
  const client = await Client.open({ aggregatorUrl: 'http://127.0.0.1:9', fetch, indexedDB: new IDBFactory() });
  const groups = { country: 'NL', 'age-band': '18-34' };
  await assert.rejects(client.submit(config.id, config.categories[0], { groups }), { code: 'admission_token_required' });
  assert.deepEqual([(await client.ledger()).total, (await client.pending()).length], [0, 0]);
  await assert.rejects(client.requestTokens(config.id, 0), { code: 'invalid_parameter' });
  const batch = await client.requestTokens(config.id, 2);
  await assert.rejects(client.addTokens(batch, ['AAAA', 'AAAA']), /256 bytes/);
  await assert.rejects(client.addTokens(batch, issue(batch.requests).slice(1)), /each of the 2 token requests/);
  assert.equal(await client.tokens(config.id), 0);
  assert.equal(await client.addTokens(batch, issue(batch.requests)), 2);
  const receipt = await client.submit(config.id, config.categories[0], { groups });
  assert.equal(await client.tokens(config.id), 1);
  const again = await client.submit(config.id, config.categories[0], { groups }); // memoized: its own token
  assert.deepEqual([again.memoized, await client.tokens(config.id)], [true, 1]);
  assert.equal((await client.flush()).delivered, 1);
  const campaign = await Campaign.fromJson(config);
  const { payload } = await openEnvelope(posted[0], { campaignId: config.id, privateKey: fromHex(wire.keypair.private_key_hex), paddedLength: campaign.paddedLength });
  const token = b64urlDecode(payload.token);
  assert.equal(token.length, 354);
  assert.deepEqual(campaign.decode(payload).value, payload.report);
  const issuer = await loadIssuerKey(v.issuer_key);
  assert.ok(await crypto.subtle.verify({ name: 'RSA-PSS', saltLength: 48 }, issuer.key, token.subarray(98), token.subarray(0, 98)));
  assert.equal(posted[0].report_id, receipt.reportId);
  const plain = structuredClone(wire.campaigns.find((c) => c.name === 'grr').config);
  const other = await Client.open({ aggregatorUrl: 'http://127.0.0.1:9', fetch: async () => new Response(JSON.stringify(plain)), indexedDB: new IDBFactory() });
  await assert.rejects(other.requestTokens(plain.id, 1), { code: 'invalid_config', message: /takes no admission tokens/ });
  assert.ok((await TokenBatch.create(campaign, 1)).requests[0].startsWith('AAK'));
});

test('a shuffled campaign with admission carries its token in the outer layer, for the shuffler', async () => {
  const { openShuffled } = await import('../src/open.js');
  const sv = load('shuffled-v1.json');
  const config = { ...structuredClone(sv.config), admission: admitted().admission };
  const campaign = await Campaign.fromJson(config);
  const fetch = async (url, init) => {
    if (init.method === 'GET') return new Response(JSON.stringify(config), { status: 200 });
    const { reports } = JSON.parse(init.body);
    const results = reports.map((r) => ({ report_id: r.report_id, status: 'accepted', reason: null }));
    fetch.posted.push(...reports);
    return new Response(JSON.stringify({ results, accepted: reports.length, duplicate: 0, rejected: 0 }), { status: 200 });
  };
  fetch.posted = [];
  const client = await Client.open({ aggregatorUrl: 'http://127.0.0.1:9', fetch, indexedDB: new IDBFactory() });
  await client.obtainTokens(config.id, 1, async (requests) => issue(requests));
  await client.submit(config.id, 'yes');
  assert.equal((await client.flush()).delivered, 1);
  const keys = { shufflerKey: fromHex(sv.shuffler_keypair.private_key_hex), aggregatorKey: fromHex(sv.aggregator_keypair.private_key_hex) };
  const opened = await openShuffled(fetch.posted[0], { campaignId: config.id, paddedLength: campaign.paddedLength, ...keys });
  assert.deepEqual(Object.keys(opened.outer).sort(), ['campaign_id', 'dedup', 'inner', 'token']);
  assert.equal(b64urlDecode(opened.outer.token).length, 354);
  assert.equal(opened.innerText, '{"report":1}'); // the inner payload names nothing of the device, no token
});
