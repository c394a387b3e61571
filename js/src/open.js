/**
 * Test-only: verify the proof of possession and open an envelope with the campaign's private key, as the
 * aggregator does (`deniable.shared.envelope.open_envelope`). Not exported by the package's index nor
 * bundled into the page: a device never holds a campaign's private key. The tests use it to open Python's
 * envelopes in JS (and the Python tests open the JS envelopes with the aggregator's own code).
 */
import * as ed from '@noble/ed25519';
import { b64urlDecode } from './bytes.js';
import { InvalidReport } from './errors.js';
import { hpkeInfo, hpkeSuite, pseudonymOfKey, signedMessage } from './envelope.js';
import { parseJson } from './json.js';

export async function openEnvelope(envelope, { campaignId, privateKey, paddedLength = null }) {
  const sealed = b64urlDecode(envelope.ct);
  if (sealed === null) throw new InvalidReport("envelope 'ct' must be base64url without padding");
  if (envelope.v >= 2 && paddedLength !== null && sealed.length !== 48 + paddedLength) {
    throw new InvalidReport(`envelope 'ct' must be exactly ${48 + paddedLength} bytes`);
  }
  const info = hpkeInfo(campaignId, envelope.v, envelope.report_id, envelope.pseudonym);
  if (envelope.v >= 2) {
    const key = b64urlDecode(envelope.device_key);
    const sig = b64urlDecode(envelope.sig);
    const failed = new InvalidReport('the proof of possession fails');
    if (key === null || key.length !== 32 || sig === null || sig.length !== 64) throw failed;
    if ((await pseudonymOfKey(key, campaignId)) !== envelope.pseudonym) throw failed;
    let ok = false;
    try {
      ok = await ed.verifyAsync(sig, signedMessage(info, sealed), key, { zip215: false });
    } catch {
      ok = false;
    }
    if (!ok) throw failed;
  }
  const hpke = await hpkeSuite();
  let plaintext;
  try {
    const recipientKey = await hpke.kem.deserializePrivateKey(privateKey.slice().buffer);
    plaintext = new Uint8Array(await hpke.open(
      { recipientKey, enc: sealed.slice(0, 32).buffer, info: info.slice().buffer }, sealed.slice(32).buffer,
    ));
  } catch {
    throw new InvalidReport(`ciphertext does not decrypt for campaign '${campaignId}' with this report id and pseudonym`);
  }
  let end = plaintext.length;
  if (envelope.v >= 2) while (end > 0 && plaintext[end - 1] === 0) end -= 1;
  const text = new TextDecoder('utf-8', { fatal: true }).decode(plaintext.slice(0, end));
  return { text, payload: parseJson(text, { strict: true }), padded: plaintext };
}

/** Test-only: open a shuffled envelope as the shuffler (outer) and then as the aggregator (inner). */
export async function openShuffled(envelope, { campaignId, shufflerKey, aggregatorKey, paddedLength }) {
  const { innerInfo, outerInfo } = await import('./shuffle.js');
  const hpke = await hpkeSuite();
  const open = async (key, sealed, info) => {
    const recipientKey = await hpke.kem.deserializePrivateKey(key.slice().buffer);
    return new Uint8Array(await hpke.open({ recipientKey, enc: sealed.slice(0, 32).buffer, info: info.slice().buffer }, sealed.slice(32).buffer));
  };
  const outerText = new TextDecoder('utf-8', { fatal: true }).decode(await open(shufflerKey, b64urlDecode(envelope.ct), outerInfo(campaignId, envelope.report_id)));
  const outer = parseJson(outerText, { strict: true });
  const inner = b64urlDecode(outer.inner);
  if (inner.length !== 48 + paddedLength) throw new InvalidReport(`an inner ciphertext of campaign '${campaignId}' is ${48 + paddedLength} bytes, got ${inner.length}`);
  const padded = await open(aggregatorKey, inner, innerInfo(campaignId));
  let end = padded.length;
  while (end > 0 && padded[end - 1] === 0) end -= 1;
  return { outerText, outer, innerText: new TextDecoder().decode(padded.slice(0, end)), padded };
}

/** Test-only: the message a shuffler signs for a batch (docs/wire-format.md §12.6). */
export async function batchMessage(campaignId, batchId, reports) {
  const { concat, fromHex, i2osp, sha256, utf8 } = await import('./bytes.js');
  const id = utf8(campaignId);
  return concat(utf8('deniable/shuffled-batch/v1'), Uint8Array.of(0), Uint8Array.of(id.length), id, fromHex(batchId),
    i2osp(reports.length, 4), await sha256(concat(...reports)));
}
