/**
 * Canonical JSON (RFC 8785, JCS) and the descriptor's pinned fingerprint, as `deniable.shared.
 * canonical_json` and `CampaignConfig.pinned_fingerprint` compute them (docs/wire-format.md §1, §3.1).
 *
 * Keys are sorted by code point, as Python's `sorted` does (the same as JCS's UTF-16 order for every key
 * deniable defines, all ASCII); strings carry only the mandatory escapes (JSON.stringify's, lowercase
 * `\u00xx`); numbers are ECMAScript's shortest form. NaN, infinities, lone surrogates and other types are
 * refused with `InvalidParameter`, as in Python. Limit: integers beyond 2^53 do not survive `JSON.parse`;
 * pass them as BigInt (written as their decimal digits).
 */

import { InvalidParameter } from './rational.js';

const byCodePoint = (a, b) => {
  const x = [...a].map((c) => c.codePointAt(0));
  const y = [...b].map((c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) if (x[i] !== y[i]) return x[i] - y[i];
  return x.length - y.length;
};

function string(text) {
  if (!text.isWellFormed()) {
    throw new InvalidParameter('canonical JSON strings must be valid Unicode (no lone surrogates)');
  }
  return JSON.stringify(text);
}

function write(value, out) {
  if (value === null || value === true || value === false) out.push(String(value));
  else if (value instanceof Number) write(value.valueOf(), out); // a float written '1.0' (json.js)
  else if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new InvalidParameter(`canonical JSON numbers must be finite, got ${value}`);
    out.push(JSON.stringify(value)); // ECMAScript Number::toString; -0 is written 0
  } else if (typeof value === 'bigint') out.push(value.toString());
  else if (typeof value === 'string') out.push(string(value));
  else if (Array.isArray(value)) {
    out.push('[');
    value.forEach((item, i) => {
      if (i) out.push(',');
      write(item, out);
    });
    out.push(']');
  } else if (isPlain(value)) {
    out.push('{');
    Object.keys(value).sort(byCodePoint).forEach((key, i) => {
      if (i) out.push(',');
      out.push(string(key), ':');
      write(value[key], out);
    });
    out.push('}');
  } else {
    throw new InvalidParameter(`canonical JSON cannot encode a ${typeof value}`);
  }
}

function isPlain(value) {
  if (value === null || typeof value !== 'object') return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** The canonical JSON text of `value`. */
export function canonicalText(value) {
  const out = [];
  write(value, out);
  return out.join('');
}

/** The canonical JSON of `value` as UTF-8 bytes. */
export function canonicalJson(value) {
  return new TextEncoder().encode(canonicalText(value));
}

/** Keys that a served descriptor MAY omit, with the value an omission means (docs/wire-format.md §3). */
const DEFAULT_NULL = ['budget', 'adjacency'];
/** Keys written only when set: dropped when null (and group_values when empty, recurring when false). */
const ONLY_WHEN_SET = ['delta', 'budget_delta', 'budget_rho', 'group_size', 'admission'];
const UNPINNED = new Set(['status']);

/**
 * The descriptor as the fingerprint sees it: every key but `status`; `budget` and `adjacency` present
 * (null when absent); `group_values` only when it declares a field, `recurring` only when true, the
 * central options and `admission` only when set, exactly as Python's `CampaignConfig.to_json` writes it.
 */
export function pinnedForm(descriptor) {
  if (!isPlain(descriptor)) throw new InvalidParameter('a campaign descriptor must be a JSON object');
  const pinned = {};
  for (const [key, value] of Object.entries(descriptor)) if (!UNPINNED.has(key)) pinned[key] = value;
  for (const key of DEFAULT_NULL) if (!(key in pinned)) pinned[key] = null;
  for (const key of ONLY_WHEN_SET) if (pinned[key] === null) delete pinned[key];
  if (pinned.recurring === false) delete pinned.recurring;
  if ('group_values' in pinned && isPlain(pinned.group_values) && Object.keys(pinned.group_values).length === 0) {
    delete pinned.group_values;
  }
  return pinned;
}

/** hex(SHA-256(canonical JSON of the pinned form)): the fingerprint a device pins at first use. */
export async function pinnedFingerprint(descriptor) {
  const digest = await globalThis.crypto.subtle.digest('SHA-256', canonicalJson(pinnedForm(descriptor)));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, '0')).join('');
}
