/**
 * The JS randomizers follow their exact laws: χ² goodness of fit against the exact probabilities, driven
 * by a fixed-seed source (so the outcome is reproducible), at α = 0.001 with the χ² critical values of
 * their degrees of freedom. The laws: GRR P(y = x) = r/(r+k−1), P(y = j) = 1/(r+k−1); OUE bit x ~
 * Bernoulli(1/2), every other bit ~ Bernoulli(1/(r+1)), independent.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { expLower, randomizedResponse, seededRandbelow, unaryBits } from '../src/index.js';

/** SplitMix64 as a byte source: fast and reproducible, for tests only (not a CSPRNG). */
function splitmix(seed) {
  let state = BigInt(seed);
  const mask = (1n << 64n) - 1n;
  let pool = [];
  return {
    bytes(size) {
      while (pool.length < size) {
        state = (state + 0x9e3779b97f4a7c15n) & mask;
        let z = state;
        z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask;
        z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask;
        z ^= z >> 31n;
        for (let i = 0n; i < 8n; i += 1n) pool.push(Number((z >> (8n * i)) & 0xffn));
      }
      const chunk = Uint8Array.from(pool.slice(0, size));
      pool = pool.slice(size);
      return chunk;
    },
  };
}

const ratio = (r) => Number((r.n * 10n ** 18n) / r.d) / 1e18; // a float for the test statistic only

test('GRR follows its exact law (χ², df = k − 1 = 4, critical value 18.47 at α = 0.001)', async () => {
  const k = 5;
  const x = 2;
  const n = 20000;
  const weight = expLower(1);
  const rb = seededRandbelow(splitmix(20261201));
  const counts = new Array(k).fill(0);
  for (let i = 0; i < n; i += 1) counts[await randomizedResponse(x, k, weight, rb)] += 1;
  const r = ratio(weight);
  const chi2 = counts.reduce((sum, c, j) => {
    const expected = (n * (j === x ? r : 1)) / (r + k - 1);
    return sum + (c - expected) ** 2 / expected;
  }, 0);
  assert.ok(chi2 < 18.47, `χ² = ${chi2.toFixed(2)}, counts ${counts}`);
});

test('binary randomized response keeps the value with probability r/(r+1) (χ², df = 1, 10.83)', async () => {
  const n = 20000;
  const weight = expLower(0.5);
  const rb = seededRandbelow(splitmix(7));
  let kept = 0;
  for (let i = 0; i < n; i += 1) kept += (await randomizedResponse(1, 2, weight, rb)) === 1 ? 1 : 0;
  const p = ratio(weight) / (ratio(weight) + 1);
  const chi2 = (kept - n * p) ** 2 / (n * p * (1 - p));
  assert.ok(chi2 < 10.83, `χ² = ${chi2.toFixed(2)}, kept ${kept} of ${n}`);
});

test('OUE bits follow their exact laws (χ² over k = 8 bits, df = 8, critical value 26.12 at α = 0.001)', async () => {
  const k = 8;
  const x = 3;
  const n = 4000;
  const weight = expLower(2);
  const rb = seededRandbelow(splitmix(42));
  const ones = new Array(k).fill(0);
  for (let i = 0; i < n; i += 1) {
    const mask = await unaryBits(x, k, weight, rb);
    for (let v = 0; v < k; v += 1) ones[v] += Number((mask >> BigInt(v)) & 1n);
  }
  const q = 1 / (ratio(weight) + 1);
  const chi2 = ones.reduce((sum, c, v) => {
    const p = v === x ? 0.5 : q;
    return sum + (c - n * p) ** 2 / (n * p * (1 - p));
  }, 0);
  assert.ok(chi2 < 26.12, `χ² = ${chi2.toFixed(2)}, ones ${ones}`);
});
