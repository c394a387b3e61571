/**
 * The bundle's third file (survey-compat.js): pure-JavaScript X25519 (@hpke/dhkem-x25519, for HPKE's KEM)
 * and Ed25519 (@noble/ed25519, over WebCrypto's SHA-512), loaded by envelope.js only in a browser whose
 * WebCrypto has no X25519 or Ed25519 (Chromium before 133, Firefox before 130, Safari before 17).
 */
import * as ed from '@noble/ed25519';

export { DhkemX25519HkdfSha256 } from '@hpke/dhkem-x25519';
export const edPublicKey = (seed) => ed.getPublicKeyAsync(seed);
export const edSign = (message, seed) => ed.signAsync(message, seed);
