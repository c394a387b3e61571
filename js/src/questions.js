/**
 * Surveys (descriptor format 3, `deniable.shared.questions` and `deniable.shared.survey`): questions of the
 * kinds `choice` (binary-rr, grr, oue, olh; optionally the `bins` of a number), `multi` (bitvector, padding:
 * at most `max_selected` of the options) and `number` (duchi, piecewise, hybrid over a grid of `steps`),
 * the ε split (`per_question`: ε_q = the largest double ≤ ε·share_q/Σ shares, checked exactly; `sampling`:
 * one question drawn from the device secret alone, at the whole ε), and the `answers` payload, padded to
 * the widest one. Answers are normalized before anything is drawn: a choice its index, a multi answer the
 * sorted option indices, a number as given; a skipped optional question randomizes its dummy and sends
 * `null`, so the draws depend on neither the answers nor which were skipped.
 *
 * Limits: local surveys only on the device (central surveys are validated, and refused by `Client` unless
 * `allowCentral`, as one-question central campaigns are); recurring surveys are validated and refused.
 */
import { canonicalJson } from './canonical.js';
import { InvalidConfig, InvalidParameter, InvalidReport, fmtG, pyRepr, show } from './errors.js';
import { isJsonInt, isJsonNumber, isPlainObject, unbox } from './json.js';
import { buildMechanism } from './mechanisms.js';
import { gridIndex, meanMechanism } from './mean.js';
import { div, exactFraction, frac, lt, mul } from './rational.js';
import { setMechanism } from './sets.js';

export const MAX_QUESTIONS = 20;
export const MECHANISM_EPSILON = [1e-6, 20.0];
export const NUMBER_STEPS = [1, 1 << 20];
export const MEAN_LATTICE = [2, 1 << 16];
export const QUESTION_SHARE = [1, 100];
export const DEFAULT_LATTICE = 256;
const SLUG_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
const COMMON = ['id', 'text', 'kind', 'epsilon', 'mechanism', 'params'];
const COMMON_OPTIONAL = ['share', 'optional'];
const KIND_KEYS = {
  choice: [['categories'], ['bins', 'clip']],
  multi: [['options', 'max_selected'], []],
  number: [['range', 'steps'], ['clip']],
};
const MECHANISMS = {
  choice: ['binary-rr', 'grr', 'oue', 'olh'], multi: ['bitvector', 'padding'], number: ['duchi', 'piecewise', 'hybrid'],
};

export class InvalidAnswer extends InvalidParameter {
  constructor(message, question) {
    super(message);
    this.name = 'InvalidAnswer';
    this.code = 'invalid_answer';
    this.question = question;
  }
}

const len = (text) => [...text].length;
const sorted = (items) => [...items].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

function checkLabels(where, values, maxChars = 200) {
  if (!Array.isArray(values) || values.length < 2 || values.length > 4096) {
    throw new InvalidConfig(`${where} must be a list of 2..4096 labels, got ${Array.isArray(values) ? `${values.length} of them` : show(values)}`);
  }
  values.forEach((label, i) => {
    if (typeof label !== 'string' || len(label) < 1 || len(label) > maxChars || !label.isWellFormed()) {
      throw new InvalidConfig(`${where.slice(0, -1)}[${i}]' must be a string of 1..${maxChars} characters, got ${show(label)}`);
    }
  });
  if (new Set(values).size !== values.length) throw new InvalidConfig(`${where} must be unique`);
  return Object.freeze([...values]);
}

/** ε_q = the largest double ≤ Fraction(ε)·share/Σ shares (`split_epsilons`). */
export function splitEpsilons(epsilon, shares) {
  const total = shares.reduce((a, b) => a + b, 0);
  const exact = exactFraction(epsilon);
  return shares.map((share) => {
    const target = div(mul(exact, frac(BigInt(share))), frac(BigInt(total)));
    let value = nearestDouble(target); // float(Fraction): correctly rounded, then moved down if above
    if (lt(target, exactFraction(value))) value = nextDown(value);
    return value;
  });
}

/** The double nearest to a positive rational (round half to even, as Python's float(Fraction)). */
function nearestDouble(x) {
  // scale to 2^k · x with 54+ bits of integer part, round, rescale: exact correctly-rounded conversion
  const { n, d } = x;
  let shift = n.toString(2).length - d.toString(2).length - 60;
  const scaledN = shift >= 0 ? n : n << BigInt(-shift);
  const scaledD = shift >= 0 ? d << BigInt(shift) : d;
  const q = scaledN / scaledD; // ~60 bits; the lost remainder only matters at exact halves, kept sticky
  const sticky = scaledN % scaledD !== 0n ? 1n : 0n;
  const bits = q.toString(2).length;
  const drop = BigInt(bits - 53);
  let mantissa = q >> drop;
  const rest = q & ((1n << drop) - 1n);
  const half = 1n << (drop - 1n);
  if (rest > half || (rest === half && (sticky || (mantissa & 1n)))) mantissa += 1n;
  shift += Number(drop);
  return Number(mantissa) * 2 ** shift;
}

function nextDown(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  view.setBigUint64(0, view.getBigUint64(0) - 1n);
  return view.getFloat64(0);
}

class Question {
  constructor(obj, position) {
    this.id = obj.id;
    this.text = obj.text;
    this.kind = obj.kind;
    this.mechanism = obj.mechanism;
    this.optional = obj.optional ?? false;
    this.share = obj.share === undefined ? null : obj.share;
    if (typeof this.id !== 'string' || !SLUG_RE.test(this.id)) {
      throw new InvalidConfig(`'question id' must be a slug matching ^[a-z0-9][a-z0-9-]{0,63}$ (lowercase letters, digits, '-'), got ${show(this.id)}`);
    }
    if (typeof this.text !== 'string' || len(this.text) < 1 || len(this.text) > 2000 || !this.text.isWellFormed()) {
      throw new InvalidConfig(`'questions[${this.id}].text' must be a string of 1..2000 characters, got ${show(this.text)}`);
    }
    const eps = unbox(obj.epsilon);
    if (!isJsonNumber(obj.epsilon) || !Number.isFinite(eps) || eps < MECHANISM_EPSILON[0] || eps > MECHANISM_EPSILON[1]) {
      throw new InvalidConfig(`'questions[${this.id}].epsilon' must be a number in [${fmtG(MECHANISM_EPSILON[0])}, ${fmtG(MECHANISM_EPSILON[1])}], got ${show(obj.epsilon)} (a question's ε is its share of the campaign's ε)`);
    }
    this.epsilon = eps;
    if (typeof this.optional !== 'boolean') throw new InvalidConfig(`'questions[${this.id}].optional' must be true or false, got ${show(this.optional)}`);
    if (this.share !== null && (!isJsonInt(this.share) || this.share < QUESTION_SHARE[0] || this.share > QUESTION_SHARE[1])) {
      throw new InvalidConfig(`'questions[${this.id}].share' must be an integer in [${QUESTION_SHARE[0]}, ${QUESTION_SHARE[1]}] (its weight in the per-question split of ε), got ${show(this.share)}`);
    }
    const allowed = ['none', ...MECHANISMS[this.kind]];
    if (typeof this.mechanism !== 'string' || !allowed.includes(this.mechanism)) {
      throw new InvalidConfig(`'questions[${this.id}].mechanism' must be one of ${allowed.map(pyRepr).join(', ')} for a ${this.kind} question, got ${show(this.mechanism)}`);
    }
    this.central = this.mechanism === 'none';
    this.position = position;
  }

  refuse(message) {
    return new InvalidAnswer(`question ${pyRepr(this.id)}: ${message}`, this.id);
  }

  checkParams(params) {
    const expected = this.params();
    const same = isPlainObject(params) && sorted(Object.keys(params)).join() === sorted(Object.keys(expected)).join()
      && Object.entries(expected).every(([k, v]) => isJsonInt(params[k]) && params[k] === v);
    if (!same) {
      const dict = (o) => `{${Object.entries(o).map(([k, v]) => `${pyRepr(k)}: ${show(v)}`).join(', ')}}`;
      throw new InvalidConfig(
        `'questions[${this.id}].params' must be exactly ${dict(expected)} for this question, got ${isPlainObject(params) ? dict(params) : show(params)}`,
      );
    }
  }

  encode(report) {
    return this.central ? report : this.impl.encode(report);
  }

  decode(wire) {
    if (this.central) return this.decodeValue(wire);
    try {
      return this.impl.decode(wire);
    } catch (error) {
      throw new InvalidReport(`question ${pyRepr(this.id)}: ${error.message}`);
    }
  }

  /** The widest wire report (or null when optional and null is wider, never in practice). */
  widestWire() {
    const report = this.widestReport();
    return this.optional && canonicalJson(null).length > canonicalJson(report).length ? null : report;
  }
}

class ChoiceQuestion extends Question {
  constructor(obj, position) {
    super(obj, position);
    try {
      this.categories = checkLabels("'categories'", obj.categories);
    } catch (error) {
      throw new InvalidConfig(`question ${pyRepr(this.id)}: ${error.message}`);
    }
    this.clip = obj.clip ?? false;
    this.bins = null;
    if (obj.bins !== undefined) {
      const bins = obj.bins.map(unbox);
      if (bins.length !== this.categories.length + 1) {
        throw new InvalidConfig(`'questions[${this.id}].bins' must be ${this.categories.length + 1} edges (one more than the categories), got ${show(obj.bins)}`);
      }
      for (let i = 0; i + 1 < bins.length; i += 1) {
        if (typeof bins[i] !== 'number' || typeof bins[i + 1] !== 'number' || !Number.isFinite(bins[i]) || !Number.isFinite(bins[i + 1]) || !(bins[i] < bins[i + 1])) {
          throw new InvalidConfig(`'questions[${this.id}].bins' must be finite numbers in strictly increasing order, got ${show(obj.bins[i])} before ${show(obj.bins[i + 1])}`);
        }
      }
      this.bins = bins;
    }
    if (typeof this.clip !== 'boolean' || (this.clip && this.bins === null)) {
      throw new InvalidConfig(`'questions[${this.id}].clip' must be true or false, and applies only to a question with 'bins' or a number question, got ${show(this.clip)}`);
    }
    if (this.mechanism === 'binary-rr' && this.categories.length !== 2) {
      throw new InvalidConfig(`question ${pyRepr(this.id)}: mechanism 'binary-rr' needs exactly 2 categories, got ${this.categories.length}; use 'grr', 'oue' or 'olh'`);
    }
    this.k = this.categories.length;
    if (!this.central) {
      const g = Math.max(2, roundHalfEven(Math.exp(this.epsilon)) + 1);
      this.impl = buildMechanism(this.mechanism, this.epsilon, this.k, { g });
    }
  }

  get labels() {
    return this.categories;
  }

  params() {
    return this.mechanism === 'olh' ? { k: this.k, g: this.impl.g } : { k: this.k };
  }

  checkAnswer(answer) {
    if (typeof answer === 'string') {
      const index = this.categories.indexOf(answer);
      if (index < 0) {
        const more = this.k > 10 ? `, ... (${this.k} categories)` : '';
        throw this.refuse(`${show(answer)} is not one of its categories; expected one of ${this.categories.slice(0, 10).map(pyRepr).join(', ')}${more}`);
      }
      return index;
    }
    if (this.bins !== null && typeof answer === 'number') return this.binOf(answer);
    throw this.refuse(`the answer must be a category label (a string)${this.bins ? ' or a number to put in its bins' : ''}, got ${show(answer)}`);
  }

  binOf(value) {
    if (!Number.isFinite(value)) throw this.refuse(`the answer must be a finite number, got ${value}`);
    const lo = this.bins[0];
    const hi = this.bins.at(-1);
    if (!(lo <= value && value <= hi)) {
      if (!this.clip) throw this.refuse(`the answer must lie in [${lo}, ${hi}], got ${value} (values are not clipped silently; a question declared with clip=True moves them to the nearest bin)`);
      return value < lo ? 0 : this.k - 1;
    }
    for (let i = 0; i < this.k - 1; i += 1) if (value < this.bins[i + 1]) return i; // doubles compare exactly
    return this.k - 1;
  }

  get dummy() {
    return 0;
  }

  async randomize(answer, randbelow) {
    return this.central ? answer : this.impl.randomize(answer, randbelow);
  }

  widestReport() {
    return this.central ? this.k - 1 : this.impl.encode(this.impl.widest());
  }

  decodeValue(wire) {
    if (!isJsonInt(wire) || wire < 0 || wire >= this.k) throw new InvalidReport(`question ${pyRepr(this.id)}: a value must be a category index in [0, ${this.k}), got ${show(wire)}`);
    return wire;
  }
}

class MultiQuestion extends Question {
  constructor(obj, position) {
    super(obj, position);
    try {
      this.options = checkLabels("'options'", obj.options);
    } catch (error) {
      throw new InvalidConfig(`question ${pyRepr(this.id)}: ${error.message}`);
    }
    this.k = this.options.length;
    this.maxSelected = obj.max_selected;
    if (!isJsonInt(this.maxSelected) || this.maxSelected < 1 || this.maxSelected > this.k) {
      throw new InvalidConfig(`'questions[${this.id}].max_selected' must be an integer in [1, ${this.k}] (the most options one answer may select), got ${show(this.maxSelected)}`);
    }
    if (!this.central) this.impl = setMechanism(this.mechanism, this.epsilon, this.k, this.maxSelected);
  }

  get labels() {
    return this.options;
  }

  params() {
    return { k: this.k, m: this.maxSelected };
  }

  checkAnswer(answer) {
    if (!Array.isArray(answer)) throw this.refuse(`the answer must be a list of option labels (select all that apply), got ${show(answer)}`);
    const indices = answer.map((item) => {
      const index = typeof item === 'string' ? this.options.indexOf(item) : -1;
      if (index < 0) {
        const more = this.k > 10 ? `, ... (${this.k} options)` : '';
        throw this.refuse(`${show(item)} is not one of its options; expected labels among ${this.options.slice(0, 10).map(pyRepr).join(', ')}${more}`);
      }
      return index;
    });
    if (new Set(indices).size !== indices.length) throw this.refuse('the answer names an option twice; list each selected option once');
    if (indices.length > this.maxSelected) throw this.refuse(`at most ${this.maxSelected} options may be selected, got ${indices.length}`);
    return indices.sort((a, b) => a - b);
  }

  get dummy() {
    return [];
  }

  async randomize(answer, randbelow) {
    return this.central ? [...answer] : this.impl.randomize(answer, randbelow);
  }

  widestReport() {
    if (this.central) return Array.from({ length: this.maxSelected }, (_, i) => this.k - this.maxSelected + i);
    return this.mechanism === 'padding' ? this.impl.encode(this.impl.symbols - 1) : this.impl.encode(0n);
  }

  decodeValue(wire) {
    const ok = Array.isArray(wire) && wire.length <= this.maxSelected
      && wire.every((v, i) => isJsonInt(v) && v >= 0 && v < this.k && (i === 0 || wire[i - 1] < v));
    if (!ok) throw new InvalidReport(`question ${pyRepr(this.id)}: a value must be an increasing array of at most ${this.maxSelected} option indices in [0, ${this.k}), got ${show(wire)}`);
    return wire;
  }
}

class NumberQuestion extends Question {
  constructor(obj, position) {
    super(obj, position);
    const bounds = obj.range;
    if (!Array.isArray(bounds) || bounds.length !== 2) throw new InvalidConfig(`'questions[${position}].range' must be [lo, hi], got ${show(bounds)}`);
    [this.lo, this.hi] = bounds.map(unbox);
    for (const [name, v] of [['lo', this.lo], ['hi', this.hi]]) {
      if (typeof v !== 'number' || !Number.isFinite(v)) throw new InvalidConfig(`question ${pyRepr(this.id)}: '${name}' must be a finite number, got ${show(v)}`);
    }
    if (!(this.lo < this.hi)) throw new InvalidConfig(`question ${pyRepr(this.id)}: the range needs lo < hi, got [${this.lo}, ${this.hi}]`);
    this.steps = obj.steps;
    if (!isJsonInt(this.steps) || this.steps < NUMBER_STEPS[0] || this.steps > NUMBER_STEPS[1]) {
      throw new InvalidConfig(`question ${pyRepr(this.id)}: 'steps' must be an integer in [${NUMBER_STEPS[0]}, ${NUMBER_STEPS[1]}], got ${show(this.steps)}`);
    }
    this.clip = obj.clip ?? false;
    if (typeof this.clip !== 'boolean') throw new InvalidConfig(`'questions[${this.id}].clip' must be true or false, got ${show(this.clip)}`);
    const params = isPlainObject(obj.params) ? obj.params : {};
    this.lattice = params.lattice ?? DEFAULT_LATTICE;
    if ((this.central || this.mechanism === 'duchi') && this.lattice !== DEFAULT_LATTICE) {
      throw new InvalidConfig(`question ${pyRepr(this.id)}: a lattice applies to piecewise and hybrid only`);
    }
    if (!isJsonInt(this.lattice) || this.lattice < MEAN_LATTICE[0] || this.lattice > MEAN_LATTICE[1]) {
      throw new InvalidConfig(`question ${pyRepr(this.id)}: mechanism ${pyRepr(this.mechanism)} cannot run with epsilon=${fmtG(this.epsilon)}: 'lattice' must be an integer in [${MEAN_LATTICE[0]}, ${MEAN_LATTICE[1]}], got ${show(this.lattice)}`);
    }
    if (!this.central) this.impl = meanMechanism(this.mechanism, this.epsilon, this.steps, this.lattice);
  }

  get labels() {
    return [];
  }

  params() {
    return this.central || this.mechanism === 'duchi' ? {} : { lattice: this.lattice };
  }

  checkAnswer(answer) {
    if (typeof answer !== 'number') throw this.refuse(`the answer must be a number in [${fmtG(this.lo)}, ${fmtG(this.hi)}], got ${show(answer)}`);
    if (!Number.isFinite(answer)) throw this.refuse(`the answer must be a finite number in [${fmtG(this.lo)}, ${fmtG(this.hi)}], got ${answer}`);
    if (!this.clip && !(this.lo <= answer && answer <= this.hi)) {
      throw this.refuse(`the answer must lie in [${fmtG(this.lo)}, ${fmtG(this.hi)}], got ${answer} (values are not clipped silently; a question declared with clip=True moves them to the nearest end)`);
    }
    return answer;
  }

  get dummy() {
    return this.lo;
  }

  async randomize(answer, randbelow) {
    const j = await gridIndex(answer, this.lo, this.hi, this.steps, { clip: this.clip, randbelow });
    return this.central ? j : this.impl.randomize(j, randbelow);
  }

  encode(report) {
    return this.central ? report : this.impl.decode(report);
  }

  widestReport() {
    return this.central ? this.steps : this.impl.outputs - 1;
  }

  decodeValue(wire) {
    if (!isJsonInt(wire) || wire < 0 || wire > this.steps) throw new InvalidReport(`question ${pyRepr(this.id)}: a value must be a grid index in [0, ${this.steps}], got ${show(wire)}`);
    return wire;
  }
}

function roundHalfEven(x) {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

const KINDS = { choice: ChoiceQuestion, multi: MultiQuestion, number: NumberQuestion };

/** One question object of a format 3 descriptor (`question_from_json`): `InvalidConfig` naming it. */
export function questionFromJson(obj, position) {
  const where = `questions[${position}]`;
  if (!isPlainObject(obj)) throw new InvalidConfig(`'${where}' must be a JSON object, got ${show(obj)}`);
  const { kind } = obj;
  if (typeof kind !== 'string' || !(kind in KINDS)) {
    throw new InvalidConfig(`'${where}.kind' must be one of 'choice', 'multi', 'number', got ${show(kind)}`);
  }
  const [req, opt] = KIND_KEYS[kind];
  const required = [...COMMON, ...req];
  const keys = Object.keys(obj);
  const missing = sorted(required.filter((k) => !keys.includes(k)));
  const unknown = sorted(keys.filter((k) => !required.includes(k) && !opt.includes(k) && !COMMON_OPTIONAL.includes(k)));
  if (missing.length || unknown.length) {
    const parts = missing.length ? [`missing ${missing.map(pyRepr).join(', ')}`] : [];
    if (unknown.length) parts.push(`unknown ${unknown.slice(0, 5).map(show).join(', ')}`);
    throw new InvalidConfig(`the keys of ${where} (a ${kind} question) are wrong: ${parts.join('; ')}`);
  }
  if (obj.optional === false) throw new InvalidConfig(`'${where}.optional' is written only when true`);
  if (obj.clip === false) throw new InvalidConfig(`'${where}.clip' is written only when true`);
  if (kind === 'choice' && (!Array.isArray(obj.categories) || ('bins' in obj && !Array.isArray(obj.bins)))) {
    throw new InvalidConfig(`'${where}.categories' and '${where}.bins' must be JSON arrays`);
  }
  if (kind === 'multi' && !Array.isArray(obj.options)) throw new InvalidConfig(`'${where}.options' must be a JSON array, got ${show(obj.options)}`);
  const question = new KINDS[kind](obj, position);
  question.checkParams(obj.params);
  return Object.freeze(question);
}

const SPLIT_MODES = ['per_question', 'sampling'];
const SPLIT_REQUESTS = ['auto', ...SPLIT_MODES];

export function splitFromJson(obj) {
  if (!isPlainObject(obj) || sorted(Object.keys(obj)).join() !== 'mode,reason,requested') {
    throw new InvalidConfig(`'split' must be an object with exactly 'mode', 'requested' and 'reason', got ${show(obj)}`);
  }
  const { mode, requested, reason } = obj;
  if (typeof mode !== 'string' || !SPLIT_MODES.includes(mode)) throw new InvalidConfig(`'split.mode' must be one of ${SPLIT_MODES.map(pyRepr).join(', ')}, got ${show(mode)}`);
  if (typeof requested !== 'string' || !SPLIT_REQUESTS.includes(requested)) {
    throw new InvalidConfig(`'split.requested' must be one of ${SPLIT_REQUESTS.map(pyRepr).join(', ')}, got ${show(requested)}`);
  }
  if (requested !== 'auto' && requested !== mode) throw new InvalidConfig(`'split.mode' is ${pyRepr(mode)} but ${pyRepr(requested)} was requested`);
  if (typeof reason !== 'string' || len(reason) < 1 || len(reason) > 500) throw new InvalidConfig(`'split.reason' must be a string of 1..500 characters, got ${show(reason)}`);
  return Object.freeze({ mode, requested, reason });
}

/** The rules tying questions to the split (`check_survey_questions`). */
export function checkSurveyQuestions(questions, split, epsilon) {
  if (questions.length < 1 || questions.length > MAX_QUESTIONS) throw new InvalidConfig(`'questions' must hold 1..${MAX_QUESTIONS} questions, got ${questions.length}`);
  const ids = questions.map((q) => q.id);
  for (const id of ids) if (ids.indexOf(id) !== ids.lastIndexOf(id)) throw new InvalidConfig(`question ids must be unique in a survey, ${pyRepr(id)} appears twice`);
  const central = new Set(questions.map((q) => q.central));
  if (central.size > 1) throw new InvalidConfig('every question of a campaign has a mechanism, or (central) none; not a mix');
  if (split.mode === 'sampling') {
    if (central.has(true)) throw new InvalidConfig("a central survey splits each release's ε across its questions: 'split.mode' must be 'per_question'");
    for (const q of questions) {
      if (q.share !== null) throw new InvalidConfig(`question ${pyRepr(q.id)}: 'share' applies to the per_question split only`);
      if (q.epsilon !== epsilon) throw new InvalidConfig(`question ${pyRepr(q.id)}: under sampling every question runs at the campaign's ε=${epsilon}, got ${q.epsilon}`);
    }
    return;
  }
  for (const q of questions) if (q.share === null) throw new InvalidConfig(`question ${pyRepr(q.id)}: the per_question split needs an integer 'share' per question`);
  const expected = splitEpsilons(epsilon, questions.map((q) => q.share));
  questions.forEach((q, i) => {
    if (q.epsilon !== expected[i]) {
      throw new InvalidConfig(`question ${pyRepr(q.id)}: its ε must be ${expected[i]} (the campaign's ε times share/Σ shares, rounded down), got ${q.epsilon}`);
    }
  });
}

/** The normalized answers (`check_answers`): `InvalidAnswer` naming the question. */
export function checkAnswers(questions, answers) {
  if (!isPlainObject(answers)) throw new InvalidAnswer(`a survey's answers must be an object mapping question ids to answers, got ${show(answers)}`, '');
  const known = questions.map((q) => q.id);
  for (const key of Object.keys(answers)) {
    if (!known.includes(key)) throw new InvalidAnswer(`${show(key)} is not a question of this survey; its questions are ${known.map(pyRepr).join(', ')}`, key);
  }
  const normalized = {};
  for (const q of questions) {
    const answer = answers[q.id];
    if (answer === undefined || answer === null) {
      if (!q.optional) throw new InvalidAnswer(`question ${pyRepr(q.id)} needs an answer (it is not optional)`, q.id);
      normalized[q.id] = null;
    } else normalized[q.id] = q.checkAnswer(answer);
  }
  return normalized;
}

/** The reports of the asked questions in descriptor order (a skipped one randomizes its dummy). */
export async function randomizeAnswers(questions, mode, normalized, drawn, randbelow) {
  const asked = mode === 'per_question' ? questions : [questions[drawn]];
  const out = {};
  for (const q of asked) {
    const answer = normalized[q.id];
    const report = await q.randomize(answer === null ? q.dummy : answer, randbelow);
    out[q.id] = answer === null ? null : report;
  }
  return out;
}

export function widestAnswers(questions, mode) {
  if (mode === 'per_question') return Object.fromEntries(questions.map((q) => [q.id, q.widestWire()]));
  let best = null;
  for (const q of questions) {
    const candidate = { [q.id]: q.widestWire() };
    if (best === null || canonicalJson(candidate).length > canonicalJson(best).length) best = candidate;
  }
  return best;
}

/** A payload's answers object, checked as the aggregator checks it (`decode_answers`). */
export function decodeAnswers(questions, mode, obj, key) {
  if (!isPlainObject(obj)) throw new InvalidReport(`'${key}' must be an object mapping question ids to reports, got ${show(obj)}`);
  const ids = questions.map((q) => q.id);
  const unknown = Object.keys(obj).filter((k) => !ids.includes(k));
  if (unknown.length) throw new InvalidReport(`'${key}' names questions this survey does not have: ${unknown.slice(0, 5).map(show).join(', ')}`);
  if (mode === 'per_question') {
    const missing = ids.filter((id) => !(id in obj));
    if (missing.length) throw new InvalidReport(`'${key}' must answer every question of the survey (null for a skipped optional one), missing ${missing.slice(0, 5).map(pyRepr).join(', ')}`);
  } else if (Object.keys(obj).length !== 1) {
    throw new InvalidReport(`'${key}' of a sampling survey must answer exactly one question (the one the device drew), got ${Object.keys(obj).length}`);
  }
  const out = {};
  for (const q of questions) {
    if (!(q.id in obj)) continue;
    const wire = obj[q.id];
    if (wire === null) {
      if (!q.optional) throw new InvalidReport(`question ${pyRepr(q.id)} is not optional: its report cannot be null (skipped)`);
      out[q.id] = null;
    } else out[q.id] = q.decode(wire);
  }
  return out;
}

/** What a survey's page promises, in plain words (docs/browser.md): what is randomized, what is learnt. */
export function surveyNote(campaign) {
  if (campaign.trustModel === 'central') {
    return [
      'This survey uses the central model: your answers are encrypted in this browser and only the survey’s curator can read them.',
      `The curator promises to publish only noisy totals (ε = ${campaign.epsilon} per release, ${campaign.budget} in all).`,
    ];
  }
  const how = campaign.split.mode === 'sampling'
    ? `This browser answers one of the ${campaign.questions.length} questions, picked at random from a secret kept here (not from your answers); only that answer is sent, randomized at ε = ${campaign.epsilon}.`
    : `Each answer is randomized here with its own share of ε = ${campaign.epsilon} (${campaign.questions.map((q) => `${q.text.slice(0, 40)}: ε = ${Number(q.epsilon.toPrecision(4))}`).join('; ')}).`;
  const groups = campaign.groupFields.length ? ` The ${campaign.groupFields.join(', ')} you give below is sent as it is (not randomized).` : '';
  return [
    `Your answers are randomized in this browser before anything is sent. ${how} Choices are kept or replaced by random ones, selections are reported as weighted coin flips, numbers as a noisy value whose average over many people is right.`,
    'The aggregator receives only those randomized reports, encrypted to the survey’s key, and counts one set of answers per browser. It can estimate totals and averages, but it cannot know what you answered.' +
    ` A question you skip is sent as “skipped” (that much the aggregator learns), never as an answer.${groups}`,
    'Answering again sends the same reports: repeating gives nothing more away.',
  ];
}
