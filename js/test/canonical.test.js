import assert from 'node:assert/strict';
import { test } from 'node:test';

import { canonicalText, pinnedFingerprint } from '../src/index.js';
import { load } from './vectors.js';

const device = load('device-v1.json');
const wire = [1, 2].map((v) => load(`wire-v${v}.json`));

test('canonical JSON equals Python\'s for numbers, escapes, unicode and key order', () => {
  for (const c of device.canonical_json) assert.equal(canonicalText(c.value), c.canonical);
});

test('canonical JSON refuses what Python refuses', () => {
  assert.throws(() => canonicalText({ x: NaN }), { code: 'invalid_parameter' });
  assert.throws(() => canonicalText([Infinity]), { code: 'invalid_parameter' });
  assert.throws(() => canonicalText('\ud800'), { code: 'invalid_parameter' });
  assert.throws(() => canonicalText({ d: new Date(0) }), { code: 'invalid_parameter' });
  assert.throws(() => canonicalText(undefined), { code: 'invalid_parameter' });
});

test('the fingerprints of every campaign in wire-v1.json and wire-v2.json', async () => {
  let checked = 0;
  for (const vectors of wire) {
    for (const c of vectors.campaigns) {
      assert.equal(await pinnedFingerprint(c.config), c.fingerprint, c.name);
      checked += 1;
    }
  }
  assert.ok(checked >= 10);
});

test('the fingerprints and canonical forms of the descriptors in device-v1.json', async () => {
  for (const c of device.descriptors) {
    const { status, ...pinned } = c.config;
    assert.equal(canonicalText(pinned), c.canonical);
    assert.equal(await pinnedFingerprint(c.config), c.fingerprint, c.config.id);
  }
});

test('the example of docs/wire-format.md §3.1', async () => {
  const smoking = wire[1].campaigns.find((c) => c.name === 'binary-rr').config;
  const docs = (await import('node:fs')).readFileSync(new URL('../../docs/wire-format.md', import.meta.url), 'utf8');
  const fingerprint = docs.match(/its fingerprint is `([0-9a-f]{64})`/)[1];
  if (smoking.public_key === '3vB8Qsei9OziS0VwV9I1Ox9SwEuERNm8iAOeYysuKg8') {
    assert.equal(await pinnedFingerprint(smoking), fingerprint);
  }
});

test('omitted optional keys mean what the wire format says (same fingerprint)', async () => {
  const config = structuredClone(wire[1].campaigns.find((c) => c.name === 'oue').config);
  const expected = await pinnedFingerprint(config);
  const { budget, adjacency, ...bare } = config;
  assert.equal(budget, null);
  assert.equal(adjacency, null);
  assert.equal(await pinnedFingerprint({ ...bare, recurring: false, group_values: {}, admission: null }), expected);
  assert.equal(await pinnedFingerprint({ ...config, status: 'closed' }), expected);
  assert.notEqual(await pinnedFingerprint({ ...config, question: `${config.question} ` }), expected);
});
