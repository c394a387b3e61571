/** The committed bundle (aggregator/api/static/survey.js) is what js/src builds to, and weighs < 40 kB gzipped. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { OUT, bundle, sizes } from '../build.mjs';

test('the committed bundle is up to date with js/src (run make js-bundle after a change)', async () => {
  const built = await bundle();
  assert.ok(Buffer.compare(Buffer.from(built), readFileSync(OUT)) === 0, 'stale bundle: run make js-bundle');
  const { gzipped } = sizes(built);
  assert.ok(gzipped < 40 * 1024, `the bundle is ${gzipped} bytes gzipped, over the 40 kB goal`);
});
