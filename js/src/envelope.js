/**
 * Device keys, pseudonyms, the HPKE info and sealing: the twin of `deniable.shared.envelope.seal`
 * (docs/wire-format.md §4–§7), byte for byte except the HPKE ephemeral key, which is fresh per envelope.
 *
 * - device seed = HMAC-SHA256(device secret, "deniable/device-key/v2" ‖ 0x00 ‖ campaign id); the device key
 *   is its Ed25519 public key (RFC 8032: WebCrypto's Ed25519, else `@noble/ed25519` from compat.js);
 * - pseudonym v2 = hex SHA-256("deniable/pseudonym/v2" ‖ 0x00 ‖ len(id) ‖ id ‖ device key);
 *   v1 = hex HMAC-SHA256(secret, "deniable/pseudonym/v1" ‖ 0x00 ‖ id);
 * - info = "deniable/hpke-info/v1" ‖ 0x00 ‖ I2OSP(v, 2) ‖ len(id) ‖ id ‖ report id (16) ‖ pseudonym (32);
 * - HPKE base mode, single shot, empty aad, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / ChaCha20-Poly1305
 *   (`@hpke/core` with WebCrypto's X25519, else `@hpke/dhkem-x25519`; `@hpke/chacha20poly1305`); sealed
 *   bytes enc ‖ ct ‖ tag;
 * - v2: the plaintext is the canonical JSON padded with zeros to the campaign's `paddedLength`, and the
 *   envelope carries `device_key` and `sig` = Ed25519(seed, "deniable/envelope-signature/v2" ‖ 0x00 ‖ info ‖
 *   enc_and_ct) — the proof of possession the aggregator checks before it decrypts anything.
 */

import { CipherSuite, DhkemX25519HkdfSha256, KdfId } from '@hpke/core';
import { Chacha20Poly1305 } from '@hpke/chacha20poly1305';
import { canonicalJson } from './canonical.js';
import { b64urlDecode, b64urlEncode, concat, fromHex, hmacSha256, i2osp, randomBytes, sha256, toHex, utf8 } from './bytes.js';
import { InvalidParameter } from './errors.js';

export const DEVICE_SECRET_BYTES = 32;
export const MAX_PLAINTEXT_BYTES = 60 * 1024;
const PSEUDONYM_V1 = utf8('deniable/pseudonym/v1');
const PSEUDONYM_V2 = utf8('deniable/pseudonym/v2');
const INFO_LABEL = utf8('deniable/hpke-info/v1');
const DEVICE_KEY_LABEL = utf8('deniable/device-key/v2');
const SIGNATURE_LABEL = utf8('deniable/envelope-signature/v2');
const ZERO = Uint8Array.of(0);
const CAMPAIGN_ID_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;

const HPKE_V1 = utf8('HPKE-v1');
const bytesOf = (x) => new Uint8Array(x); // an ArrayBuffer or a view, as @hpke/core passes them

/**
 * The KDF of the suite, HKDF-SHA256 (RFC 5869) with HPKE's labels (RFC 9180 §4), computed synchronously
 * with noble's HMAC (bytes.js) rather than WebCrypto: the same bytes, without the asynchronous WebCrypto
 * round trips (an import and a sign, or a deriveBits, each) that one seal otherwise makes in its key
 * schedule (RFC 9180 §5.1). Only the key schedule uses it: the KEM (@hpke/core's or @hpke/dhkem-x25519's
 * DhkemX25519HkdfSha256) builds its own WebCrypto HKDF for ExtractAndExpand. It implements @hpke/core's
 * KDF interface (`init`, the labeled builders, `extract`, `expand`, `extractAndExpand` and the labeled
 * forms; results are ArrayBuffers).
 */
class Hkdf {
  id = KdfId.HkdfSha256;

  hashSize = 32;

  #suiteId;

  init(suiteId) {
    this.#suiteId = suiteId;
  }

  buildLabeledIkm(label, ikm) {
    return concat(HPKE_V1, this.#suiteId, label, bytesOf(ikm));
  }

  buildLabeledInfo(label, info, len) {
    return concat(i2osp(len, 2), HPKE_V1, this.#suiteId, label, bytesOf(info));
  }

  async extract(salt, ikm) {
    return hmacSha256(salt.byteLength ? bytesOf(salt) : new Uint8Array(32), bytesOf(ikm)).buffer;
  }

  async expand(prk, info, len) {
    const key = bytesOf(prk);
    const out = new Uint8Array(len);
    let block = new Uint8Array(0);
    for (let i = 1, at = 0; at < len; i += 1, at += block.length) {
      block = hmacSha256(key, concat(block, bytesOf(info), Uint8Array.of(i)));
      out.set(block.subarray(0, len - at), at);
    }
    return out.buffer;
  }

  async extractAndExpand(salt, ikm, info, len) {
    return this.expand(await this.extract(salt, ikm), info, len);
  }

  async labeledExtract(salt, label, ikm) {
    return this.extract(salt, this.buildLabeledIkm(label, ikm));
  }

  async labeledExpand(prk, label, info, len) {
    return this.expand(prk, this.buildLabeledInfo(label, info, len), len);
  }
}

/**
 * The pure-JavaScript X25519 and Ed25519 (compat.js, the bundle's third file, survey-compat.js), loaded
 * only in a browser whose WebCrypto lacks them: WebCrypto's are native code and take a third of the time.
 */
let compat = null;
const loadCompat = async () => (compat ??= await import('./compat.js'));
const subtle = () => globalThis.crypto.subtle;

const suites = new Map();
/**
 * The one HPKE suite of the wire format, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / ChaCha20-Poly1305,
 * created once and shared: its KEM is @hpke/core's (WebCrypto's X25519), or @hpke/dhkem-x25519's pure-JS
 * X25519 where WebCrypto has none (or with `{compat: true}`, for tests), with the KEM's own HKDF; the
 * suite's KDF, that of the key schedule, is the synchronous one.
 */
export async function hpkeSuite({ compat: pure = false } = {}) {
  let suite = suites.get(pure);
  if (!suite) {
    let native = !pure;
    if (native) native = await subtle().generateKey({ name: 'X25519' }, false, ['deriveBits']).then(() => true, () => false);
    const kem = native ? new DhkemX25519HkdfSha256() : new (await loadCompat()).DhkemX25519HkdfSha256();
    suite = new CipherSuite({ kem, kdf: new Hkdf(), aead: new Chacha20Poly1305() });
    suites.set(pure, suite);
  }
  return suite;
}

/** The recipient key of `bytes` (32), deserialized once per key and kept (a campaign's key, a shuffler's). */
const recipients = new Map();
async function recipientKey(bytes) {
  const hex = toHex(bytes);
  let key = recipients.get(hex);
  if (!key) {
    key = await (await hpkeSuite()).kem.deserializePublicKey(bytes.slice().buffer);
    if (recipients.size > 64) recipients.clear();
    recipients.set(hex, key);
  }
  return key;
}

/** PKCS #8 of an Ed25519 seed: this fixed prefix, then the 32 bytes (RFC 8410). */
const ED25519_PKCS8 = fromHex('302e020100300506032b657004220420');
let nativeEd = null; // whether WebCrypto signs with Ed25519 (known after the first key)

/**
 * `{publicKey, sign(message)}` of the Ed25519 key of `seed` (RFC 8032): WebCrypto's, else compat.js's
 * (@noble/ed25519). Both are the same deterministic signature scheme, so the bytes are identical.
 */
export async function ed25519Key(seed, { compat: pure = false } = {}) {
  if (!pure && nativeEd !== false) {
    try {
      const key = await subtle().importKey('pkcs8', concat(ED25519_PKCS8, seed), { name: 'Ed25519' }, true, ['sign']);
      const publicKey = b64urlDecode((await subtle().exportKey('jwk', key)).x);
      nativeEd = true;
      return { publicKey, sign: async (message) => new Uint8Array(await subtle().sign({ name: 'Ed25519' }, key, message)) };
    } catch (error) {
      if (nativeEd) throw error;
      nativeEd = false;
    }
  }
  const ed = await loadCompat();
  return { publicKey: await ed.edPublicKey(seed), sign: (message) => ed.edSign(message, seed) };
}

function checkSecret(secret) {
  if (!(secret instanceof Uint8Array) || secret.length !== DEVICE_SECRET_BYTES) {
    throw new InvalidParameter(`the device secret must be exactly ${DEVICE_SECRET_BYTES} bytes`);
  }
}

function checkCampaignId(id) {
  if (typeof id !== 'string' || !CAMPAIGN_ID_RE.test(id)) {
    throw new InvalidParameter(`'campaign_id' must match ^[a-z0-9][a-z0-9-]{0,63}$, got ${JSON.stringify(String(id).slice(0, 70))}`);
  }
}

/** The 32-byte Ed25519 seed of the device's key in this campaign (HMAC of the secret). */
export async function deviceSeed(secret, campaignId) {
  checkSecret(secret);
  checkCampaignId(campaignId);
  return hmacSha256(secret, concat(DEVICE_KEY_LABEL, ZERO, utf8(campaignId)));
}

/** The raw 32-byte Ed25519 public key of the device in this campaign. */
export async function devicePublicKey(secret, campaignId) {
  return (await ed25519Key(await deviceSeed(secret, campaignId))).publicKey;
}

export async function pseudonymOfKey(deviceKey, campaignId) {
  checkCampaignId(campaignId);
  const id = utf8(campaignId);
  return toHex(await sha256(concat(PSEUDONYM_V2, ZERO, Uint8Array.of(id.length), id, deviceKey)));
}

/** The device's pseudonym in a campaign for a format version (2: of the device key, 1: HMAC of the secret). */
export async function makePseudonym(secret, campaignId, version = 2) {
  checkSecret(secret);
  checkCampaignId(campaignId);
  if (version === 1) return toHex(await hmacSha256(secret, concat(PSEUDONYM_V1, ZERO, utf8(campaignId))));
  return pseudonymOfKey(await devicePublicKey(secret, campaignId), campaignId);
}

export function hpkeInfo(campaignId, version, reportId, pseudonym) {
  checkCampaignId(campaignId);
  if (!/^[0-9a-f]{32}$/.test(reportId)) throw new InvalidParameter(`'report_id' must be 32 lowercase hex digits, got ${JSON.stringify(reportId)}`);
  if (!/^[0-9a-f]{64}$/.test(pseudonym)) throw new InvalidParameter(`'pseudonym' must be 64 lowercase hex digits`);
  const id = utf8(campaignId);
  return concat(INFO_LABEL, ZERO, i2osp(version, 2), Uint8Array.of(id.length), id, fromHex(reportId), fromHex(pseudonym));
}

export const signedMessage = (info, sealed) => concat(SIGNATURE_LABEL, ZERO, info, sealed);

export function padPlaintext(plaintext, length) {
  if (!Number.isInteger(length) || length < 2 || length > MAX_PLAINTEXT_BYTES) {
    throw new InvalidParameter(`'padded_length' must be an integer in [2, ${MAX_PLAINTEXT_BYTES}], got ${length}`);
  }
  if (plaintext.length > length) {
    throw new InvalidParameter(
      `the payload is ${plaintext.length} bytes of JSON, more than the campaign's padded length ${length}; it ` +
      'breaks a bound of the descriptor',
    );
  }
  const out = new Uint8Array(length);
  out.set(plaintext);
  return out;
}

/**
 * `{key, pseudonym}` of the device in a campaign (format 2): its Ed25519 key (`ed25519Key` of `deviceSeed`)
 * and the pseudonym of its public key. Both depend only on (secret, campaign id), so they are derived once
 * per pair and kept, as the recipient keys are, rather than re-imported and re-exported on every seal.
 */
const identities = new Map();
async function deviceIdentity(secret, campaignId) {
  const slot = `${toHex(secret)}/${campaignId}`;
  let identity = identities.get(slot);
  if (!identity) {
    const key = await ed25519Key(await deviceSeed(secret, campaignId));
    identity = { key, pseudonym: await pseudonymOfKey(key.publicKey, campaignId) };
    if (identities.size > 64) identities.clear();
    identities.set(slot, identity);
  }
  return identity;
}

/** A fresh report id: 16 CSPRNG bytes as 32 hex digits. */
export const newReportId = () => toHex(randomBytes(16));

/**
 * Seal `payload` for `campaign` (a validated Campaign) in its format version: the envelope JSON object
 * (`{v, report_id, pseudonym, ct[, device_key, sig]}`), exactly what Python's `Envelope.to_json` gives.
 * `token`: the admission token of a shuffled campaign (its outer layer; other campaigns carry it in `payload`).
 */
export async function seal(payload, { campaign, secret, reportId = newReportId(), token = null }) {
  checkSecret(secret);
  if (campaign.trustModel === 'shuffled') { // the admission token travels in the outer layer
    const { sealShuffled } = await import('./shuffle.js'); // shuffled campaigns only: in the bundle's second file
    return sealShuffled(payload, { campaign, secret, reportId, token, hpkeSeal, canonicalJson, padPlaintext });
  }
  const version = campaign.envelopeVersion ?? campaign.formatVersion; // a survey's envelopes are version 2
  let plaintext = canonicalJson(payload);
  if (plaintext.length > MAX_PLAINTEXT_BYTES) {
    throw new InvalidParameter(`the payload is ${plaintext.length} bytes of JSON; at most ${MAX_PLAINTEXT_BYTES} can be sealed`);
  }
  if (version >= 2) plaintext = padPlaintext(plaintext, campaign.paddedLength);
  let key = null;
  let pseudonym;
  if (version >= 2) ({ key, pseudonym } = await deviceIdentity(secret, campaign.id));
  else pseudonym = await makePseudonym(secret, campaign.id, 1);
  const info = hpkeInfo(campaign.id, version, reportId, pseudonym);
  const sealed = await hpkeSeal(campaign.publicKeyBytes, info, plaintext, 'this public key');
  const envelope = { v: version, report_id: reportId, pseudonym, ct: b64urlEncode(sealed) };
  if (version === 1) return envelope;
  envelope.device_key = b64urlEncode(key.publicKey);
  envelope.sig = b64urlEncode(await key.sign(signedMessage(info, sealed)));
  return envelope;
}

/** HPKE SealBase (the suite of §5, empty aad) of `plaintext` to `publicKey` under `info`: enc ‖ ct. */
export async function hpkeSeal(publicKey, info, plaintext, what) {
  try {
    const recipientPublicKey = await recipientKey(publicKey);
    const { enc, ct } = await (await hpkeSuite()).seal({ recipientPublicKey, info: info.slice().buffer }, plaintext.slice().buffer);
    return concat(new Uint8Array(enc), new Uint8Array(ct));
  } catch (error) {
    throw new InvalidParameter(`cannot encrypt to ${what} (${error?.message ?? error})`);
  }
}
