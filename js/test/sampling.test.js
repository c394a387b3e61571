import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  HmacDrbg, bernoulli, bernoulliExp, discreteGaussian, discreteLaplace, exactFraction, expLower, frac,
  geometricExp, randomizedResponse, secureRandbelow, seededRandbelow, unaryBits, unarySetBits,
} from '../src/index.js';
import { Tape, fromHex, load } from './vectors.js';

const vectors = load('device-v1.json');
const rational = ([n, d]) => frac(BigInt(n), BigInt(d));

test('exactFraction is the exact binary value of a double', () => {
  assert.deepEqual(exactFraction(0.1), frac(3602879701896397n, 36028797018963968n));
  assert.deepEqual(exactFraction(1), frac(1n));
  assert.deepEqual(exactFraction(5e-324), frac(1n, 1n << 1074n));
  assert.deepEqual(exactFraction(2 ** 60), frac(1n << 60n));
  assert.throws(() => exactFraction(-1), { code: 'invalid_parameter' });
  assert.throws(() => exactFraction(Infinity), { code: 'invalid_parameter' });
  assert.throws(() => exactFraction('1'), TypeError);
});

test('expLower gives Python\'s r digit for digit', () => {
  assert.ok(vectors.exp_lower.length >= 20);
  for (const { epsilon, r } of vectors.exp_lower) {
    assert.deepEqual(expLower(epsilon), rational(r), `epsilon ${epsilon}`);
  }
});

test('expLower is below e^ε and within 10^-38 of it (checked in floats where they can)', () => {
  for (const eps of [0.001, 0.5, 1, 3, 10]) {
    const r = expLower(eps);
    const ratio = Number((r.n * 10n ** 30n) / r.d) / 1e30 / Math.exp(eps);
    assert.ok(Math.abs(ratio - 1) < 1e-12, `epsilon ${eps}`);
  }
});

const SAMPLERS = {
  randomized_response: (a, rb) => randomizedResponse(a.true_index, a.k, rational(a.weight), rb),
  unary_bits: (a, rb) => unaryBits(a.true_index, a.k, rational(a.weight), rb),
  unary_set_bits: (a, rb) => unarySetBits(BigInt(a.selected), a.k, rational(a.weight), rb),
  bernoulli: (a, rb) => bernoulli(a.num, a.den, rb).then(Number),
  bernoulli_exp: (a, rb) => bernoulliExp(rational(a.gamma), rb).then(Number),
  geometric_exp: (a, rb) => geometricExp(rational(a.gamma), rb),
  discrete_laplace: (a, rb) => discreteLaplace(rational(a.scale), rb),
  discrete_gaussian: (a, rb) => discreteGaussian(rational(a.sigma2), rb),
};

test('every sampler of the vectors has a JS twin', () => {
  const names = new Set(vectors.samplers.map((c) => c.sampler));
  assert.deepEqual([...names].sort(), Object.keys(SAMPLERS).sort());
});

for (const c of vectors.samplers) {
  test(`${c.sampler} replays Python's draws exactly (seed ${c.seed})`, async () => {
    if ('epsilon' in c.args) assert.deepEqual(expLower(c.args.epsilon), rational(c.args.weight));
    const tape = new Tape(c.tape_hex);
    const rb = seededRandbelow(tape);
    const out = [];
    for (let i = 0; i < c.calls; i += 1) out.push(String(await SAMPLERS[c.sampler](c.args, rb)));
    assert.deepEqual(out, c.outputs);
    assert.ok(tape.exhausted, 'the sampler took fewer bytes than Python did');
  });
}

for (const c of vectors.drbg_samplers) {
  test(`${c.sampler} driven by the HMAC_DRBG gives Python's permanent responses`, async () => {
    const drbg = await HmacDrbg.create(fromHex(c.entropy_hex), fromHex(c.nonce_hex), fromHex(c.personalization_hex));
    const rb = drbg.randbelower();
    const out = [];
    for (let i = 0; i < c.outputs.length; i += 1) out.push(String(await SAMPLERS[c.sampler](c.args, rb)));
    assert.deepEqual(out, c.outputs);
  });
}

test('the device randomizers draw the same bounds whatever the true value', async () => {
  const r = expLower(1);
  const pattern = async (run) => {
    const bounds = [];
    await run((n) => { bounds.push(n); return secureRandbelow(n); });
    return bounds;
  };
  for (const k of [2, 5, 40]) {
    const rr = await Promise.all([0, k - 1].map((x) => pattern((rb) => randomizedResponse(x, k, r, rb))));
    assert.deepEqual(rr[0], rr[1]);
    const ue = await Promise.all([0, k - 1].map((x) => pattern((rb) => unaryBits(x, k, r, rb))));
    assert.deepEqual(ue[0], ue[1]);
    assert.equal(ue[0].length, k);
  }
});

test('secureRandbelow stays in range and has no modulo bias (χ² over 3 cells, fixed critical value)', () => {
  assert.equal(secureRandbelow(1n), 0n);
  assert.throws(() => secureRandbelow(0n), { code: 'invalid_parameter' });
  const n = 30000;
  const counts = [0, 0, 0];
  for (let i = 0; i < n; i += 1) counts[Number(secureRandbelow(3n))] += 1;
  const chi2 = counts.reduce((s, c) => s + (c - n / 3) ** 2 / (n / 3), 0);
  assert.ok(chi2 < 13.8, `χ² = ${chi2} (df 2, p = 0.001 critical value 13.8)`);
  const big = 10n ** 40n + 7n;
  for (let i = 0; i < 200; i += 1) {
    const x = secureRandbelow(big);
    assert.ok(x >= 0n && x < big);
  }
});

test('samplers refuse what Python refuses', async () => {
  await assert.rejects(bernoulli(2, 1, secureRandbelow), { code: 'invalid_parameter' });
  await assert.rejects(bernoulliExp(frac(-1n), secureRandbelow), { code: 'invalid_parameter' });
  await assert.rejects(discreteLaplace(frac(0n), secureRandbelow), { code: 'invalid_parameter' });
  await assert.rejects(discreteGaussian(frac(0n), secureRandbelow), { code: 'invalid_parameter' });
  assert.throws(() => expLower(-0.5), { code: 'invalid_parameter' });
});
