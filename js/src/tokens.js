/**
 * Admission tokens on the browser device, the twin of `deniable.client.tokens` and the client half of
 * `deniable.shared.tokens` / `deniable.shared.blindrsa`: Privacy Pass type 0x0002 tokens (RFC 9578) from
 * RSABSSA-SHA384-PSS-Deterministic blind signatures (RFC 9474: SHA-384, MGF1-SHA-384, 48-byte salt, no
 * prefix; 2048-bit issuer key, e = 65537), byte for byte as Python builds them
 * (`tests/vectors/admission-tokens-v1.json`). In the bundle's second file (survey-extra.js): only
 * campaigns with `admission` load it.
 *
 * 1. `TokenBatch.create(campaign, count)`: per token a fresh 32-byte nonce, token input = 0x0002 ‖ nonce ‖
 *    SHA-256(TokenChallenge) ‖ key id, EM = EMSA-PSS-ENCODE(input) with a fresh salt, r uniform in [1, n)
 *    with gcd(r, n) = 1 (by rejection from the CSPRNG), blinded = EM · r^e mod n; the TokenRequest is
 *    0x0002 ‖ last byte of the key id ‖ blinded (base64url). Nonces and r⁻¹ stay in memory only.
 * 2. the app's backend forwards the requests to the issuer route and hands back its responses;
 * 3. `batch.finalize(responses)`: σ = S · r⁻¹ mod n, checked with WebCrypto's standard RSASSA-PSS
 *    verification (SHA-384, salt length 48); a response that does not verify refuses the whole batch.
 *    The token is input ‖ σ (354 bytes), stored in IndexedDB and spent inside one report's payload.
 *
 * The issuer key is a base64url DER SubjectPublicKeyInfo with the rsaEncryption OID, which WebCrypto
 * imports for RSA-PSS. BigInt exponentiation is not constant-time: it only ever handles r, which is
 * fresh per token and whose timing tells the issuer nothing it could link (blindness holds for any r).
 */
import { b64urlDecode, b64urlEncode, concat, i2osp, randomBytes, sha256, toHex, utf8 } from './bytes.js';
import { AdmissionTokenRequired, InvalidConfig, InvalidParameter, pyRepr, show } from './errors.js';
import { secureRandbelow } from './sampling.js';

export const TOKEN_TYPE = 2;
export const MAX_TOKENS_PER_BATCH = 32;
const NK = 256; // modulus bytes
const NONCE_BYTES = 32;
const SALT_BYTES = 48;
const ISSUER_NAME = utf8('deniable');
const TYPE = i2osp(TOKEN_TYPE, 2);

const subtle = () => globalThis.crypto.subtle;
const sha384 = async (data) => new Uint8Array(await subtle().digest('SHA-384', data));
const os2ip = (bytes) => BigInt(`0x${toHex(bytes) || '0'}`);

function modPow(base, exponent, n) {
  let result = 1n;
  base %= n;
  for (; exponent; exponent >>= 1n) {
    if (exponent & 1n) result = (result * base) % n;
    base = (base * base) % n;
  }
  return result;
}

const gcd = (a, b) => {
  while (b) [a, b] = [b, a % b];
  return a;
};

function modInverse(a, n) {
  let [r0, r1, s0, s1] = [a % n, n, 1n, 0n];
  while (r1) {
    const q = r0 / r1;
    [r0, r1, s0, s1] = [r1, r0 - q * r1, s1, s0 - q * s1];
  }
  return ((s0 % n) + n) % n;
}

/**
 * The issuer key of a descriptor's `admission` (`load_public_key`): `{key, n, keyId}` for a 2048-bit RSA
 * key with e = 65537 in base64url DER SubjectPublicKeyInfo, else null (the caller says why).
 */
export async function loadIssuerKey(text) {
  const raw = typeof text === 'string' && text.length <= 1400 ? b64urlDecode(text) : null;
  if (raw === null) return null;
  let key;
  try {
    key = await subtle().importKey('spki', raw, { name: 'RSA-PSS', hash: 'SHA-384' }, true, ['verify']);
  } catch {
    return null;
  }
  if (key.algorithm.modulusLength !== 8 * NK || toHex(key.algorithm.publicExponent).replace(/^0+/, '') !== '10001') return null;
  const n = os2ip(b64urlDecode((await subtle().exportKey('jwk', key)).n));
  return Object.freeze({ key, n, keyId: await sha256(raw) });
}

/** SHA-256 of the TokenChallenge binding a token to the campaign (issuer "deniable", origin = campaign id). */
export function challengeDigest(campaignId) {
  const origin = utf8(campaignId);
  return sha256(concat(TYPE, i2osp(ISSUER_NAME.length, 2), ISSUER_NAME, Uint8Array.of(0), i2osp(origin.length, 2), origin));
}

/** token_type ‖ nonce ‖ challenge digest ‖ token_key_id: the message the issuer blind-signs. */
export async function tokenInput(nonce, campaignId, keyId) {
  return inputOf(nonce, challengeDigest(campaignId), keyId);
}

const inputOf = (nonce, digest, keyId) => concat(TYPE, nonce, digest, keyId);

async function mgf1(seed, length) {
  const out = new Uint8Array(length);
  for (let counter = 0, offset = 0; offset < length; counter += 1, offset += 48) {
    out.set((await sha384(concat(seed, i2osp(counter, 4)))).subarray(0, length - offset), offset);
  }
  return out;
}

/** EMSA-PSS-ENCODE (RFC 8017 §9.1.1), SHA-384 and MGF1-SHA-384; `salt.length` is sLen. */
export async function emsaPssEncode(msg, emBits, salt) {
  const emLen = (emBits + 7) >> 3;
  const h = await sha384(concat(new Uint8Array(8), await sha384(msg), salt));
  const db = new Uint8Array(emLen - 49);
  db[db.length - salt.length - 1] = 1;
  db.set(salt, db.length - salt.length);
  const mask = await mgf1(h, db.length);
  for (let i = 0; i < db.length; i += 1) db[i] ^= mask[i];
  db[0] &= 0xff >> (8 * emLen - emBits);
  return concat(db, h, Uint8Array.of(0xbc));
}

/** Blind `msg` (RFC 9474 §4.2): `{blinded, inv}`; `salt` and `inv` are drawn unless given (known answers). */
export async function blind(issuer, msg, { salt = randomBytes(SALT_BYTES), inv = null } = {}) {
  const { n } = issuer;
  const m = os2ip(await emsaPssEncode(msg, 8 * NK - 1, salt));
  if (gcd(m, n) !== 1n) throw new InvalidParameter('the encoded message is not invertible modulo n; blind it again');
  let r;
  if (inv === null) {
    do r = 1n + secureRandbelow(n - 1n); while (gcd(r, n) !== 1n);
    inv = modInverse(r, n);
  } else r = modInverse(inv, n);
  return { blinded: i2osp((m * modPow(r, 65537n, n)) % n, NK), inv };
}

/** Unblind the issuer's answer into the signature of `msg` (RFC 9474 §4.4) and verify it. */
export async function finalize(issuer, msg, blindSig, inv) {
  const z = os2ip(blindSig);
  if (z >= issuer.n) throw new InvalidParameter('the blind signature is not below the modulus');
  const signature = i2osp((z * inv) % issuer.n, NK);
  if (!(await subtle().verify({ name: 'RSA-PSS', saltLength: SALT_BYTES }, issuer.key, signature, msg))) {
    throw new InvalidParameter("the issuer's blind signature does not verify for this message and key");
  }
  return signature;
}

/** Blinded token requests of one campaign, with their secrets (in memory only): `deniable.client.tokens.TokenBatch`. */
export class TokenBatch {
  #pending;

  constructor(campaignId, issuer, pending) {
    this.campaignId = campaignId;
    this.issuer = issuer;
    this.#pending = pending;
    /** The TokenRequests to forward to the issuer (base64url), in order. */
    this.requests = pending.map((p) => b64urlEncode(concat(TYPE, issuer.keyId.subarray(31), p.blinded)));
    Object.freeze(this);
  }

  /** `count` (1..32) fresh blinded requests for `campaign` (a validated Campaign with `admission`). */
  static async create(campaign, count) {
    if (campaign.admission === null) {
      throw new InvalidConfig(`campaign ${pyRepr(campaign.id)} takes no admission tokens; submit answers without them`);
    }
    if (!Number.isInteger(count) || count < 1 || count > MAX_TOKENS_PER_BATCH) {
      throw new InvalidParameter(`'count' must be a whole number from 1 to ${MAX_TOKENS_PER_BATCH}, got ${show(count)}`);
    }
    const issuer = campaign.issuer;
    const digest = challengeDigest(campaign.id); // the same for every token of the batch
    const pending = [];
    for (let i = 0; i < count; i += 1) {
      const msg = inputOf(randomBytes(NONCE_BYTES), digest, issuer.keyId);
      pending.push({ msg, ...(await blind(issuer, msg)) });
    }
    return new TokenBatch(campaign.id, issuer, pending);
  }

  /** The verified tokens (base64url) of the issuer's responses, one per request in order; else
   * `InvalidParameter` and none is kept. */
  async finalize(responses) {
    const pending = this.#pending;
    if (!Array.isArray(responses) || responses.length !== pending.length) {
      throw new InvalidParameter(
        `the issuer must answer each of the ${pending.length} token requests with one response, got ${Array.isArray(responses) ? responses.length : 'a string'}`,
      );
    }
    const tokens = [];
    for (const [i, response] of responses.entries()) {
      const blindSig = b64urlDecode(response);
      if (blindSig === null || blindSig.length !== NK) throw new InvalidParameter(`a token response must be ${NK} bytes in base64url without padding`);
      tokens.push(b64urlEncode(concat(pending[i].msg, await finalize(this.issuer, pending[i].msg, blindSig, pending[i].inv))));
    }
    return tokens;
  }
}

// -- the device's wallet (client.js calls these with its state and helpers, `inner`) -----------------

/**
 * The oldest unspent token of the campaign, to spend on a new report (`take_token`). `check(t)` runs
 * first in the same read (the budget: Python checks it before it takes a token); `AdmissionTokenRequired`
 * (nothing spent) when the device holds none. The token leaves the wallet in the transaction that stores
 * the report (client.js), which runs under the device's lock, so no other answer takes it meanwhile.
 */
export async function pickToken(inner, config, check) {
  const found = await inner.store.tx('readonly', async (t) => {
    await check(t);
    const mine = (await t.all('tokens')).filter(([, v]) => v.campaign_id === config.id);
    mine.sort((a, b) => a[1].obtained - b[1].obtained || (a[0] < b[0] ? -1 : 1));
    return mine[0]?.[0] ?? null;
  });
  if (found === null) {
    throw new AdmissionTokenRequired(
      `campaign ${pyRepr(config.id)} accepts a report only with an admission token and this device holds none for it: obtain tokens through the app (client.obtainTokens) first; nothing was spent`,
    );
  }
  return found;
}

/** Finalize `batch` with the issuer's `responses` and store its tokens (`add_tokens`); resolves with how
 * many tokens of the campaign the device holds. Nothing is stored when one does not verify. */
export async function addTokens(inner, batch, responses) {
  const tokens = await batch.finalize(responses);
  const at = inner.now();
  await inner.store.tx('readwrite', async (t) => {
    for (const token of tokens) if (!(await t.get('tokens', token))) await t.put('tokens', token, { campaign_id: batch.campaignId, obtained: at });
  });
  return inner.tokens(batch.campaignId);
}
