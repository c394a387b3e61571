/** Byte helpers: strict base64url (docs/wire-format.md §1), hex, UTF-8, SHA-256, HMAC. */
import { hmac, sha256 as nobleSha256 } from '@hpke/common';

export const utf8 = (text) => new TextEncoder().encode(text);

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((total, part) => total + part.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}

export const toHex = (bytes) => Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');

/** Lowercase hex of even length to bytes (callers check the pattern first). */
export const fromHex = (hex) => Uint8Array.from(hex.match(/../g) ?? [], (byte) => parseInt(byte, 16));

/** I2OSP(n, w): the big-endian w-byte encoding of n. */
export function i2osp(n, w) {
  const out = new Uint8Array(w);
  let x = BigInt(n);
  for (let i = w - 1; i >= 0; i -= 1) {
    out[i] = Number(x & 0xffn);
    x >>= 8n;
  }
  return out;
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

/** base64url without padding. */
export function b64urlEncode(bytes) {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    const chars = [B64[(n >> 18) & 63], B64[(n >> 12) & 63], B64[(n >> 6) & 63], B64[n & 63]];
    out += chars.join('');
  }
  return out.slice(0, Math.ceil((bytes.length * 4) / 3)); // drop the characters of missing bytes
}

/** Strict base64url: alphabet only, no padding, canonical trailing bits; `null` if not. */
export function b64urlDecode(text) {
  if (typeof text !== 'string' || text.length % 4 === 1 || !/^[A-Za-z0-9_-]*$/.test(text)) return null;
  const out = new Uint8Array(Math.floor((text.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let j = 0;
  for (const ch of text) {
    acc = (acc << 6) | B64.indexOf(ch);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[j++] = (acc >> bits) & 0xff;
    }
  }
  if ((acc & ((1 << bits) - 1)) !== 0) return null; // non-canonical: unused low bits set
  return out;
}

// SHA-256 and HMAC-SHA256 run synchronously in JavaScript (noble's, already in the bundle through
// @hpke/common): an answer makes some forty of them, and each WebCrypto call is an asynchronous round trip
// to another thread that costs more than the hash of a few hundred bytes.
export const sha256 = (data) => nobleSha256(data);

export const hmacSha256 = (key, data) => hmac(nobleSha256, key, data);

/** `n` bytes from the CSPRNG. */
export const randomBytes = (n) => globalThis.crypto.getRandomValues(new Uint8Array(n));
