/**
 * The errors of the browser client, with the `code` of their twins in `deniable.shared.errors`, so an
 * application can branch on `error.code` exactly as it would on the Python exception's `code`. Messages
 * say what is wrong, where, and what to do. Nothing else escapes the package: a failure of WebCrypto or
 * IndexedDB is wrapped in a `DeviceStateError`, a network failure in a `TransportError`.
 */
import { InvalidParameter } from './rational.js';

export { InvalidParameter };

export class DeniableError extends Error {
  constructor(message, fields = {}) {
    super(message);
    this.name = new.target.name;
    Object.assign(this, fields);
  }
}

const define = (name, code, base = DeniableError) => {
  const cls = { [name]: class extends base {} }[name];
  cls.prototype.code = code;
  return cls;
};

InvalidParameter.prototype.code = 'invalid_parameter';
export const InvalidReport = define('InvalidReport', 'invalid_report');
export const InvalidConfig = define('InvalidConfig', 'invalid_config');
export const BudgetExceeded = define('BudgetExceeded', 'budget_exceeded');
export const AdmissionTokenRequired = define('AdmissionTokenRequired', 'admission_token_required');
export const UnknownCampaign = define('UnknownCampaign', 'unknown_campaign');
export const CampaignClosed = define('CampaignClosed', 'campaign_closed');
export const TransportError = define('TransportError', 'transport_error');
export const DeliveryError = define('DeliveryError', 'delivery_error', TransportError);
export const RedirectRefused = define('RedirectRefused', 'redirect_refused', DeliveryError);
export const AccessDenied = define('AccessDenied', 'access_denied', DeliveryError);
export const CampaignNotFound = define('CampaignNotFound', 'campaign_not_found', DeliveryError);
export const BatchTooLarge = define('BatchTooLarge', 'batch_too_large', DeliveryError);
export const RateLimited = define('RateLimited', 'rate_limited', DeliveryError);
export const AggregatorUnavailable = define('AggregatorUnavailable', 'aggregator_unavailable', DeliveryError);
export const BatchRefused = define('BatchRefused', 'batch_refused', DeliveryError);
export const MalformedReply = define('MalformedReply', 'malformed_reply', DeliveryError);
export const DeviceStateError = define('DeviceStateError', 'device_state_error');

/** `AnswerChanged` is an `InvalidParameter` (as in Python) with its own code. */
export class AnswerChanged extends InvalidParameter {
  constructor(message, fields = {}) {
    super(message);
    this.name = 'AnswerChanged';
    this.code = 'answer_changed';
    Object.assign(this, fields);
  }
}

/** Python's `show`: how a bad value is named in a message. */
export function show(value) {
  if (typeof value === 'string') return value.length <= 60 ? pyRepr(value) : `a string of ${[...value].length} characters`;
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (typeof value === 'number') return pyNumber(value);
  if (value instanceof Number) return pyFloat(value.valueOf());
  if (Array.isArray(value)) return 'a list';
  return 'a dict';
}

/** Python's repr of a str (the common cases: quotes chosen as Python chooses them, escapes of controls). */
export function pyRepr(text) {
  const quote = text.includes("'") && !text.includes('"') ? '"' : "'";
  let out = '';
  for (const ch of text) {
    const c = ch.codePointAt(0);
    if (ch === quote || ch === '\\') out += '\\' + ch;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f) out += '\\x' + c.toString(16).padStart(2, '0');
    else out += ch;
  }
  return quote + out + quote;
}

/** A JSON number as Python shows it: integers as integers, floats with a '.0' when integral. */
function pyNumber(x) {
  return Number.isInteger(x) && Math.abs(x) < 1e16 ? String(x) : pyFloat(x);
}

function pyFloat(x) {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return `${x}.0`;
  const text = String(x);
  return text.replace(/e([+-])(\d)$/, 'e$10$2');
}

/** Python's `format(x, 'g')` for the few bounds that messages show (0.001, 10, 100, 1000). */
export function fmtG(x) {
  const text = Number(x.toPrecision(6)).toString();
  return text.replace(/e([+-])(\d)$/, 'e$10$2');
}
