/**
 * Shuffled campaigns (docs/wire-format.md §12, `deniable.shared.shuffle`): the descriptor's `shuffler`
 * object, the dedup token, both info strings and the two layers of a report. In the bundle's second file
 * (loaded only for a shuffled campaign); the HPKE and canonical-JSON functions are passed in by the main
 * bundle so that the crypto libraries are not shipped twice.
 */
import { b64urlDecode, b64urlEncode, concat, fromHex, hmacSha256, i2osp, toHex, utf8 } from './bytes.js';
import { InvalidConfig, InvalidParameter, fmtG, pyRepr, show } from './errors.js';
import { isJsonInt, isJsonNumber, isPlainObject, unbox } from './json.js';

const ZERO = Uint8Array.of(0);
const CAMPAIGN_ID_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
const checkCampaignId = (id) => {
  if (typeof id !== 'string' || !CAMPAIGN_ID_RE.test(id)) throw new InvalidParameter(`'campaign_id' must match ^[a-z0-9][a-z0-9-]{0,63}$, got ${JSON.stringify(String(id).slice(0, 70))}`);
};

/** The descriptor's `shuffler` object (`ShufflerInfo.from_json`): where devices send, the shuffler's keys. */
export async function checkShuffler(obj, { isSmallOrder, SHUFFLE_MIN_BATCH_RANGE, reprList, sortedCodePoints, pyLen }) {
  const keys = ['min_batch', 'public_key', 'url', 'verify_key'];
  if (!isPlainObject(obj) || sortedCodePoints(Object.keys(obj)).join() !== keys.join()) {
    const gotKeys = isPlainObject(obj) ? `[${sortedCodePoints(Object.keys(obj)).map(pyRepr).join(', ')}]` : show(obj);
    throw new InvalidConfig(`'shuffler' must be an object with exactly the keys [${reprList(keys)}], got ${gotKeys}`);
  }
  const { url } = obj;
  if (typeof url !== 'string' || pyLen(url) < 1 || pyLen(url) > 2000) {
    throw new InvalidConfig(`'shuffler.url' must be a URL of at most 2000 characters, got ${show(url)}`);
  }
  let parsed = null;
  try {
    parsed = new URL(url);
  } catch {
    parsed = null;
  }
  if (!parsed || !['http:', 'https:'].includes(parsed.protocol) || !parsed.host || url.includes('?') || url.includes('#')) {
    throw new InvalidConfig(`'shuffler.url' must be an http:// or https:// URL without query or fragment, got ${show(url)}`);
  }
  const raw = b64urlDecode(obj.public_key);
  if (typeof obj.public_key !== 'string' || raw === null || raw.length !== 32) {
    const shown = typeof obj.public_key === 'string' && pyLen(obj.public_key) <= 64 ? pyRepr(obj.public_key) : 'a str';
    throw new InvalidConfig(`'shuffler.public_key' must be 32 bytes in base64url without padding (43 characters), got ${shown}`);
  }
  if (isSmallOrder(raw)) throw new InvalidConfig('the public key is a small-order X25519 point; nothing can be sealed to it');
  const verify = b64urlDecode(obj.verify_key);
  if (verify === null || verify.length !== 32) {
    throw new InvalidConfig("'shuffler.verify_key' must be a 32-byte Ed25519 public key in base64url (43 characters)");
  }
  const [low, high] = SHUFFLE_MIN_BATCH_RANGE;
  if (!isJsonInt(obj.min_batch) || obj.min_batch < low || obj.min_batch > high) {
    throw new InvalidConfig(
      `'shuffler.min_batch' must be a whole number of reports in [${low}, ${high}] (the smallest batch the shuffler forwards), got ${show(obj.min_batch)}`,
    );
  }
  return Object.freeze({ url, public_key: obj.public_key, verify_key: obj.verify_key, min_batch: obj.min_batch, publicKeyBytes: raw });
}

const INNER_LABEL = utf8('deniable/shuffled-inner/v1');
const OUTER_LABEL = utf8('deniable/shuffled-outer/v1');
const DEDUP_LABEL = utf8('deniable/shuffle-dedup/v1');

const campaignBytes = (campaignId) => {
  checkCampaignId(campaignId);
  const id = utf8(campaignId);
  return concat(Uint8Array.of(id.length), id);
};

/** "deniable/shuffled-inner/v1" ‖ 0x00 ‖ I2OSP(v, 2) ‖ len(id) ‖ id: no report id, nothing of the device. */
export const innerInfo = (campaignId, version = 2) => concat(INNER_LABEL, ZERO, i2osp(version, 2), campaignBytes(campaignId));

/** "deniable/shuffled-outer/v1" ‖ 0x00 ‖ I2OSP(v, 2) ‖ len(id) ‖ id ‖ report id (16 raw bytes). */
export function outerInfo(campaignId, reportId, version = 2) {
  if (!/^[0-9a-f]{32}$/.test(reportId)) throw new InvalidParameter(`'report_id' must be 32 lowercase hex digits, got ${JSON.stringify(reportId)}`);
  return concat(OUTER_LABEL, ZERO, i2osp(version, 2), campaignBytes(campaignId), fromHex(reportId));
}

/** The device's dedup token (64 hex), seen by the shuffler only: HMAC(secret, label ‖ 0 ‖ len(id) ‖ id). */
export async function dedupToken(secret, campaignId) {
  if (!(secret instanceof Uint8Array) || secret.length !== 32) throw new InvalidParameter('the device secret must be exactly 32 bytes');
  return toHex(await hmacSha256(secret, concat(DEDUP_LABEL, ZERO, campaignBytes(campaignId))));
}


/**
 * A shuffled campaign's envelope (`seal_shuffled`): the padded inner payload `{"report": ...}` sealed to
 * the campaign key (no report id, pseudonym or signature), then `{campaign_id, dedup, inner}` sealed to
 * the shuffler's key under the report id: `{v: 2, report_id, ct}` (with `token`, the admission token, in the
 * outer object of a campaign with admission).
 */
export async function sealShuffled(innerPayload, { campaign, secret, reportId, token = null, hpkeSeal, canonicalJson, padPlaintext }) {
  const inner = await hpkeSeal(
    campaign.publicKeyBytes, innerInfo(campaign.id), padPlaintext(canonicalJson(innerPayload), campaign.paddedLength), 'this public key',
  );
  const outer = { campaign_id: campaign.id, dedup: await dedupToken(secret, campaign.id), inner: b64urlEncode(inner) };
  if (token !== null) outer.token = token;
  const ct = await hpkeSeal(campaign.shuffler.publicKeyBytes, outerInfo(campaign.id, reportId), canonicalJson(outer), "the shuffler's public key");
  return { v: 2, report_id: reportId, ct: b64urlEncode(ct) };
}

/** The rules of a shuffled campaign's descriptor (`_check_shuffled`): no rounds, no group fields, format 2,
 * the local rules (`checkLocal`), and `delta`. `c` is the Campaign being built. */
export function checkShuffled(c, { checkLocal, SHUFFLE_DELTA_RANGE }) {
  if (c.recurring) throw new InvalidConfig("'recurring' is not available for shuffled campaigns (the shuffler counts one report per device)");
  if (c.groupFields.length) {
    throw new InvalidConfig(
      'shuffled campaigns take no group fields: a group value travels beside the report to the aggregator and splits the batch ' +
      'into smaller anonymity sets, which the batch\'s (ε, δ) does not cover',
    );
  }
  if (c.formatVersion < 2) throw new InvalidConfig('shuffled campaigns use format version 2');
  const { delta } = c;
  c.delta = null;
  checkLocal();
  const [low, high] = SHUFFLE_DELTA_RANGE;
  const x = unbox(delta);
  if (!isJsonNumber(delta) || !(low <= x && x <= high)) {
    throw new InvalidConfig(
      `a shuffled campaign needs 'delta', a number in [${fmtG(low)}, ${fmtG(high)}]: the δ of the central (ε, δ) its batches satisfy, got ${show(delta)}`,
    );
  }
  c.delta = x;
}
