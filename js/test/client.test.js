/** The browser client's state and delivery rules, against a scripted aggregator (fake-indexeddb for
 * IndexedDB): pinning, memoized answers, the ledger, and settlement only on a per-report verdict. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { IDBFactory } from 'fake-indexeddb';
import { Client, readBatchReply, retryAfterSeconds } from '../src/client.js';
import { Campaign } from '../src/descriptor.js';
import { openEnvelope } from '../src/open.js';
import { surveyRound } from '../src/recurring.js';
import { fromHex, load } from './vectors.js';

const wire = load('wire-v2.json');
const privateKey = fromHex(wire.keypair.private_key_hex);
const descriptor = (name) => structuredClone(wire.campaigns.find((c) => c.name === name).config);

/** A scripted aggregator: `answer(method, path, body)` returns {status, body, headers} or throws. */
function aggregator(answer) {
  const calls = [];
  const fetch = async (url, init) => {
    const path = new URL(url).pathname;
    const body = init.body === undefined ? undefined : JSON.parse(init.body);
    calls.push({ method: init.method, path, body });
    const reply = await answer(init.method, path, body, calls.length);
    return new Response(reply.body === undefined ? '' : JSON.stringify(reply.body), {
      status: reply.status, headers: { 'content-type': 'application/json', ...(reply.headers ?? {}) },
    });
  };
  return { fetch, calls };
}

const verdicts = (reports, status = 'accepted') => ({
  status: 200,
  body: {
    results: reports.map((r) => ({ report_id: r.report_id, status, reason: status === 'accepted' ? null : 'because' })),
    accepted: status === 'accepted' ? reports.length : 0, duplicate: status === 'duplicate' ? reports.length : 0,
    rejected: status === 'rejected' ? reports.length : 0,
  },
});

const noSleep = { sleep: async () => {}, attempts: 3 };

async function open(fetch, extra = {}) {
  return Client.open({ aggregatorUrl: 'http://127.0.0.1:9', fetch, indexedDB: new IDBFactory(), retry: noSleep, ...extra });
}

function server(config, post) {
  return aggregator(async (method, path, body, n) => {
    if (method === 'GET') return { status: 200, body: typeof config === 'function' ? config() : config };
    return post(body.reports, n);
  });
}

test('an answer is queued sealed, delivered on a verdict, and memoized; the aggregator opens it', async () => {
  const config = descriptor('binary-rr');
  const posted = [];
  const { fetch } = server(config, (reports) => {
    posted.push(...reports);
    return verdicts(reports);
  });
  const client = await open(fetch);
  const first = await client.submit('smoking-2026', 'yes', { groups: { country: 'NL' } });
  assert.equal(first.memoized, false);
  assert.equal(first.epsilonSpent, 1);
  assert.equal((await client.pending()).length, 1);
  const result = await client.flush();
  assert.deepEqual([result.delivered, result.accepted, result.pending, result.failure], [1, 1, 0, null]);
  assert.equal(await client.reportStatus(first.reportId), 'delivered');
  const campaign = await Campaign.fromJson(config);
  const opened = await openEnvelope(posted[0], { campaignId: campaign.id, privateKey, paddedLength: campaign.paddedLength });
  assert.deepEqual(opened.payload.groups, { country: 'NL' });
  assert.equal(opened.padded.length, campaign.paddedLength);
  const again = await client.submit('smoking-2026', 'yes', { groups: { country: 'NL' } });
  assert.deepEqual([again.memoized, again.reportId, again.epsilonSpent], [true, first.reportId, 0]);
  await assert.rejects(client.submit('smoking-2026', 'no', { groups: { country: 'NL' } }), { code: 'answer_changed' });
  await assert.rejects(client.submit('smoking-2026', 'no', { groups: { country: 'NL' }, reanswer: true }), /was delivered/);
  assert.equal((await client.ledger()).total, 1);
});

test('no verdict, no settlement: 5xx, malformed replies, redirects and network failures keep reports queued', async () => {
  const config = descriptor('grr');
  const answers = [
    { status: 503, body: { error: { code: 'unavailable', message: 'down' } } },
    { status: 200, body: { results: [] } },
    { status: 302, body: {}, headers: { location: 'http://elsewhere/' } },
    'throw',
  ];
  for (const answer of answers) {
    const { fetch, calls } = server(config, () => {
      if (answer === 'throw') throw new TypeError('fetch failed');
      return answer;
    });
    const client = await open(fetch);
    const r = await client.submit(config.id, config.categories[1], { groups: { country: 'NL', 'age-band': '18-34' } });
    const result = await client.flush();
    assert.equal(result.pending, 1, JSON.stringify(answer));
    assert.equal(result.delivered, 0);
    assert.ok(result.failure, 'a typed failure');
    const [pending] = await client.pending();
    assert.equal(pending.reportId, r.reportId);
    assert.ok(pending.attempts === 1 && pending.lastError);
    const posts = calls.filter((c) => c.method === 'POST').length;
    assert.equal(posts, answer.status === 302 ? 1 : 3, `retries of ${JSON.stringify(answer)}`);
  }
});

test('a rejected report leaves the outbox with its reason and is never sent again', async () => {
  const config = descriptor('oue');
  const { fetch, calls } = server(config, (reports) => verdicts(reports, 'rejected'));
  const client = await open(fetch);
  const r = await client.submit(config.id, config.categories[3]);
  const result = await client.flush();
  assert.deepEqual([result.rejected, result.pending], [1, 0]);
  assert.equal((await client.rejections())[0].reportId, r.reportId);
  const again = await client.submit(config.id, config.categories[3]);
  assert.equal(again.queued, false);
  await client.flush();
  assert.equal(calls.filter((c) => c.method === 'POST').length, 1);
});

test('a 413 splits the batch, a duplicate verdict settles, a long 429 sets not_before', async () => {
  const config = descriptor('olh');
  let mode = '413';
  const { fetch, calls } = server(config, (reports) => {
    if (mode === '413') return reports.length > 1 ? { status: 413, body: {} } : verdicts(reports, 'duplicate');
    return { status: 429, body: {}, headers: { 'retry-after': '3600' } };
  });
  const clients = [];
  const shared = new IDBFactory();
  for (let i = 0; i < 2; i += 1) {
    clients.push(await Client.open({ aggregatorUrl: 'http://127.0.0.1:9', fetch, indexedDB: shared, dbName: `d${i}`, retry: noSleep }));
  }
  // two devices' reports in one client's outbox is impossible, so one client answers, the other is a second db
  const c = clients[0];
  await c.submit(config.id, config.categories[0], { groups: { platform: 'web' } });
  assert.equal((await c.flush()).delivered, 1);
  mode = '429';
  const d = clients[1];
  await d.submit(config.id, config.categories[2], { groups: { platform: 'ios' } });
  const limited = await d.flush();
  assert.equal(limited.failure.code, 'rate_limited');
  const posts = calls.filter((x) => x.method === 'POST').length;
  const waiting = await d.flush();
  assert.equal(waiting.failure.code, 'rate_limited');
  assert.equal(calls.filter((x) => x.method === 'POST').length, posts, 'no POST before Retry-After');
});

test('the batch reply must be a verdict on exactly the reports sent', () => {
  const ids = ['a'.repeat(32), 'b'.repeat(32)];
  const ok = { results: ids.map((id) => ({ report_id: id, status: 'accepted', reason: null })), accepted: 2, duplicate: 0, rejected: 0 };
  assert.deepEqual(readBatchReply(ok, ids).delivered, ids);
  const swapped = structuredClone(ok);
  swapped.results.reverse();
  assert.throws(() => readBatchReply(swapped, ids), { code: 'malformed_reply' });
  assert.throws(() => readBatchReply({ ...ok, accepted: 1 }, ids), { code: 'malformed_reply' });
  const noReason = structuredClone(ok);
  noReason.results[0].status = 'rejected';
  noReason.accepted = 1;
  noReason.rejected = 1;
  assert.throws(() => readBatchReply(noReason, ids), { code: 'malformed_reply' });
  assert.equal(retryAfterSeconds('120'), 120);
  assert.equal(retryAfterSeconds('²'), null);
  assert.equal(retryAfterSeconds('9'.repeat(5000)), 1e9);
});

test('the pin refuses a changed descriptor; a validated one is used offline; budgets hold', async () => {
  let config = descriptor('binary-rr');
  let online = true;
  const { fetch } = aggregator(async (method, _path, body) => {
    if (!online) throw new TypeError('offline');
    if (method === 'GET') return { status: 200, body: config };
    return verdicts(body.reports);
  });
  const client = await open(fetch, { maxEpsilonPerCampaign: 1.5, lifetimeBudget: 2 });
  await client.campaign('smoking-2026');
  config = { ...config, epsilon: 2.0 };
  await assert.rejects(client.campaign('smoking-2026'), (e) => e.code === 'invalid_config' && /epsilon 1 -> 2/.test(e.message));
  // refused again on every later call: the refused text is not remembered as "validated before"
  await assert.rejects(client.campaign('smoking-2026'), (e) => e.code === 'invalid_config' && /epsilon 1 -> 2/.test(e.message));
  await assert.rejects(client.submit('smoking-2026', 'no', { groups: { country: 'DE' } }), (e) => e.code === 'invalid_config');
  config = descriptor('binary-rr');
  online = false;
  const r = await client.submit('smoking-2026', 'no', { groups: { country: 'DE' } });
  assert.equal(r.queued, true);
  assert.equal((await client.flush()).pending, 1);
  online = true;
  assert.equal((await client.flush()).delivered, 1);
  const grr = descriptor('grr');
  config = grr;
  await assert.rejects(client.submit(grr.id, grr.categories[0], { groups: { country: 'NL', 'age-band': '65+' } }), { code: 'budget_exceeded' });
  const fresh = await open(fetch);
  config = descriptor('central');
  await assert.rejects(fresh.submit(config.id, config.categories[0], { groups: { country: 'NL' } }), /central trust model/);
  await assert.rejects(open(fetch, { lifetimeBudget: -1 }), { code: 'invalid_parameter' });
});

test('a recurring campaign sends the permanent response of a value under a report id per round', async () => {
  const config = { ...descriptor('grr'), id: 'weekly-mood', recurring: true };
  const { fetch } = server(config, (reports) => verdicts(reports));
  const client = await open(fetch);
  const a = await client.submit(config.id, config.categories[1], { groups: { country: 'NL', 'age-band': '18-34' }, round: 'w1' });
  const b = await client.submit(config.id, config.categories[1], { groups: { country: 'NL', 'age-band': '18-34' }, round: 'w2' });
  assert.notEqual(a.reportId, b.reportId);
  assert.deepEqual([a.epsilonSpent, b.epsilonSpent], [config.epsilon, 0]);
  await assert.rejects(client.submit(config.id, config.categories[1]), /collects in rounds/);
  await assert.rejects(client.submit(config.id, config.categories[2], { groups: { country: 'NL', 'age-band': '18-34' }, round: 'w2' }), { code: 'answer_changed' });
  assert.equal((await client.flush()).delivered, 2);
});

test('a shuffled campaign posts to its shuffler, never to the aggregator, and settles on its verdict', async () => {
  const { config } = load('shuffled-v1.json');
  const shufflerUrl = new URL(config.shuffler.url);
  const seen = [];
  const fetch = async (url, init) => {
    const where = new URL(url);
    seen.push(`${init.method} ${where.host}${where.pathname}`);
    if (init.method === 'GET') return new Response(JSON.stringify(config), { status: 200 });
    const { reports } = JSON.parse(init.body);
    return new Response(JSON.stringify(verdicts(reports).body), { status: 200 });
  };
  const client = await open(fetch);
  const receipt = await client.submit(config.id, 'yes');
  assert.equal((await client.flush()).delivered, 1);
  assert.deepEqual(seen, [`GET 127.0.0.1:9/api/v1/campaigns/${config.id}`, `POST ${shufflerUrl.host}/api/v1/campaigns/${config.id}/reports`]);
  assert.equal(await client.reportStatus(receipt.reportId), 'delivered');
});

test('a survey is pinned, answered by question id, memoized, and its envelope opens to the one-shot derivation', async () => {
  const v3 = load('wire-v3.json');
  const config = v3.campaigns.find((c) => c.name === 'per-question').config;
  const posted = [];
  const { fetch } = server(config, (reports) => {
    posted.push(...reports);
    return verdicts(reports);
  });
  const client = await open(fetch);
  await assert.rejects(client.submit(config.id, { smoke: 'maybe', age: 30 }, { groups: { country: 'NL' } }), { code: 'invalid_answer', question: 'smoke' });
  await assert.rejects(client.submit(config.id, { smoke: 'yes' }, { groups: { country: 'NL' } }), { code: 'invalid_answer', question: 'age' });
  const answers = { smoke: 'yes', age: 41.5 };
  const first = await client.submit(config.id, answers, { groups: { country: 'NL' } });
  assert.equal(first.epsilonSpent, config.epsilon);
  const again = await client.submit(config.id, answers, { groups: { country: 'NL' } });
  assert.deepEqual([again.memoized, again.reportId], [true, first.reportId]);
  await assert.rejects(client.submit(config.id, { ...answers, age: 42 }, { groups: { country: 'NL' } }), { code: 'answer_changed' });
  assert.equal((await client.flush()).delivered, 1);
  const campaign = await Campaign.fromJson(config);
  const opened = await openEnvelope(posted[0], { campaignId: config.id, privateKey: fromHex(v3.keypair.private_key_hex), paddedLength: campaign.paddedLength });
  assert.equal(opened.payload.answers.apps, null); // the optional question, skipped
  assert.deepEqual(Object.keys(opened.payload.answers).sort(), ['age', 'apps', 'smoke']);
});

test('a recurring survey answers each round with the permanent responses Python derives, paying ε per distinct answer', async () => {
  const v3 = load('wire-v3.json');
  const { config, envelopes: cases } = v3.campaigns.find((c) => c.name === 'recurring');
  const campaign = await Campaign.fromJson(config);
  for (const e of cases) { // the derivation, byte for byte: permanent ids, reports, round report id
    const secret = fromHex(e.device_secret_hex);
    const round = await surveyRound(campaign, secret, e.normalized, e.round, e.drawn);
    assert.equal(round.reportId, e.envelope.report_id);
    assert.deepEqual(Object.fromEntries(round.permanents.map(([q, pid]) => [q.id, pid])), e.permanent_ids);
    assert.deepEqual(campaign.makeSurveyPayload(round.reports, e.payload.groups, e.round), e.payload);
  }
  const e = cases[0];
  const posted = [];
  const { fetch } = server(config, (reports) => {
    posted.push(...reports);
    return verdicts(reports);
  });
  const client = await open(fetch, { secret: fromHex(e.device_secret_hex) });
  const groups = e.payload.groups;
  await assert.rejects(client.submit(config.id, e.answers, { groups }), /collects in rounds/);
  const first = await client.submit(config.id, e.answers, { groups, round: e.round });
  assert.deepEqual([first.reportId, first.epsilonSpent, first.recurring, first.round], [e.envelope.report_id, config.epsilon, true, e.round]);
  const again = await client.submit(config.id, e.answers, { groups, round: e.round });
  assert.deepEqual([again.reportId, again.memoized, again.epsilonSpent], [first.reportId, true, 0]);
  const next = await client.submit(config.id, e.answers, { groups, round: '2026-w50' }); // unchanged: free
  assert.deepEqual([next.epsilonSpent, next.memoized], [0, false]);
  assert.notEqual(next.reportId, first.reportId);
  const changed = await client.submit(config.id, { ...e.answers, sleep: 6 }, { groups, round: '2026-w51' });
  assert.equal(changed.epsilonSpent, 0.5); // only the changed question's ε
  await assert.rejects(client.submit(config.id, { ...e.answers, mood: 'ok' }, { groups, round: '2026-w51' }), { code: 'answer_changed' });
  assert.equal((await client.ledger()).total, 1.5);
  assert.equal((await client.flush()).delivered, 3);
  const opened = await openEnvelope(posted[0], { campaignId: config.id, privateKey: fromHex(v3.keypair.private_key_hex), paddedLength: campaign.paddedLength });
  assert.deepEqual(opened.payload, e.payload); // Python's plaintext, from the JS client end to end
});

test('a central survey is refused by default, with nothing spent', async () => {
  const v3 = load('wire-v3.json');
  const { config, envelopes: [e] } = v3.campaigns.find((c) => c.name === 'central');
  const { fetch } = server(config, (reports) => verdicts(reports));
  const client = await open(fetch);
  await assert.rejects(client.submit(config.id, e.answers, { groups: e.payload.groups }), /central trust model/);
  assert.equal((await client.ledger()).total, 0);
  assert.equal((await client.pending()).length, 0);
});

test('open({prefetch, descriptorText}) validates and pins the descriptor the page carries, with no GET', async () => {
  const config = descriptor('grr');
  const { fetch, calls } = server(config, (reports) => verdicts(reports));
  const client = await open(fetch, { prefetch: config.id, descriptorText: JSON.stringify(config) });
  const campaign = await client.campaign(config.id);
  assert.deepEqual([campaign.id, calls.length], [config.id, 0]);
  await client.campaign(config.id); // later calls fetch as usual
  assert.deepEqual(calls.map((c) => c.method), ['GET']);
  const other = await open(fetch, { prefetch: config.id, descriptorText: '{"id": ' });
  await assert.rejects(other.campaign(config.id), { code: 'invalid_config', message: /page's descriptor/ });
  const wrong = await open(fetch, { prefetch: config.id, descriptorText: JSON.stringify({ ...config, id: 'other-id' }) });
  await assert.rejects(wrong.campaign(config.id), { code: 'invalid_config', message: /misrouted or tampered/ });
});
