/**
 * Device keys, pseudonyms, the HPKE info and sealing: the twin of `deniable.shared.envelope.seal`
 * (docs/wire-format.md §4–§7), byte for byte except the HPKE ephemeral key, which is fresh per envelope.
 *
 * - device seed = HMAC-SHA256(device secret, "deniable/device-key/v2" ‖ 0x00 ‖ campaign id); the device key
 *   is its Ed25519 public key (RFC 8032, `@noble/ed25519` over WebCrypto SHA-512);
 * - pseudonym v2 = hex SHA-256("deniable/pseudonym/v2" ‖ 0x00 ‖ len(id) ‖ id ‖ device key);
 *   v1 = hex HMAC-SHA256(secret, "deniable/pseudonym/v1" ‖ 0x00 ‖ id);
 * - info = "deniable/hpke-info/v1" ‖ 0x00 ‖ I2OSP(v, 2) ‖ len(id) ‖ id ‖ report id (16) ‖ pseudonym (32);
 * - HPKE base mode, single shot, empty aad, DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / ChaCha20-Poly1305
 *   (`@hpke/core`, `@hpke/dhkem-x25519`, `@hpke/chacha20poly1305`); sealed bytes enc ‖ ct ‖ tag;
 * - v2: the plaintext is the canonical JSON padded with zeros to the campaign's `paddedLength`, and the
 *   envelope carries `device_key` and `sig` = Ed25519(seed, "deniable/envelope-signature/v2" ‖ 0x00 ‖ info ‖
 *   enc_and_ct) — the proof of possession the aggregator checks before it decrypts anything.
 */

import { CipherSuite, HkdfSha256 } from '@hpke/core';
import { Chacha20Poly1305 } from '@hpke/chacha20poly1305';
import { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519';
import * as ed from '@noble/ed25519';
import { canonicalJson } from './canonical.js';
import { b64urlEncode, concat, fromHex, hmacSha256, i2osp, randomBytes, sha256, toHex, utf8 } from './bytes.js';
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

let suite;
/** The one HPKE suite of the wire format (created lazily, shared). */
export function hpkeSuite() {
  suite ??= new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Chacha20Poly1305() });
  return suite;
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
  return ed.getPublicKeyAsync(await deviceSeed(secret, campaignId));
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

/** A fresh report id: 16 CSPRNG bytes as 32 hex digits. */
export const newReportId = () => toHex(randomBytes(16));

/**
 * Seal `payload` for `campaign` (a validated Campaign) in its format version: the envelope JSON object
 * (`{v, report_id, pseudonym, ct[, device_key, sig]}`), exactly what Python's `Envelope.to_json` gives.
 */
export async function seal(payload, { campaign, secret, reportId = newReportId() }) {
  checkSecret(secret);
  if (campaign.trustModel === 'shuffled') {
    const { sealShuffled } = await import('./shuffle.js'); // shuffled campaigns only: in the bundle's second file
    return sealShuffled(payload, { campaign, secret, reportId, hpkeSeal, canonicalJson, padPlaintext });
  }
  const version = campaign.envelopeVersion ?? campaign.formatVersion; // a survey's envelopes are version 2
  let plaintext = canonicalJson(payload);
  if (plaintext.length > MAX_PLAINTEXT_BYTES) {
    throw new InvalidParameter(`the payload is ${plaintext.length} bytes of JSON; at most ${MAX_PLAINTEXT_BYTES} can be sealed`);
  }
  if (version >= 2) plaintext = padPlaintext(plaintext, campaign.paddedLength);
  let seed = null;
  let deviceKey = null;
  let pseudonym;
  if (version >= 2) {
    seed = await deviceSeed(secret, campaign.id);
    deviceKey = await ed.getPublicKeyAsync(seed);
    pseudonym = await pseudonymOfKey(deviceKey, campaign.id);
  } else pseudonym = await makePseudonym(secret, campaign.id, 1);
  const info = hpkeInfo(campaign.id, version, reportId, pseudonym);
  const hpke = hpkeSuite();
  let sealed;
  try {
    const recipientPublicKey = await hpke.kem.deserializePublicKey(campaign.publicKeyBytes.slice().buffer);
    const { enc, ct } = await hpke.seal({ recipientPublicKey, info: info.slice().buffer }, plaintext.buffer);
    sealed = concat(new Uint8Array(enc), new Uint8Array(ct));
  } catch (error) {
    throw new InvalidParameter(`cannot encrypt to this public key (${error?.message ?? error})`);
  }
  const envelope = { v: version, report_id: reportId, pseudonym, ct: b64urlEncode(sealed) };
  if (version === 1) return envelope;
  envelope.device_key = b64urlEncode(deviceKey);
  envelope.sig = b64urlEncode(await ed.signAsync(signedMessage(info, sealed), seed));
  return envelope;
}

/** HPKE SealBase (the suite of §5, empty aad) of `plaintext` to `publicKey` under `info`: enc ‖ ct. */
export async function hpkeSeal(publicKey, info, plaintext, what) {
  const hpke = hpkeSuite();
  try {
    const recipientPublicKey = await hpke.kem.deserializePublicKey(publicKey.slice().buffer);
    const { enc, ct } = await hpke.seal({ recipientPublicKey, info: info.slice().buffer }, plaintext.slice().buffer);
    return concat(new Uint8Array(enc), new Uint8Array(ct));
  } catch (error) {
    throw new InvalidParameter(`cannot encrypt to ${what} (${error?.message ?? error})`);
  }
}
