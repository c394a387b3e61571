/**
 * HMAC_DRBG (NIST SP 800-90A Rev. 1, §10.1.2) with SHA-256, and an exact `randbelow` driven by it: the
 * twin of `deniable.client.drbg.HmacDrbg`, byte for byte.
 *
 * The device uses it for randomness that must be a deterministic function of the device secret (permanent
 * and memoized responses, RAPPOR-style): seeded with the secret, it is computationally indistinguishable
 * from uniform to anyone without the secret. No reseeding and no prediction resistance, as in Python.
 * The HMAC is computed synchronously (bytes.js); `create`, `generate` and `randbelow` still return promises,
 * so that the samplers take any `randbelow` (a CSPRNG one, a replayed tape, this one) alike.
 */

import { InvalidParameter, bitLength } from './rational.js';
import { hmac, sha256 } from '@hpke/common';

const OUTLEN = 32; // SHA-256 output length in bytes

/**
 * HMAC-SHA256 (RFC 2104) under one key, for the DRBG's many HMACs under the same K: noble's HMAC
 * (`@hpke/common`, already in the bundle) is keyed once per K (`hmac.create`, which hashes the key's inner
 * and outer blocks), and each message continues a copy of that keyed state (`_cloneInto` into the one
 * scratch HMAC kept for it), two compressions fewer per HMAC than keying afresh.
 */
class KeyedHmac {
  #keyed = null;
  #scratch = undefined;

  setKey(key) { // key: 32 bytes (K is always an HMAC output)
    this.#keyed = hmac.create(sha256, key);
  }

  mac(data) {
    this.#scratch = this.#keyed._cloneInto(this.#scratch);
    return this.#scratch.update(data).digest();
  }
}
const MAX_REQUEST = 7500; // bytes per generate call (SP 800-90A Table 2: 2^19 bits)
const RESEED_INTERVAL = 2 ** 48;

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((total, part) => total + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

function asBytes(data, name) {
  if (data instanceof Uint8Array) return data;
  if (typeof data === 'string') return new TextEncoder().encode(data);
  throw new TypeError(`'${name}' must be a Uint8Array or a string`);
}

export class HmacDrbg {
  #mac = new KeyedHmac(); // HMAC-SHA256 under K
  #value;
  #reseedCounter;
  #buffer = new Uint8Array(0);

  /** Use `await HmacDrbg.create(entropy, nonce, personalization)` (the constructor cannot await). */
  constructor(token) {
    if (token !== PRIVATE) throw new TypeError('use HmacDrbg.create(entropy, nonce, personalization)');
  }

  /** Instantiate (§10.1.2.3): at least 32 bytes of entropy input; nonce and personalization optional. */
  static async create(entropy, nonce = new Uint8Array(0), personalization = new Uint8Array(0)) {
    entropy = asBytes(entropy, 'entropy');
    if (entropy.length < 32) {
      throw new InvalidParameter(`HMAC_DRBG needs at least 32 bytes of entropy input, got ${entropy.length}`);
    }
    const drbg = new HmacDrbg(PRIVATE);
    drbg.#mac.setKey(new Uint8Array(OUTLEN));
    drbg.#value = new Uint8Array(OUTLEN).fill(1);
    drbg.#update(concat(entropy, asBytes(nonce, 'nonce'), asBytes(personalization, 'personalization')));
    drbg.#reseedCounter = 1;
    return drbg;
  }

  #hmac(data) {
    return this.#mac.mac(data);
  }

  /** HMAC_DRBG_Update (§10.1.2.2). */
  #update(provided) {
    this.#mac.setKey(this.#hmac(concat(this.#value, Uint8Array.of(0), provided)));
    this.#value = this.#hmac(this.#value);
    if (provided.length) {
      this.#mac.setKey(this.#hmac(concat(this.#value, Uint8Array.of(1), provided)));
      this.#value = this.#hmac(this.#value);
    }
  }

  /** HMAC_DRBG_Generate (§10.1.2.5): `nbytes` (1..7500) pseudorandom bytes. */
  async generate(nbytes, additional = new Uint8Array(0)) {
    return this.#generate(nbytes, additional);
  }

  #generate(nbytes, additional) {
    if (!Number.isInteger(nbytes) || nbytes < 1 || nbytes > MAX_REQUEST) {
      throw new InvalidParameter(`HMAC_DRBG requests must be 1..${MAX_REQUEST} bytes, got ${nbytes}`);
    }
    if (this.#reseedCounter > RESEED_INTERVAL) {
      throw new Error('HMAC_DRBG reseed interval exhausted; instantiate a new generator');
    }
    additional = asBytes(additional, 'additional');
    if (additional.length) this.#update(additional);
    const out = new Uint8Array(Math.ceil(nbytes / OUTLEN) * OUTLEN);
    for (let offset = 0; offset < nbytes; offset += OUTLEN) {
      this.#value = this.#hmac(this.#value);
      out.set(this.#value, offset);
    }
    this.#update(additional);
    this.#reseedCounter += 1;
    return out.slice(0, nbytes);
  }

  #take(nbytes) {
    while (this.#buffer.length < nbytes) this.#buffer = concat(this.#buffer, this.#generate(64, new Uint8Array(0)));
    const chunk = this.#buffer.slice(0, nbytes);
    this.#buffer = this.#buffer.slice(nbytes);
    return chunk;
  }

  /** Uniform BigInt in [0, n): bit_length(n−1) bits from 64-byte blocks, values ≥ n rejected. */
  async randbelow(n) {
    n = BigInt(n);
    if (n < 1n) throw new InvalidParameter(`randbelow needs n >= 1, got ${n}`);
    if (n === 1n) return 0n;
    const nbits = bitLength(n - 1n);
    const nbytes = (nbits + 7) >> 3;
    const shift = BigInt(8 * nbytes - nbits);
    for (;;) {
      let candidate = 0n;
      for (const byte of this.#take(nbytes)) candidate = (candidate << 8n) | BigInt(byte);
      candidate >>= shift;
      if (candidate < n) return candidate;
    }
  }

  /** `randbelow` as a free function, for the samplers: `randomizedResponse(x, k, r, drbg.randbelower())`. */
  randbelower() {
    return (n) => this.randbelow(n);
  }
}

const PRIVATE = Symbol('HmacDrbg.create');
