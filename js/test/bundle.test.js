/** The committed bundle (aggregator/api/static/survey*.js) is what js/src builds to; the page's entry
 * (everything a one-question campaign loads) weighs < 40 kB gzipped, dependencies included. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bundle, committed, gz } from '../build.mjs';

test('the committed bundle is up to date with js/src (run make js-bundle after a change)', async () => {
  const built = await bundle();
  const old = committed();
  assert.deepEqual(Object.keys(built).sort(), Object.keys(old).sort(), 'stale bundle files: run make js-bundle');
  for (const [name, bytes] of Object.entries(built)) assert.ok(Buffer.compare(Buffer.from(bytes), old[name]) === 0, `stale ${name}: run make js-bundle`);
  assert.ok(gz(built['survey.js']) < 40 * 1024, `survey.js is ${gz(built['survey.js'])} bytes gzipped, over the 40 kB goal`);
});
