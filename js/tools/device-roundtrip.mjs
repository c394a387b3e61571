// A device run of the JS client for the Python tests (tests/system/test_browser_vectors.py), talking JSON
// lines on stdin/stdout: the job {descriptor, secret_hex, answers: [{value, groups, round}], tokens}; when
// tokens > 0 it prints {requests} (blinded token requests) and reads {responses} (the issuer's, signed by
// Python), then answers through Client.submit and prints {receipts, envelopes}: every envelope it posted.
// IndexedDB is fake-indexeddb; the aggregator is a stub that serves the descriptor and accepts reports.
import { createInterface } from 'node:readline';
import { IDBFactory } from 'fake-indexeddb';
import { Client } from '../src/client.js';
import { fromHex } from '../src/bytes.js';

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
const read = async () => JSON.parse((await lines.next()).value);
const job = await read();
const posted = [];
const fetch = async (url, init) => {
  if (init.method === 'GET') return new Response(JSON.stringify(job.descriptor), { status: 200 });
  const { reports } = JSON.parse(init.body);
  posted.push(...reports);
  const results = reports.map((r) => ({ report_id: r.report_id, status: 'accepted', reason: null }));
  return new Response(JSON.stringify({ results, accepted: reports.length, duplicate: 0, rejected: 0 }), { status: 200 });
};
const client = await Client.open({ aggregatorUrl: 'http://127.0.0.1:9', fetch, indexedDB: new IDBFactory(), secret: fromHex(job.secret_hex) });
if (job.tokens) {
  const batch = await client.requestTokens(job.descriptor.id, job.tokens);
  process.stdout.write(`${JSON.stringify({ requests: batch.requests })}\n`);
  await client.addTokens(batch, (await read()).responses);
}
const receipts = [];
for (const a of job.answers) receipts.push(await client.submit(job.descriptor.id, a.value, { groups: a.groups, round: a.round ?? null }));
await client.flush();
process.stdout.write(`${JSON.stringify({ receipts, envelopes: posted })}\n`);
process.exit(0);
