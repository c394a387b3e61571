/**
 * The campaign descriptor: validated with the rules of `deniable.shared.descriptor.CampaignConfig.from_json`
 * (the same checks, in the same order, with the same error codes and, for every rule, the same message as
 * the Python client), pinned by its fingerprint, and measured for padding (docs/wire-format.md §3, §7.1).
 *
 * `Campaign.fromJson(obj)` returns a frozen `Campaign` or throws `InvalidConfig`, and nothing else: a device
 * never randomizes under a descriptor it does not fully understand. `obj` should come from `parseJson`
 * (json.js), which keeps `2.0` apart from `2` as Python's `json.loads` does; a plain `JSON.parse` result is
 * accepted too (it merely cannot show that an integer was written as a float).
 *
 * An `admission` object's issuer key is parsed (a 2048-bit RSA key, e = 65537) by tokens.js, loaded only
 * for such campaigns; the parsed key is `campaign.issuer`.
 */

import { canonicalJson, pinnedFingerprint } from './canonical.js';
import { b64urlDecode } from './bytes.js';
import { InvalidConfig, InvalidParameter, InvalidReport, fmtG, pyRepr, show } from './errors.js';
import { isJsonInt, isJsonNumber, isPlainObject, unbox } from './json.js';
import { buildMechanism } from './mechanisms.js';

export const FORMAT_VERSION = 2;
/** The versions a message names (Python's list: format 3 joins it with the surveys of deniable.shared). */
export const SUPPORTED_VERSIONS = [1, 2, 3];
/** Descriptor format 3 is a survey (title, questions, split); its envelopes are version 2. */
export const SURVEY_FORMAT_VERSION = 3;
export const SUITE_ID = 'X25519-HKDF-SHA256-ChaCha20Poly1305';
export const CAMPAIGN_EPSILON = [0.001, 10.0];
export const MAX_BUDGET = 100.0;
export const MAX_QUESTION_CHARS = 2000;
export const MAX_CATEGORIES = 4096;
export const MAX_CATEGORY_CHARS = 200;
export const MAX_GROUP_FIELDS = 8;
export const MAX_GROUP_VALUE_CHARS = 64;
export const MAX_GROUP_VALUES = 1000;
export const MAX_ROUND_CHARS = 32;
export const CENTRAL_DELTA_RANGE = [1e-15, 1e-3];
export const MAX_RHO = 50.0;
export const MAX_GROUP_SIZE = 100;
export const MAX_TOKENS_PER_ACCOUNT = 10000;
/** The admission token's length in base64url characters (354 bytes, docs/wire-format.md §7). */
const TOKEN_CHARS = 472;

const LOCAL_MECHANISMS = ['binary-rr', 'grr', 'oue', 'olh'];
const TRUST_MODELS = ['local', 'central', 'shuffled'];
export const SHUFFLE_DELTA_RANGE = [1e-15, 1e-3];
export const SHUFFLE_MIN_BATCH_RANGE = [2, 100000];
const ADJACENCIES = ['add-remove', 'replace'];
const STATUSES = ['open', 'closed'];
const REQUIRED = [
  'id', 'question', 'categories', 'epsilon', 'mechanism', 'params', 'group_fields', 'public_key',
  'format_version', 'suite', 'status', 'trust_model',
];
const OPTIONAL = [
  'budget', 'adjacency', 'group_values', 'recurring', 'delta', 'budget_delta', 'budget_rho', 'group_size',
  'admission', 'shuffler',
];
const CENTRAL_OPTIONAL = ['delta', 'budget_delta', 'budget_rho', 'group_size'];
const LEGACY_ONLY = ['question', 'categories', 'mechanism', 'params'];
const SURVEY_REQUIRED = [...REQUIRED.filter((k) => !LEGACY_ONLY.includes(k)), 'title', 'questions', 'split'];
const SLUG_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
const ROUND_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$/;
const ROUND_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$';

/** Python's len(): code points. */
const pyLen = (text) => {
  let n = 0;
  // eslint-disable-next-line no-unused-vars
  for (const _ of text) n += 1;
  return n;
};
const sortedCodePoints = (items) => [...items].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
const reprList = (items) => items.map(pyRepr).join(', ');

function checkUnicode(name, value, Err) {
  if (!value.isWellFormed()) throw new Err(`${name} must be valid Unicode text (it contains a lone surrogate)`);
}

function checkSlug(name, value) {
  if (typeof value !== 'string' || !SLUG_RE.test(value)) {
    throw new InvalidConfig(
      `${pyRepr(name)} must be a slug matching ^[a-z0-9][a-z0-9-]{0,63}$ (lowercase letters, digits, '-'), ` +
      `got ${show(value)}`,
    );
  }
}

function checkText(name, value, max) {
  if (typeof value !== 'string' || !(pyLen(value) >= 1 && pyLen(value) <= max)) {
    throw new InvalidConfig(`${pyRepr(name)} must be a string of 1..${max} characters, got ${show(value)}`);
  }
  checkUnicode(pyRepr(name), value, InvalidConfig);
}

function checkChoice(name, value, allowed) {
  if (typeof value !== 'string' || !allowed.includes(value)) {
    throw new InvalidConfig(`${pyRepr(name)} must be one of ${reprList(allowed)}, got ${show(value)}`);
  }
}

function got(value) {
  if (typeof value === 'boolean') {
    return `${value ? 'True' : 'False'} (a boolean is not a number; JSON true/false are not accepted)`;
  }
  if (typeof value === 'string') {
    const shown = pyLen(value) <= 40 ? pyRepr(value) : `a string of ${pyLen(value)} characters`;
    return `${shown} (a string is not a number; send the number without quotes)`;
  }
  if (value instanceof Number && Number.isInteger(value.valueOf())) return String(value.valueOf());
  if (value === null || isJsonNumber(value)) return show(value);
  return `a ${Array.isArray(value) ? 'list' : 'dict'} (not a number)`;
}

function checkRange(name, value, [low, high]) {
  if (isJsonNumber(value)) {
    const x = unbox(value);
    if (Number.isFinite(x) && low <= x && x <= high) return x;
  }
  throw new InvalidConfig(`${pyRepr(name)} must be a number in [${fmtG(low)}, ${fmtG(high)}], got ${got(value)}`);
}

function checkNumber(name, value, upper) {
  const x = unbox(value);
  if (!isJsonNumber(value) || !Number.isFinite(x) || !(x > 0 && x <= upper)) {
    throw new InvalidConfig(`${pyRepr(name)} must be a finite number in (0, ${fmtG(upper)}], got ${show(value)}`);
  }
  return x;
}

function checkLabels(where, values, [low, high], maxChars, noun) {
  if (!Array.isArray(values) || values.length < low || values.length > high) {
    const size = Array.isArray(values) ? `${values.length} of them` : show(values);
    throw new InvalidConfig(`${where} must be a list of ${low}..${high} ${noun}, got ${size}`);
  }
  values.forEach((label, i) => {
    const item = `${where.slice(0, -1)}[${i}]'`;
    if (typeof label !== 'string' || pyLen(label) < 1 || pyLen(label) > maxChars) {
      throw new InvalidConfig(`${item} must be a string of 1..${maxChars} characters, got ${show(label)}`);
    }
    checkUnicode(item, label, InvalidConfig);
  });
  const seen = new Set();
  for (const label of values) {
    if (seen.has(label)) throw new InvalidConfig(`${where} must be unique, ${pyRepr(label)} appears twice`);
    seen.add(label);
  }
  return Object.freeze([...values]);
}

function checkGroupFields(fields) {
  if (!Array.isArray(fields) || fields.length > MAX_GROUP_FIELDS) {
    throw new InvalidConfig(
      `'group_fields' must be a list of at most ${MAX_GROUP_FIELDS} slugs, got ${show(fields)}` +
      (Array.isArray(fields) ? ` of ${fields.length}` : ''),
    );
  }
  fields.forEach((name, i) => checkSlug(`group_fields[${i}]`, name));
  if (new Set(fields).size !== fields.length) throw new InvalidConfig("'group_fields' must be unique");
  return Object.freeze([...fields]);
}

function checkGroupValues(groupValues, fields) {
  if (!isPlainObject(groupValues)) {
    throw new InvalidConfig(
      `'group_values' must be an object mapping group fields to lists of values, got ${show(groupValues)}`,
    );
  }
  const checked = {};
  for (const [name, values] of Object.entries(groupValues)) {
    if (!fields.includes(name)) {
      throw new InvalidConfig(
        `'group_values' keys must be group fields (${reprList(fields) || 'none'}), got ${show(name)}`,
      );
    }
    checked[name] = checkLabels(`'group_values.${name}'`, values, [1, MAX_GROUP_VALUES], MAX_GROUP_VALUE_CHARS, 'values');
  }
  const ordered = {};
  for (const name of fields) if (name in checked) ordered[name] = checked[name];
  return Object.freeze(ordered);
}

const P25519 = (1n << 255n) - 19n;
/** The u-coordinates of the points of order dividing 8 on Curve25519 and its twist: 0, 1, −1 and the two
 * of order 8. Their X25519 product with any (clamped, so multiple of 8) scalar is 0, which is what the
 * trial exchange of Python's `check_public_key` detects; every other u gives a non-zero shared secret. */
const SMALL_ORDER = new Set([
  0n, 1n, P25519 - 1n,
  325606250916557431795983626356110631294008115727848805560023387167927233504n,
  39382357235489614581723060781553021112529911719440698176882885853963445705823n,
]);

/** Whether a raw X25519 public key is a small-order point (after RFC 7748 decoding: top bit masked, mod p). */
export function isSmallOrder(raw) {
  let u = 0n;
  for (let i = 31; i >= 0; i -= 1) u = (u << 8n) | BigInt(i === 31 ? raw[i] & 0x7f : raw[i]);
  return SMALL_ORDER.has(u % P25519);
}

/** The public key must decode to 32 bytes and not be a small-order point. */
async function checkPublicKey(key) {
  if (typeof key !== 'string') throw new InvalidConfig(`'public_key' must be a base64url string, got ${show(key)}`);
  const raw = b64urlDecode(key);
  if (raw === null || raw.length !== 32) {
    const shown = pyLen(key) <= 64 ? pyRepr(key) : 'a str';
    throw new InvalidConfig(`'public_key' must be 32 bytes in base64url without padding (43 characters), got ${shown}`);
  }
  if (isSmallOrder(raw)) throw new InvalidConfig('the public key is a small-order X25519 point; nothing can be sealed to it');
  return raw;
}

async function checkAdmission(obj, c) {
  const keys = ['issuer_key', 'token_type', 'tokens_per_account', 'type'];
  if (!isPlainObject(obj) || sortedCodePoints(Object.keys(obj)).join() !== keys.join()) {
    throw new InvalidConfig(`'admission' must be an object with exactly the keys [${reprList(keys)}]`);
  }
  if (obj.type !== 'privacy-pass-blind-rsa' || unbox(obj.token_type) !== 2) {
    throw new InvalidConfig(
      "'admission' must have type 'privacy-pass-blind-rsa' and token_type 2; update the client to answer " +
      'campaigns with other admission tokens',
    );
  }
  c.issuer = await (await import('./tokens.js')).loadIssuerKey(obj.issuer_key); // campaigns with admission only
  if (c.issuer === null) {
    throw new InvalidConfig("'admission.issuer_key' must be a 2048-bit RSA public key (e = 65537) as base64url DER SubjectPublicKeyInfo");
  }
  const n = obj.tokens_per_account;
  if (!isJsonInt(n) || n < 1 || n > MAX_TOKENS_PER_ACCOUNT) {
    throw new InvalidConfig(`'admission.tokens_per_account' must be a whole number from 1 to ${MAX_TOKENS_PER_ACCOUNT}, got ${show(n)}`.slice(0, 200));
  }
  return Object.freeze({ ...obj });
}

function checkParams(params, expected) {
  if (!isPlainObject(params)) throw new InvalidConfig(`'params' must be an object, got ${show(params)}`);
  const names = sortedCodePoints(Object.keys(expected));
  const gotNames = sortedCodePoints(Object.keys(params));
  if (names.join('\u0000') !== gotNames.join('\u0000')) {
    throw new InvalidConfig(
      `'params' must have exactly the keys ${reprList(names)}, got ${gotNames.map(show).join(', ') || 'none'}`,
    );
  }
  for (const [name, value] of Object.entries(expected)) {
    const x = params[name];
    if (!isJsonInt(x) || x !== value) {
      const why = name === 'k' ? 'the number of categories' : 'round(e^epsilon) + 1';
      throw new InvalidConfig(`'params.${name}' must be ${value} (${why}), got ${show(x)}`);
    }
  }
  return Object.freeze({ ...params });
}

/** Python's round(): half to even. */
function roundHalfEven(x) {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** OLH's g = max(2, round(e^ε) + 1), as `OLH.g`. */
export const olhG = (epsilon) => Math.max(2, roundHalfEven(Math.exp(epsilon)) + 1);

export class Campaign {
  /** Validate `obj` (a parsed descriptor): a frozen Campaign, or `InvalidConfig` naming the field. */
  static async fromJson(obj) {
    if (!isPlainObject(obj)) throw new InvalidConfig(`a campaign config must be a JSON object, got ${show(obj)}`);
    if (obj.format_version === SURVEY_FORMAT_VERSION) return Campaign.#surveyFromJson(obj);
    if (isJsonInt(obj.format_version) && !SUPPORTED_VERSIONS.includes(obj.format_version)) {
      throw new InvalidConfig(
        `'format_version' must be one of [${SUPPORTED_VERSIONS.join(', ')}], got ${obj.format_version}; update the client to read newer campaigns`,
      );
    }
    const present = Object.keys(obj);
    const missing = sortedCodePoints(REQUIRED.filter((key) => !present.includes(key)));
    const unknown = sortedCodePoints(present.filter((key) => !REQUIRED.includes(key) && !OPTIONAL.includes(key)));
    if (missing.length || unknown.length) {
      const parts = missing.length ? [`missing ${reprList(missing)}`] : [];
      if (unknown.length) parts.push(`unknown ${unknown.slice(0, 5).map(show).join(', ')}`);
      throw new InvalidConfig(`campaign config keys are wrong: ${parts.join('; ')}`);
    }
    for (const name of ['categories', 'group_fields']) {
      if (!Array.isArray(obj[name])) throw new InvalidConfig(`${pyRepr(name)} must be a JSON array, got ${show(obj[name])}`);
    }
    if (!isPlainObject(obj.params)) throw new InvalidConfig(`'params' must be a JSON object, got ${show(obj.params)}`);
    const shuffler = obj.shuffler == null ? null : await (await import('./shuffle.js')).checkShuffler(
      obj.shuffler, { isSmallOrder, SHUFFLE_MIN_BATCH_RANGE, reprList, sortedCodePoints, pyLen },
    ); // shuffled campaigns only: in the bundle's second file
    const c = new Campaign(PRIVATE);
    c.isSurvey = false;
    c.shuffler = shuffler;
    checkSlug('id', obj.id);
    c.id = obj.id;
    checkText('question', obj.question, MAX_QUESTION_CHARS);
    c.question = obj.question;
    c.categories = checkLabels("'categories'", obj.categories, [2, MAX_CATEGORIES], MAX_CATEGORY_CHARS, 'labels');
    await c.#common(obj);
    if (c.trustModel === 'central') await c.#checkCentral();
    else if (c.trustModel === 'shuffled') await c.#checkShuffled();
    else c.#checkLocal();
    if ((c.shuffler !== null) !== (c.trustModel === 'shuffled')) {
      throw new InvalidConfig(c.shuffler === null
        ? "a shuffled campaign needs a 'shuffler' object (url, public_key, verify_key, min_batch)"
        : "'shuffler' applies to shuffled campaigns only; leave it out");
    }
    const expected = { k: c.categories.length };
    if (c.mechanism === 'olh') expected.g = olhG(c.epsilon);
    c.params = checkParams(obj.params, expected);
    c.k = c.categories.length;
    c.mechanismImpl = c.trustModel === 'central' ? null : buildMechanism(c.mechanism, c.epsilon, c.k, c.params);
    return c.#finish();
  }

  /** A survey (format 3): title, questions and split instead of one question's four keys. */
  static async #surveyFromJson(obj) {
    const present = Object.keys(obj);
    const missing = sortedCodePoints(SURVEY_REQUIRED.filter((key) => !present.includes(key)));
    const unknown = sortedCodePoints(present.filter((key) => !SURVEY_REQUIRED.includes(key) && !OPTIONAL.includes(key)));
    if (missing.length || unknown.length) {
      const parts = missing.length ? [`missing ${reprList(missing)}`] : [];
      if (unknown.length) parts.push(`unknown ${unknown.slice(0, 5).map(show).join(', ')}`);
      throw new InvalidConfig(`survey config (format_version 3) keys are wrong: ${parts.join('; ')}`);
    }
    if (!Array.isArray(obj.group_fields)) throw new InvalidConfig(`'group_fields' must be a JSON array, got ${show(obj.group_fields)}`);
    if (!Array.isArray(obj.questions)) throw new InvalidConfig(`'questions' must be a JSON array, got ${show(obj.questions)}`);
    // the survey code (questions, set and mean mechanisms) is loaded only for surveys: a page answering
    // a one-question campaign never downloads it (a chunk of its own in the bundle)
    const survey = await import('./questions.js');
    const questions = Object.freeze(obj.questions.map((q, i) => survey.questionFromJson(q, i)));
    const central = obj.trust_model === 'central';
    const split = survey.splitFromJson(obj.split);
    const c = new Campaign(PRIVATE);
    c.isSurvey = true;
    c.survey = survey;
    c.shuffler = null;
    checkSlug('id', obj.id);
    c.id = obj.id;
    checkText('title', obj.title, MAX_QUESTION_CHARS);
    c.question = obj.title;
    c.title = obj.title;
    c.categories = Object.freeze([]);
    c.mechanism = central ? 'none' : 'survey';
    await c.#common(obj);
    c.questions = questions;
    c.split = split;
    survey.checkSurveyQuestions(questions, split, c.epsilon);
    if (c.trustModel === 'central') await c.#checkCentral();
    else c.#checkLocalOptions();
    if (questions.some((q) => q.central !== (c.trustModel === 'central'))) {
      throw new InvalidConfig("the questions of a central survey have mechanism 'none', those of a local survey a mechanism each");
    }
    c.params = Object.freeze({});
    c.mechanismImpl = null;
    return c.#finish();
  }

  async #finish() {
    this.envelopeVersion = Math.min(this.formatVersion, FORMAT_VERSION);
    this.json = this.toJson();
    this.fingerprint = await pinnedFingerprint(this.json);
    this.paddedLength = this.#paddedLength();
    return Object.freeze(this);
  }

  /** The checks every format shares, in Python's order. */
  async #common(obj) {
    const c = this;
    c.epsilon = checkRange('epsilon', obj.epsilon, CAMPAIGN_EPSILON);
    c.groupFields = checkGroupFields(obj.group_fields);
    c.groupValues = checkGroupValues(obj.group_values ?? {}, c.groupFields);
    checkChoice('trust_model', obj.trust_model, TRUST_MODELS);
    c.trustModel = obj.trust_model;
    checkChoice('status', obj.status, STATUSES);
    c.status = obj.status;
    c.publicKeyBytes = await checkPublicKey(obj.public_key);
    c.publicKey = obj.public_key;
    const recurring = obj.recurring ?? false;
    if (typeof recurring !== 'boolean') throw new InvalidConfig(`'recurring' must be true or false, got ${show(recurring)}`);
    c.recurring = recurring;
    c.issuer = null;
    c.admission = obj.admission == null ? null : await checkAdmission(obj.admission, c);
    if (!isJsonInt(obj.format_version) || !SUPPORTED_VERSIONS.includes(obj.format_version)) {
      throw new InvalidConfig(
        `'format_version' must be one of [${SUPPORTED_VERSIONS.join(', ')}], got ${show(obj.format_version)}; ` +
        'update the client to read newer campaigns',
      );
    }
    c.formatVersion = obj.format_version;
    if (obj.suite !== SUITE_ID) throw new InvalidConfig(`'suite' must be ${pyRepr(SUITE_ID)}, got ${show(obj.suite)}`);
    c.suite = obj.suite;
    c.mechanism ??= obj.mechanism;
    c.budget = obj.budget ?? null;
    c.adjacency = obj.adjacency ?? null;
    for (const name of CENTRAL_OPTIONAL) c[name] = obj[name] ?? null;
  }

  constructor(token) {
    if (token !== PRIVATE) throw new TypeError('use await Campaign.fromJson(descriptor)');
  }

  #checkLocal() {
    this.#checkLocalOptions();
    checkChoice('mechanism', this.mechanism, LOCAL_MECHANISMS);
    if (this.mechanism === 'binary-rr' && this.categories.length !== 2) {
      throw new InvalidConfig(
        `mechanism 'binary-rr' needs exactly 2 categories, got ${this.categories.length}; use 'grr', 'oue' or 'olh'`,
      );
    }
  }

  #checkLocalOptions() {
    if (this.budget !== null || this.adjacency !== null) {
      throw new InvalidConfig("'budget' and 'adjacency' apply to central campaigns only; leave them null for local ones");
    }
    for (const name of CENTRAL_OPTIONAL) {
      if (this[name] !== null) throw new InvalidConfig(`${pyRepr(name)} applies to central campaigns only; leave it null for local ones`);
    }
  }

  /** A shuffled campaign is a local one whose reports pass a shuffler: ε₀ = `epsilon`, plus `delta`
   * (its rules in shuffle.js, the bundle's second file, which such a campaign loads anyway). */
  async #checkShuffled() {
    const { checkShuffled } = await import('./shuffle.js');
    checkShuffled(this, { checkLocal: () => this.#checkLocal(), SHUFFLE_DELTA_RANGE });
  }

  /** A central campaign's options, checked by central.js (in the bundle's second file: the page refuses
   * central campaigns, so a one-question local page never loads their rules). */
  async #checkCentral() {
    const { checkCentral } = await import('./central.js');
    checkCentral(this, { checkChoice, checkNumber, CENTRAL_DELTA_RANGE, MAX_RHO, MAX_GROUP_SIZE, MAX_BUDGET, ADJACENCIES });
  }

  /** The descriptor as Python's `CampaignConfig.to_json` writes it (the fingerprint's source). */
  toJson() {
    const body = {
      id: this.id, question: this.question, categories: [...this.categories], epsilon: this.epsilon,
      mechanism: this.mechanism, params: { ...this.params }, group_fields: [...this.groupFields],
      public_key: this.publicKey, format_version: this.formatVersion, suite: this.suite, status: this.status,
      trust_model: this.trustModel, budget: this.budget, adjacency: this.adjacency,
    };
    if (Object.keys(this.groupValues).length) {
      body.group_values = Object.fromEntries(Object.entries(this.groupValues).map(([k, v]) => [k, [...v]]));
    }
    if (this.recurring) body.recurring = true;
    for (const name of CENTRAL_OPTIONAL) if (this[name] !== null) body[name] = this[name];
    if (this.admission !== null) body.admission = { ...this.admission };
    if (this.shuffler) body.shuffler = { url: this.shuffler.url, public_key: this.shuffler.public_key, verify_key: this.shuffler.verify_key, min_batch: this.shuffler.min_batch };
    if (this.isSurvey) {
      for (const key of LEGACY_ONLY) delete body[key];
      body.title = this.title;
      body.questions = this.questions.map(questionJson);
      body.split = { ...this.split };
    }
    return body;
  }

  /** The length every version-2 plaintext is padded to (null in version 1), docs/wire-format.md §7.1. */
  #paddedLength() {
    if (this.formatVersion < 2) return null;
    const groups = {};
    for (const name of this.groupFields) {
      const declared = this.groupValues[name];
      if (declared && declared.length) {
        let widest = declared[0];
        for (const v of declared) if (canonicalJson(v).length > canonicalJson(widest).length) widest = v;
        groups[name] = widest;
      } else groups[name] = '\u0001'.repeat(MAX_GROUP_VALUE_CHARS);
    }
    if (this.trustModel === 'shuffled') return canonicalJson({ report: this.mechanismImpl.encode(this.mechanismImpl.widest()) }).length;
    let widest;
    if (this.isSurvey) {
      widest = { [this.answersKey]: this.survey.widestAnswers(this.questions, this.split.mode), groups };
      if (this.recurring) widest.round = 'a'.repeat(MAX_ROUND_CHARS);
    } else if (this.trustModel === 'central') widest = { value: this.k - 1, groups };
    else {
      widest = { report: this.mechanismImpl.encode(this.mechanismImpl.widest()), groups };
      if (this.recurring) widest.round = 'a'.repeat(MAX_ROUND_CHARS);
    }
    if (this.admission !== null) widest.token = 'A'.repeat(TOKEN_CHARS);
    return canonicalJson(widest).length;
  }

  /** The payload key of a survey's reports: `answers` (local) or `values` (central). */
  get answersKey() {
    return this.trustModel === 'central' ? 'values' : 'answers';
  }

  /** The plaintext of a survey's envelope: each asked question's wire report (null: skipped). */
  makeSurveyPayload(reports, groups, round = null, token = null) {
    const checked = this.checkGroups(groups);
    this.#checkRoundPresence(round !== null, InvalidParameter);
    this.#checkToken(token);
    const byId = Object.fromEntries(this.questions.map((q) => [q.id, q]));
    const encoded = Object.fromEntries(Object.entries(reports).map(([id, r]) => [id, r === null ? null : byId[id].encode(r)]));
    const payload = { [this.answersKey]: encoded, groups: checked };
    if (round !== null) payload.round = checkRound(round, InvalidParameter);
    if (token !== null) payload.token = token;
    return payload;
  }

  #checkToken(token) {
    if ((token === null) !== (this.admission === null)) {
      throw new InvalidParameter(token === null
        ? `campaign '${this.id}' requires an admission token with every report: obtain tokens first`
        : `campaign '${this.id}' takes no admission token`);
    }
  }

  /** The index of the category `label`; `InvalidParameter` if it is not one. */
  categoryIndex(label) {
    const index = typeof label === 'string' ? this.categories.indexOf(label) : -1;
    if (index < 0) {
      const shown = this.categories.slice(0, 10).map(pyRepr).join(', ');
      const more = this.k > 10 ? `, ... (${this.k} categories)` : '';
      throw new InvalidParameter(
        `value ${show(label)} is not a category of campaign '${this.id}'; expected one of ${shown}${more}`,
      );
    }
    return index;
  }

  /** `groups` (null: none) checked against the group fields and declared values (`InvalidParameter`). */
  checkGroups(groups, Err = InvalidParameter) {
    groups = groups ?? {};
    if (!isPlainObject(groups)) {
      throw new Err(`'groups' must be an object mapping group fields to strings, got ${show(groups)}`);
    }
    const keys = Object.keys(groups);
    const missing = sortedCodePoints(this.groupFields.filter((f) => !keys.includes(f)));
    const extra = sortedCodePoints(keys.filter((k) => !this.groupFields.includes(k)).map(show));
    if (missing.length || extra.length) {
      const parts = [];
      if (missing.length) parts.push(`missing ${reprList(missing)}`);
      if (extra.length) parts.push(`unexpected ${extra.slice(0, 5).join(', ')}`);
      throw new Err(
        `'groups' must have exactly the group fields of campaign '${this.id}' ` +
        `(${reprList(this.groupFields) || 'none'}): ${parts.join('; ')}`,
      );
    }
    for (const [name, value] of Object.entries(groups)) {
      if (typeof value !== 'string' || pyLen(value) < 1 || pyLen(value) > MAX_GROUP_VALUE_CHARS) {
        throw new Err(`group '${name}' must be a string of 1..${MAX_GROUP_VALUE_CHARS} characters, got ${show(value)}`);
      }
      checkUnicode(`group '${name}'`, value, Err);
      const declared = this.groupValues[name];
      if (declared && !declared.includes(value)) {
        throw new Err(
          `group '${name}' has the value ${show(value)}, which campaign '${this.id}' does not declare; its ` +
          `group_values for '${name}' are ${declared.slice(0, 10).map(pyRepr).join(', ')}` +
          (declared.length > 10 ? `, ... (${declared.length} values)` : ''),
        );
      }
    }
    return { ...groups };
  }

  /** The plaintext object of one envelope (`makePayload` of Python): report or index, groups, round. */
  makePayload(reportOrValue, groups, round = null, token = null) {
    const checked = this.checkGroups(groups);
    this.#checkRoundPresence(round !== null, InvalidParameter);
    if (this.trustModel === 'shuffled') return { report: this.mechanismImpl.encode(reportOrValue) }; // the inner payload
    this.#checkToken(token);
    let payload;
    if (this.trustModel === 'central') {
      if (!Number.isInteger(reportOrValue) || reportOrValue < 0 || reportOrValue >= this.k) {
        throw new InvalidParameter(`'value' must be a category index in [0, ${this.k}), got ${show(reportOrValue)}`);
      }
      payload = { value: reportOrValue, groups: checked };
    } else payload = { report: this.mechanismImpl.encode(reportOrValue), groups: checked };
    if (round !== null) payload.round = checkRound(round, InvalidParameter);
    if (token !== null) payload.token = token;
    return payload;
  }

  #checkRoundPresence(present, Err) {
    if (this.recurring && !present) {
      throw new Err(
        `campaign '${this.id}' is recurring: 'round' is required, a label such as '2026-11-29' naming the ` +
        'collection round the answer belongs to',
      );
    }
    if (present && !this.recurring) throw new Err(`campaign '${this.id}' is not recurring: 'round' is not allowed in its payload`);
  }

  /** Validate a decrypted payload (tests and audits: what the aggregator checks); `InvalidReport`. */
  decode(payload) {
    const key = this.isSurvey ? this.answersKey : this.trustModel === 'central' ? 'value' : 'report';
    const keys = this.recurring ? [key, 'groups', 'round'] : [key, 'groups'];
    if (this.admission !== null) keys.push('token');
    if (!isPlainObject(payload) || sortedCodePoints(Object.keys(payload)).join() !== sortedCodePoints(keys).join()) {
      throw new InvalidReport(`the payload of a ${this.trustModel} campaign must be an object with exactly the keys ${keys.join(', ')}`);
    }
    const groups = this.checkGroups(payload.groups, InvalidReport);
    const round = this.recurring ? checkRound(payload.round, InvalidReport) : null;
    if (this.isSurvey) return { value: this.survey.decodeAnswers(this.questions, this.split.mode, payload[key], key), groups, round };
    if (this.trustModel === 'central') {
      if (!isJsonInt(payload.value) || payload.value < 0 || payload.value >= this.k) {
        throw new InvalidReport(`'value' must be a category index in [0, ${this.k}), got ${show(payload.value)}`);
      }
      return { value: payload.value, groups, round };
    }
    return { value: this.mechanismImpl.decode(payload.report), groups, round };
  }
}

/** A question as Python's `Question.to_json` writes it. */
function questionJson(q) {
  const body = { id: q.id, text: q.text, kind: q.kind, epsilon: q.epsilon, mechanism: q.mechanism, params: q.params() };
  if (q.share !== null) body.share = q.share;
  if (q.optional) body.optional = true;
  if (q.kind === 'choice') {
    body.categories = [...q.categories];
    if (q.bins !== null) body.bins = [...q.bins];
    if (q.clip) body.clip = true;
  } else if (q.kind === 'multi') {
    body.options = [...q.options];
    body.max_selected = q.maxSelected;
  } else {
    body.range = [q.lo, q.hi];
    body.steps = q.steps;
    if (q.clip) body.clip = true;
  }
  return body;
}

export function checkRound(value, Err) {
  if (typeof value !== 'string' || !ROUND_RE.test(value)) {
    throw new Err(`'round' must be a label matching ${ROUND_PATTERN} (e.g. '2026-11-29' or 'w48'), got ${show(value)}`);
  }
  return value;
}

const PRIVATE = Symbol('Campaign');
