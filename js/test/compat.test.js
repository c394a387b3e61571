/** The pure-JS fallbacks of compat.js (survey-compat.js), used where WebCrypto lacks X25519 or Ed25519,
 * give what WebCrypto gives: the same Ed25519 keys and signatures, HPKE envelopes that open. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { concat, utf8 } from '../src/bytes.js';
import { ed25519Key, hpkeSuite } from '../src/envelope.js';
import { fromHex, load, toHex } from './vectors.js';

test('Ed25519 of compat.js equals WebCrypto\'s, key and signature', async () => {
  for (const byte of [0, 7, 255]) {
    const seed = new Uint8Array(32).fill(byte);
    const [native, pure] = [await ed25519Key(seed), await ed25519Key(seed, { compat: true })];
    assert.equal(toHex(pure.publicKey), toHex(native.publicKey));
    const message = utf8(`message ${byte}`);
    assert.equal(toHex(await pure.sign(message)), toHex(await native.sign(message)));
  }
});

test('HPKE sealed with the pure-JS X25519 opens with WebCrypto\'s, and back', async () => {
  const wire = load('wire-v2.json');
  const [native, pure] = [await hpkeSuite(), await hpkeSuite({ compat: true })];
  assert.notEqual(native, pure);
  const info = utf8('deniable test info');
  const plaintext = concat(utf8('{"report":1}'), new Uint8Array(20));
  for (const [sender, recipient] of [[pure, native], [native, pure]]) {
    const pair = await recipient.kem.deriveKeyPair(fromHex(wire.keypair.private_key_hex).buffer); // as IKM
    const recipientPublicKey = await sender.kem.deserializePublicKey(await recipient.kem.serializePublicKey(pair.publicKey));
    const { enc, ct } = await sender.seal({ recipientPublicKey, info: info.buffer }, plaintext.slice().buffer);
    const opened = await recipient.open({ recipientKey: pair.privateKey, enc, info: info.buffer }, ct);
    assert.equal(toHex(new Uint8Array(opened)), toHex(plaintext));
  }
});
