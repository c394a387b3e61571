/** The set and mean randomizers and the grid rounding draw exactly as Python's (browser-v1.json). */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { HmacDrbg } from '../src/drbg.js';
import { gridIndex, meanMechanism } from '../src/mean.js';
import { setMechanism } from '../src/sets.js';
import { load } from './vectors.js';

const cases = load('browser-v1.json').survey_mechanisms;
const drbg = (label) => HmacDrbg.create(Uint8Array.from({ length: 32 }, (_, i) => i), label, 'deniable/test/survey-mechanisms');

for (const c of cases) {
  test(`${c.kind} ${c.label}`, async () => {
    const randbelow = (await drbg(c.label)).randbelower();
    const outputs = [];
    if (c.kind === 'multi') {
      const m = setMechanism(c.mechanism, c.epsilon, c.k, c.m);
      for (let i = 0; i < c.outputs.length; i += 1) outputs.push(m.encode(await m.randomize(c.input, randbelow)));
    } else if (c.kind === 'number') {
      const m = meanMechanism(c.mechanism, c.epsilon, c.steps, c.lattice);
      for (let i = 0; i < c.outputs.length; i += 1) outputs.push(await m.randomize(c.input, randbelow));
    } else {
      for (let i = 0; i < c.outputs.length; i += 1) outputs.push(await gridIndex(c.input, c.lo, c.hi, c.steps, { randbelow }));
    }
    assert.deepEqual(outputs, c.outputs);
  });
}
