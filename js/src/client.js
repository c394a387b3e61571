/**
 * The browser device client, the twin of `deniable.client.Client`: `submit` randomizes, accounts for ε,
 * seals and queues; `flush` delivers. The order of operations is Python's:
 *
 * 1. the descriptor is fetched (`GET /api/v1/campaigns/<id>`), validated (`Campaign.fromJson`) and checked
 *    against the pin (pinned at first use; a descriptor validated earlier by this Client is used when the
 *    aggregator is unreachable, so a device that went offline can still answer);
 * 2. the value is checked against the categories; central campaigns are refused unless `allowCentral`;
 * 3. under one lock (Web Locks across tabs, else in-process): a memoized report is re-queued as it is
 *    (same envelope, same report id, nothing spent); otherwise the budget is checked, the value is
 *    randomized by the mechanism's exact sampler driven by the HMAC_DRBG of the device secret (memo.js),
 *    sealed, and the ε spend, the memo and the outbox entry are written in one IndexedDB transaction.
 *
 * Delivery (`flush`, outbox rules of `deniable.client.outbox`): a report leaves the outbox only on a
 * per-report verdict, a 200 whose body has one result per report sent, in order, with the ids sent and
 * counts that add up: `accepted`/`duplicate` → delivered, `rejected` → kept as a rejection, never retried.
 * Every other answer keeps the reports queued (typed `DeliveryError` in `FlushResult.failure`): network
 * failures, 5xx, 408, 425 and malformed replies are retried with jittered exponential backoff; a 413
 * splits the batch; a 429 is waited out up to 30 s (else `not_before` is stored and no POST is made
 * before it); redirects are never followed with a POST; 401/403/404/other 4xx stop the campaign's flush.
 * Reports older than `outboxMaxAge` (30 days) expire into the ledger, never silently.
 *
 * The raw value exists only in memory during `submit`; IndexedDB receives sealed envelopes only.
 */
import { Campaign } from './descriptor.js';
import { canonicalJson } from './canonical.js';
import { sha256, toHex } from './bytes.js';
import { seal } from './envelope.js';
import {
  AccessDenied, AggregatorUnavailable, AnswerChanged, BatchRefused, BatchTooLarge,
  BudgetExceeded, CampaignClosed, CampaignNotFound, DeviceStateError, InvalidConfig, InvalidParameter,
  MalformedReply, RateLimited, RedirectRefused, TransportError, UnknownCampaign, pyRepr,
} from './errors.js';
import { parseJson } from './json.js';
import { answerTag, oneShotAnswer, permanentResponse, roundReportId, surveyOneShot } from './memo.js';
import { add, exactFraction, frac, lt, sub } from './rational.js';
import { DeviceStore } from './store.js';
import { checkRound } from './descriptor.js';

export const MAX_BATCH = 500;
export const RETRY_AFTER_MAX_WAIT = 30;
export const OUTBOX_MAX_AGE_DEFAULT = 30 * 86400;
const RETRYABLE_4XX = new Set([408, 425]);
const STATUSES = ['accepted', 'duplicate', 'rejected'];
const SUMMARY_FIELDS = ['epsilon', 'mechanism', 'params', 'public_key', 'trust_model', 'budget', 'adjacency'];

const fracText = (x) => [x.n.toString(), x.d.toString()];
const fracOf = (pair) => (pair ? frac(BigInt(pair[0]), BigInt(pair[1])) : frac(0n));
const fmtEps = (x) => Number(x.n) / Number(x.d);
const now = () => Date.now() / 1000;
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

/** Seconds of a Retry-After header (delta-seconds or an HTTP-date), or null (Python's rule). */
export function retryAfterSeconds(value, at = now()) {
  if (value == null) return null;
  const text = value.trim();
  if (/^[0-9]+$/.test(text)) {
    const digits = text.replace(/^0+/, '') || '0';
    return digits.length <= 10 ? Math.min(Number(digits), 1e9) : 1e9;
  }
  const when = Date.parse(text);
  if (!/GMT|UTC|[+-]\d{4}$/.test(text) || Number.isNaN(when)) return null;
  return Math.max(0, when / 1000 - at);
}

/** The per-report verdicts of a 200 batch reply, or `MalformedReply` if it is not one. */
export function readBatchReply(body, ids) {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || !Array.isArray(body.results)) {
    throw new MalformedReply("the aggregator answered 200 without a 'results' list, so no report was settled", { status: 200 });
  }
  const { results } = body;
  if (results.length !== ids.length) {
    throw new MalformedReply(
      `the aggregator answered 200 with ${results.length} results for ${ids.length} reports sent, so no report was settled`,
      { status: 200 },
    );
  }
  const delivered = [];
  const rejected = [];
  const counts = { accepted: 0, duplicate: 0, rejected: 0 };
  results.forEach((item, i) => {
    const isObject = item !== null && typeof item === 'object' && !Array.isArray(item);
    let ok = isObject && item.report_id === ids[i] && STATUSES.includes(item.status);
    if (ok && item.status === 'rejected') ok = typeof item.reason === 'string' && item.reason.trim() !== '';
    if (!ok) {
      throw new MalformedReply(
        `result ${i} of the aggregator's 200 answer is not a verdict on report '${ids[i]}' (report_id, status ` +
        'accepted/duplicate/rejected, a reason for rejected), so no report was settled',
        { status: 200 },
      );
    }
    counts[item.status] += 1;
    if (item.status === 'rejected') rejected.push([ids[i], 'rejected', item.reason]);
    else delivered.push(ids[i]);
  });
  if (STATUSES.some((key) => body[key] !== counts[key])) {
    throw new MalformedReply("the counts of the aggregator's 200 answer do not match its results, so no report was settled", { status: 200 });
  }
  return { delivered, rejected, unsettled: [], failure: null, accepted: counts.accepted };
}

function errorMessage(response) {
  const error = response.body?.error;
  if (error && typeof error === 'object' && typeof error.message === 'string') return error.message;
  return response.contentError ?? `HTTP ${response.status}`;
}

function failureOf(response, where, count) {
  const { status } = response;
  const what = `the aggregator answered ${status} to ${count} report(s) of ${where}`;
  const kept = 'they stay in the outbox';
  if (response.contentError && status === 200) return new MalformedReply(`${what} with ${response.contentError}; ${kept}`, { status });
  const detail = errorMessage(response);
  if (status === 0 || (status >= 300 && status < 400)) {
    return new RedirectRefused(
      `${what} (${detail}), a redirect; a POST is never re-sent elsewhere, so ${kept}. Point the client at the aggregator's real URL`,
      { status },
    );
  }
  if (status === 401 || status === 403) {
    return new AccessDenied(`${what} (${detail}); devices post reports without credentials, so a proxy or a misconfigured aggregator stands in the way. ${kept}`, { status });
  }
  if (status === 404) {
    return new CampaignNotFound(`${what} (${detail}); a wrong URL, or an aggregator that does not know the campaign. ${kept} until the right aggregator answers`, { status });
  }
  if (status === 413) return new BatchTooLarge(`${what} (${detail}), even for a single report; ${kept}`, { status });
  if (status === 429) {
    const wait = retryAfterSeconds(response.headers.get('retry-after'));
    return new RateLimited(`${what} (${detail}): rate limited, retry after ${wait ?? 0} s; ${kept}`, { retryAfter: wait ?? 0, status });
  }
  if (status >= 500 || RETRYABLE_4XX.has(status)) return new AggregatorUnavailable(`${what} (${detail}); ${kept}, retry later`, { status });
  if (status >= 400 && status < 500) {
    const code = String(response.body?.error?.code ?? '');
    return new BatchRefused(`${what} (${detail}); an answer about the whole batch, not a verdict on each report, so ${kept}`, { status, errorCode: code });
  }
  return new MalformedReply(`${what} (${detail}), not a batch reply; ${kept}`, { status });
}

/** An in-process lock, used where the Web Locks API is missing (Node). */
const localLocks = new Map();
function withLock(name, fn) {
  if (globalThis.navigator?.locks?.request) return globalThis.navigator.locks.request(name, fn);
  const previous = localLocks.get(name) ?? Promise.resolve();
  const run = previous.then(fn, fn);
  localLocks.set(name, run.catch(() => {}));
  return run;
}

export class Client {
  #store;
  #fetch;
  #configs = new Map(); // campaign id → {config, text}: a validated, pinned config and the descriptor text it came from
  #lockName;
  #early = null; // [campaign id, the outcome of its descriptor GET started by open({prefetch})]

  /**
   * `await Client.open({aggregatorUrl, dbName, maxEpsilonPerCampaign = 4, lifetimeBudget = 10,
   * allowCentral = false, outboxMaxAge, retry, fetch, indexedDB, timeout})`. `aggregatorUrl` defaults to the
   * page's origin; `fetch`/`indexedDB` default to the browser's (tests pass Node's and fake-indexeddb).
   * `prefetch` (a campaign id) starts that descriptor's GET while the database opens; the next
   * `campaign(id)` validates and pins its answer (the survey page's start-up: one round trip less to wait).
   * `descriptorText` (with `prefetch`): that GET's answer, already at hand (the survey page carries it as
   * a JSON data block, served with the page by the same aggregator): validated and pinned the same way,
   * without the round trip; later `campaign(id)` calls fetch as usual.
   * `secret` (32 bytes) is the device secret of a NEW database, for simulated fleets and seeded tests only:
   * a real device lets the client draw its secret from the CSPRNG (an existing secret is never replaced).
   */
  static async open(options = {}) {
    const client = new Client(PRIVATE);
    const origin = globalThis.location?.origin;
    client.aggregatorUrl = String(options.aggregatorUrl ?? origin ?? '').replace(/\/+$/, '');
    if (!/^https?:\/\//.test(client.aggregatorUrl)) {
      throw new InvalidParameter(`'aggregatorUrl' must be an http(s) URL, got ${pyRepr(client.aggregatorUrl)}`);
    }
    client.perCampaign = positive('maxEpsilonPerCampaign', options.maxEpsilonPerCampaign ?? 4.0);
    client.lifetime = positive('lifetimeBudget', options.lifetimeBudget ?? 10.0);
    client.allowCentral = Boolean(options.allowCentral);
    client.outboxMaxAge = options.outboxMaxAge ?? OUTBOX_MAX_AGE_DEFAULT;
    if (typeof client.outboxMaxAge !== 'number' || !(client.outboxMaxAge >= 60 && client.outboxMaxAge <= 3650 * 86400)) {
      throw new InvalidParameter(`'outboxMaxAge' must be a number of seconds in [60, 315360000], got ${client.outboxMaxAge}`);
    }
    client.retry = { attempts: 4, base: 0.2, cap: 5.0, maxRetryAfter: RETRY_AFTER_MAX_WAIT, sleep, ...(options.retry ?? {}) };
    client.timeout = options.timeout ?? 10;
    client.batchSize = options.batchSize ?? MAX_BATCH;
    client.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    if (options.prefetch != null) { // the descriptor's GET runs while IndexedDB opens (the page's start-up)
      const id = String(options.prefetch);
      const early = client.#fetchConfig(id, options.descriptorText ?? null);
      client.#early = [id, early.then((fetched) => fetched, (error) => ({ error }))];
    }
    const dbName = options.dbName ?? 'deniable';
    client.#lockName = `deniable:${dbName}`;
    client.#store = await DeviceStore.open(dbName, options.indexedDB ?? globalThis.indexedDB);
    if (options.secret != null && !(options.secret instanceof Uint8Array && options.secret.length === 32)) {
      throw new InvalidParameter("'secret' must be 32 bytes (a Uint8Array), for simulations and tests only");
    }
    client.secretBytes = await client.#store.secret(options.secret ?? null);
    return client;
  }

  constructor(token) {
    if (token !== PRIVATE) throw new TypeError('use await Client.open({...})');
  }

  close() {
    this.#store.close();
  }

  /** Where a campaign's reports go: its shuffler (shuffled campaigns, from the validated descriptor or the
   * pin, so an outbox filled before a reload still goes there) or the aggregator. */
  async #base(campaignId) {
    const config = this.#configs.get(campaignId)?.config;
    if (config) return config.shuffler ? config.shuffler.url.replace(/\/+$/, '') : this.aggregatorUrl;
    const pinned = await this.#store.tx('readonly', (t) => t.get('pins', campaignId));
    return pinned?.summary?.shuffler_url ? pinned.summary.shuffler_url.replace(/\/+$/, '') : this.aggregatorUrl;
  }

  async #request(method, path, body, base = this.aggregatorUrl) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeout * 1000);
    let response;
    try {
      response = await this.#fetch(base + path, {
        method,
        headers: body === undefined ? { accept: 'application/json' } : { 'content-type': 'application/json', accept: 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        redirect: 'manual',
        credentials: 'omit',
        cache: 'no-store',
        signal: controller.signal,
      });
    } catch (error) {
      const reason = error?.name === 'AbortError' ? `no answer within ${this.timeout} s` : (error?.message ?? String(error));
      throw new TransportError(`could not reach ${base === this.aggregatorUrl ? 'the aggregator' : 'the shuffler'} at ${base} (${method} ${path}): ${reason}`);
    } finally {
      clearTimeout(timer);
    }
    let text = '';
    try {
      text = await response.text();
    } catch (error) {
      throw new TransportError(`the aggregator's answer to ${method} ${path} broke off: ${error?.message ?? error}`);
    }
    const result = { status: response.type === 'opaqueredirect' ? 0 : response.status, headers: response.headers, body: null, contentError: null, text };
    if (text) {
      try {
        result.body = parseJson(text);
      } catch {
        result.contentError = `a body of ${text.length} characters that is not JSON (${response.headers.get('content-type') ?? 'no content type'})`;
      }
    }
    return result;
  }

  /**
   * GET and validate the descriptor of `campaignId` (`deniable.client.config.fetch_config`): `{ config, text }`.
   * The text is remembered (in `#configs`, beside its config) only by `campaign()`, after the pin check, so
   * that a refused descriptor is refused again on every later call rather than matched as "the bytes
   * validated before".
   */
  async #fetchConfig(campaignId, text = null) {
    const path = `/api/v1/campaigns/${encodeURIComponent(campaignId)}`;
    let response;
    try {
      // the descriptor's JSON as the survey page carries it (the very answer of this GET), or the GET
      response = text === null ? await this.#request('GET', path) : { status: 200, body: parseJson(text), contentError: null, text };
    } catch (error) {
      if (text !== null) throw new InvalidConfig(`the page's descriptor of ${pyRepr(campaignId)} is not JSON (${error.message})`);
      throw new TransportError(`${error.message}; nothing was spent or queued, try again later`);
    }
    const { status } = response;
    if (status === 200 && response.contentError) {
      throw new TransportError(
        `the aggregator answered 200 for the config of ${pyRepr(campaignId)} with ${response.contentError}; nothing was spent or queued (is the URL the aggregator's?)`,
      );
    }
    if (status === 404) throw new UnknownCampaign(`the aggregator has no campaign ${pyRepr(campaignId)} (${errorMessage(response)}); check the id`);
    if (status >= 500 || status === 429) {
      throw new TransportError(`the aggregator answered ${status} for the config of ${pyRepr(campaignId)} (${errorMessage(response)}); nothing was spent or queued, try again later`);
    }
    if (status !== 200) throw new InvalidConfig(`the aggregator answered ${status} for the config of ${pyRepr(campaignId)}: ${errorMessage(response)}`);
    const known = this.#configs.get(campaignId);
    if (known && known.text === response.text) return { config: known.config, text: response.text }; // the very bytes validated and pinned before
    const config = await Campaign.fromJson(response.body);
    if (config.id !== campaignId) {
      throw new InvalidConfig(
        `asked for the config of campaign ${pyRepr(campaignId)} but the aggregator answered one for ${pyRepr(config.id)}; refusing it (a misrouted or tampered answer)`,
      );
    }
    return { config, text: response.text };
  }

  static async #pinSummary(config) {
    const full = config.json;
    const digest = async (value) => toHex(await sha256(canonicalJson(value)));
    if (config.isSurvey) { // ε, key and trust model as they are, each question's fields as a hash
      const summary = Object.fromEntries(SUMMARY_FIELDS.filter((key) => key in full).map((key) => [key, full[key]]));
      summary.split = full.split.mode;
      for (const question of full.questions) summary[`question ${question.id}_sha256`] = await digest(question);
      summary.title_sha256 = await digest(full.title);
      summary.group_fields = full.group_fields;
      return summary;
    }
    const summary = Object.fromEntries(SUMMARY_FIELDS.map((key) => [key, full[key]]));
    summary.categories_sha256 = await digest(full.categories);
    summary.question_sha256 = await digest(full.question);
    summary.group_fields = full.group_fields;
    if (config.shuffler) summary.shuffler_url = config.shuffler.url; // where the outbox delivers, also after a reload
    return summary;
  }

  async #checkPin(config) {
    const summary = await Client.#pinSummary(config);
    const pinned = await this.#store.tx('readwrite', async (t) => {
      const found = await t.get('pins', config.id);
      if (!found) await t.put('pins', config.id, { fingerprint: config.fingerprint, summary });
      return found;
    }, 'relaxed');
    if (!pinned || pinned.fingerprint === config.fingerprint) return;
    const short = (v) => {
      const text = JSON.stringify(v) ?? 'null';
      return text.length <= 60 ? text : `${text.slice(0, 57)}...`;
    };
    const changes = Object.keys(summary)
      .filter((key) => JSON.stringify(pinned.summary[key]) !== JSON.stringify(summary[key]))
      .map((key) => (key.endsWith('_sha256') ? `${key.replace(/_sha256$/, '')} changed` : `${key} ${short(pinned.summary[key])} -> ${short(summary[key])}`));
    throw new InvalidConfig(
      `campaign ${pyRepr(config.id)} changed since this device pinned it at first use (${changes.join('; ') || 'other fields changed'}); ` +
      'refusing it, since a changed campaign under the same id could weaken the privacy the user agreed to. The operator must ' +
      "publish the change under a new campaign id. If you recreated the aggregator yourself (development), forget the campaign on this device: client.forget(" +
      `${pyRepr(config.id)}); answering it again then spends its ε again`,
    );
  }

  /** The validated, pinned descriptor of `campaignId` (`resolve_config`); `CampaignClosed` if closed. */
  async campaign(campaignId) {
    let config;
    let text = null;
    const early = this.#early?.[0] === campaignId ? this.#early[1] : null;
    this.#early = null;
    try {
      const fetched = early ? await early : await this.#fetchConfig(campaignId);
      if (fetched.error) throw fetched.error;
      ({ config, text } = fetched);
    } catch (error) {
      if (!(error instanceof TransportError) || !this.#configs.has(campaignId)) throw error;
      ({ config, text } = this.#configs.get(campaignId));
    }
    if (this.#configs.get(campaignId)?.config !== config) await this.#checkPin(config); // checked once per config
    this.#configs.set(campaignId, { config, text }); // only after the pin check: a refused one is checked again next time
    if (config.status === 'closed') throw new CampaignClosed(`campaign ${pyRepr(campaignId)} is closed; it accepts no more reports`);
    return config;
  }

  #cost(config) {
    return config.trustModel === 'central' ? exactFraction(config.budget, 'budget') : exactFraction(config.epsilon);
  }

  async #checkBudget(t, config, cost) {
    const spent = fracOf((await t.get('meta', `spent:${config.id}`))?.epsilon);
    const total = fracOf(await t.get('meta', 'total_spent'));
    if (lt(this.perCampaign, add(spent, cost))) {
      const left = lt(sub(this.perCampaign, spent), frac(0n)) ? frac(0n) : sub(this.perCampaign, spent);
      throw new BudgetExceeded(
        `campaign ${pyRepr(config.id)} asks for ε=${fmtEps(cost)}, but this device allows at most ε=${fmtEps(this.perCampaign)} per campaign ` +
        `and has spent ε=${fmtEps(spent)} on it (ε=${fmtEps(left)} left for it); nothing was sent. Raise maxEpsilonPerCampaign only if the user agrees to a weaker guarantee`,
        { spent: fmtEps(spent), remaining: fmtEps(left), requested: fmtEps(cost) },
      );
    }
    if (lt(this.lifetime, add(total, cost))) {
      const left = lt(sub(this.lifetime, total), frac(0n)) ? frac(0n) : sub(this.lifetime, total);
      throw new BudgetExceeded(
        `campaign ${pyRepr(config.id)} asks for ε=${fmtEps(cost)}, but this device has spent ε=${fmtEps(total)} of its lifetime budget ` +
        `ε=${fmtEps(this.lifetime)} (ε=${fmtEps(left)} left); nothing was sent`,
        { spent: fmtEps(total), remaining: fmtEps(left), requested: fmtEps(cost) },
      );
    }
  }

  static async #recordSpend(t, row) {
    const key = `spent:${row.campaign_id}`;
    const found = await t.get('meta', key);
    const cost = fracOf(row.cost);
    await t.put('meta', key, { epsilon: fracText(add(fracOf(found?.epsilon), cost)), reports: (found?.reports ?? 0) + 1, recurring: row.recurring, trust_model: row.trust_model });
    await t.put('meta', 'total_spent', fracText(add(fracOf(await t.get('meta', 'total_spent')), cost)));
    await t.put('reports', row.report_id, { ...row, created: now() });
  }

  static async #enqueue(t, reportId, campaignId, envelope) {
    if (await t.get('outbox', reportId)) return false;
    const seq = ((await t.get('meta', 'seq')) ?? 0) + 1;
    await t.put('meta', 'seq', seq);
    await t.put('outbox', reportId, { seq, report_id: reportId, campaign_id: campaignId, envelope, created: now(), attempts: 0, last_error: null, error_code: null, last_attempt: null });
    return true;
  }

  /** Where a report is; a report once delivered stays `delivered` even when a repeat re-queues it (the
   * aggregator holds it, so a re-answer would only be a duplicate). */
  static async #status(t, reportId) {
    const verdict = await t.get('verdicts', reportId);
    if (verdict?.status === 'delivered') return 'delivered';
    if (await t.get('outbox', reportId)) return 'queued';
    return verdict?.status === 'rejected' || verdict?.status === 'expired' ? verdict.status : 'delivered';
  }

  /**
   * Answer `campaignId` with the category label `value` (`{groups, round, reanswer}` as Python's keyword
   * arguments; `round` for recurring campaigns). A survey (format 3) takes `value` = its answers by question
   * id (`{smoke: 'yes', age: 37, apps: ['mail']}`; a skipped optional question left out or null), each
   * checked before anything is drawn (`InvalidAnswer` naming the question); its ε is spent once. The report is queued, not yet sent: call `flush()`.
   * Resolves with a receipt `{campaignId, reportId, epsilonSpent, memoized, recurring, trustModel, queued, round}`.
   */
  async submit(campaignId, value, { groups = null, round = null, reanswer = false } = {}) {
    const config = await this.campaign(campaignId);
    let index;
    if (config.isSurvey) {
      // a survey's answers, by question id (a one-question survey also takes its answer bare)
      const bare = config.questions.length === 1 && (value === null || typeof value !== 'object' || Array.isArray(value));
      index = config.survey.checkAnswers(config.questions, bare ? { [config.questions[0].id]: value } : value);
    } else {
      if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.keys(value).join() === 'answer') value = value.answer;
      index = config.categoryIndex(value);
    }
    if (config.trustModel === 'central' && !this.allowCentral) {
      throw new InvalidConfig(
        `campaign ${pyRepr(config.id)} uses the central trust model: the raw answer would be sent (encrypted) to the curator, who promises ` +
        `ε=${config.epsilon} per release and ε=${config.budget} in total. Pass allowCentral: true only if the user agreed to trust that curator`,
      );
    }
    if (config.recurring) {
      if (round === null) {
        throw new InvalidParameter(`campaign ${pyRepr(config.id)} is recurring and collects in rounds: pass round: '<label>' (e.g. '2026-11-29'), the round this answer belongs to`);
      }
      const answerRound = config.isSurvey ? this.#answerSurveyRound : this.#answerRound;
      return withLock(this.#lockName, () => answerRound.call(this, config, index, groups, checkRound(round, InvalidParameter), reanswer));
    }
    if (round !== null) {
      throw new InvalidParameter(`campaign ${pyRepr(config.id)} is not recurring: it counts one answer per device, so leave round null`);
    }
    return withLock(this.#lockName, () => this.#answer(config, index, groups, reanswer));
  }

  async #answer(config, index, groups, reanswer) {
    const cost = this.#cost(config);
    const checked = config.checkGroups(groups);
    const secret = this.secretBytes;
    const tag = await answerTag(secret, config.id, index, checked);
    const current = await this.#store.tx('readonly', async (t) => {
      const rows = (await t.all('reports')).map(([, row]) => row).filter((row) => row.campaign_id === config.id && !row.recurring);
      rows.sort((a, b) => a.created - b.created);
      const latest = rows.at(-1) ?? null;
      return latest && { row: latest, status: await Client.#status(t, latest.report_id) };
    });
    if (current && (current.row.answer_tag == null || current.row.answer_tag === tag)) {
      const { row } = current;
      const queued = current.status !== 'rejected';
      if (queued) await this.#store.tx('readwrite', (t) => Client.#enqueue(t, row.report_id, row.campaign_id, row.envelope));
      return receipt(row.campaign_id, row.report_id, 0, true, false, row.trust_model, queued);
    }
    if (current && (!reanswer || current.status === 'delivered')) throw changed(config, current.row.created, cost, current.status);
    const answer = await (config.isSurvey ? surveyOneShot : oneShotAnswer)(config, secret, index);
    const { reportId } = answer;
    // a re-answer back to a value answered before reuses that paid report; a new one checks the budget
    const token = await this.#pickToken(config, async (t) => (await t.get('reports', reportId)) || this.#checkBudget(t, config, cost));
    const payload = config.isSurvey ? config.makeSurveyPayload(answer.reports, checked, null, token) : config.makePayload(answer.report, checked, null, token);
    const envelope = JSON.stringify(await seal(payload, { campaign: config, secret, reportId, token }));
    return this.#store.tx('readwrite', async (t) => {
      if (current) await t.delete('outbox', current.row.report_id);
      if (token) await t.delete('tokens', token);
      const paid = await t.get('reports', reportId);
      if (paid) {
        await t.put('reports', reportId, { ...paid, envelope, answer_tag: tag, created: now() });
        await Client.#enqueue(t, reportId, config.id, envelope);
        return receipt(config.id, reportId, 0, true, false, config.trustModel, true);
      }
      await this.#checkBudget(t, config, cost);
      await Client.#recordSpend(t, { report_id: reportId, campaign_id: config.id, recurring: false, trust_model: config.trustModel, cost: fracText(cost), envelope, answer_tag: tag });
      await Client.#enqueue(t, reportId, config.id, envelope);
      return receipt(config.id, reportId, fmtEps(cost), false, false, config.trustModel, true);
    });
  }

  async #answerRound(config, index, groups, round, reanswer) {
    const secret = this.secretBytes;
    const { reportId: answerId, report } = await permanentResponse(config, secret, index);
    const checked = config.checkGroups(groups);
    const key = `${config.id}\u0000${round}`;
    const given = await this.#givenRound(config, key, answerId, reanswer, round);
    if (given?.receipt) return given.receipt;
    const reportId = await roundReportId(secret, config.id, index, round);
    const token = await this.#pickToken(config, async (t) => (await t.get('reports', answerId)) || this.#checkBudget(t, config, this.#cost(config)));
    const envelope = JSON.stringify(await seal(config.makePayload(report, checked, round, token), { campaign: config, secret, reportId, token }));
    return this.#store.tx('readwrite', async (t) => {
      if (given) {
        await t.delete('outbox', given.row.report_id);
        await t.delete('rounds', key);
      }
      if (token) await t.delete('tokens', token);
      const paid = Boolean(await t.get('reports', answerId));
      const cost = paid ? frac(0n) : this.#cost(config);
      if (!paid) {
        await this.#checkBudget(t, config, cost);
        await Client.#recordSpend(t, { report_id: answerId, campaign_id: config.id, recurring: true, trust_model: config.trustModel, cost: fracText(cost), envelope, answer_tag: null });
      }
      await t.put('rounds', key, { campaign_id: config.id, round, report_id: reportId, answer_id: answerId, envelope, created: now() });
      await Client.#enqueue(t, reportId, config.id, envelope);
      return receipt(config.id, reportId, fmtEps(cost), false, true, config.trustModel, true, round);
    });
  }

  /**
   * The round `key` answered before: `{receipt}` when with the same `answerId` (queued again unless
   * rejected), `{row}` when another answer may be replaced (reanswer, not delivered), else null;
   * `AnswerChanged` when another answer stands (Python's `_given_round`).
   */
  async #givenRound(config, key, answerId, reanswer, round) {
    const given = await this.#store.tx('readonly', async (t) => {
      const row = await t.get('rounds', key);
      return row && { row, status: await Client.#status(t, row.report_id) };
    });
    if (given && given.row.answer_id === answerId) {
      const queued = given.status !== 'rejected';
      if (queued) await this.#store.tx('readwrite', (t) => Client.#enqueue(t, given.row.report_id, config.id, given.row.envelope));
      return { receipt: receipt(config.id, given.row.report_id, 0, true, true, config.trustModel, queued, round) };
    }
    if (given && (!reanswer || given.status === 'delivered')) throw changed(config, given.row.created, this.#cost(config), given.status, round);
    return given;
  }

  /** One round's answer to a recurring survey: recurring.js `answerSurveyRound` (the bundle's second file). */
  async #answerSurveyRound(config, answers, groups, round, reanswer) {
    return (await import('./recurring.js')).answerSurveyRound(this.#inner(), config, answers, groups, round, reanswer);
  }

  /** What the code of the bundle's second file (recurring surveys, admission tokens) works with. */
  #inner() {
    return {
      store: this.#store, secret: this.secretBytes, campaign: (id) => this.campaign(id), tokens: (id) => this.tokens(id),
      checkBudget: (t, config, cost) => this.#checkBudget(t, config, cost), givenRound: (...a) => this.#givenRound(...a),
      pickToken: (...a) => this.#pickToken(...a), recordSpend: Client.#recordSpend, enqueue: Client.#enqueue, receipt, seal, now,
    };
  }

  /** The token to spend on a new report (tokens.js `pickToken`; null for a campaign without admission). */
  async #pickToken(config, check) {
    return config.admission === null ? null : (await import('./tokens.js')).pickToken(this.#inner(), config, check);
  }

  /** `count` blinded admission-token requests for the campaign (`request_tokens`): forward `batch.requests`
   * to the app's backend, then pass its answer to `addTokens`. */
  async requestTokens(campaignId, count) {
    return (await import('./tokens.js')).TokenBatch.create(await this.campaign(campaignId), count);
  }

  /** Unblind and verify the issuer's `responses` to `batch`, store the tokens; resolves with how many of
   * the campaign the device holds (`add_tokens`). `InvalidParameter` (nothing stored) if one does not verify. */
  async addTokens(batch, responses) {
    return (await import('./tokens.js')).addTokens(this.#inner(), batch, responses);
  }

  /** `requestTokens`, `await issue(requests)` (the app's call to its backend), `addTokens`. */
  async obtainTokens(campaignId, count, issue) {
    const batch = await this.requestTokens(campaignId, count);
    return this.addTokens(batch, await issue(batch.requests));
  }

  /** How many unspent admission tokens of the campaign the device holds. */
  async tokens(campaignId) {
    return (await this.#store.tx('readonly', (t) => t.all('tokens'))).filter(([, v]) => v.campaign_id === campaignId).length;
  }

  // -- delivery ---------------------------------------------------------------------------------------

  #delay(attempt) {
    const jitter = 0.5 + Number(globalThis.crypto.getRandomValues(new Uint32Array(1))[0] % 1001) / 2000;
    return Math.min(this.retry.cap, this.retry.base * 2 ** attempt) * jitter;
  }

  async #postBatch(campaignId, envelopes) {
    const ids = envelopes.map((e) => String(e.report_id));
    const path = `/api/v1/campaigns/${encodeURIComponent(campaignId)}/reports`;
    const base = await this.#base(campaignId);
    let failure = new TransportError('no attempt made');
    for (let attempt = 0; attempt < this.retry.attempts; attempt += 1) {
      if (attempt) {
        const wait = failure instanceof RateLimited ? failure.retryAfter : 0;
        await this.retry.sleep(Math.max(wait, this.#delay(attempt - 1)));
      }
      let response;
      try {
        response = await this.#request('POST', path, { reports: envelopes }, base);
      } catch (error) {
        failure = new TransportError(`${error.message}; ${ids.length} report(s) of ${pyRepr(campaignId)} stay in the outbox`);
        continue;
      }
      if (response.status === 200 && !response.contentError) {
        try {
          return readBatchReply(response.body, ids);
        } catch (error) {
          failure = new MalformedReply(`${error.message}; ${ids.length} report(s) of ${pyRepr(campaignId)} stay in the outbox`, { status: 200 });
          continue;
        }
      }
      failure = failureOf(response, pyRepr(campaignId), ids.length);
      if (failure instanceof BatchTooLarge && envelopes.length > 1) {
        const half = Math.floor(envelopes.length / 2);
        const a = await this.#postBatch(campaignId, envelopes.slice(0, half));
        const b = await this.#postBatch(campaignId, envelopes.slice(half));
        return {
          delivered: [...a.delivered, ...b.delivered], rejected: [...a.rejected, ...b.rejected],
          unsettled: [...a.unsettled, ...b.unsettled], failure: b.failure ?? a.failure, accepted: a.accepted + b.accepted,
        };
      }
      if (failure instanceof RateLimited) {
        if (failure.retryAfter > this.retry.maxRetryAfter) break;
        continue;
      }
      if (failure instanceof AggregatorUnavailable || failure instanceof MalformedReply) continue;
      break;
    }
    return { delivered: [], rejected: [], unsettled: ids, failure, accepted: 0 };
  }

  /**
   * Deliver every queued report that can be delivered now; resolves with `{delivered, accepted, duplicate,
   * rejected, pending, expired, error, failure}` (Python's `FlushResult`). One flush at a time per database.
   */
  async flush() {
    return withLock(`${this.#lockName}:flush`, () => this.#flush());
  }

  async #flush() {
    const totals = { delivered: 0, accepted: 0, rejected: 0 };
    let failure = null;
    const at = now();
    const { expired, campaigns, notBefore } = await this.#store.tx('readwrite', async (t) => {
      let count = 0;
      const seen = [];
      for (const [id, entry] of (await t.all('outbox')).sort((a, b) => a[1].seq - b[1].seq)) {
        if (entry.created < at - this.outboxMaxAge) {
          await t.delete('outbox', id);
          await t.put('verdicts', id, { status: 'expired', campaign_id: entry.campaign_id, reason: entry.last_error, at, attempts: entry.attempts, queued_at: entry.created });
          count += 1;
        } else if (!seen.includes(entry.campaign_id)) seen.push(entry.campaign_id);
      }
      return { expired: count, campaigns: seen, notBefore: (await t.get('meta', 'not_before')) ?? 0 };
    });
    let todo = campaigns;
    if (todo.length && notBefore > at) {
      failure = new RateLimited(
        `the aggregator asked this device to wait until ${new Date(notBefore * 1000).toISOString()} (429 Retry-After); nothing was sent, the reports stay in the outbox; flush again after that time`,
        { retryAfter: notBefore - at },
      );
      todo = [];
    }
    for (const campaignId of todo) {
      const error = await this.#flushCampaign(campaignId, totals);
      if (error === null) continue;
      failure = error;
      if (error instanceof RateLimited) {
        await this.#store.tx('readwrite', (t) => t.put('meta', 'not_before', now() + error.retryAfter));
        break;
      }
      if (!(error instanceof TransportError) || error.code === 'transport_error') break; // unreachable: keep the rest queued
    }
    const pending = await this.#store.tx('readonly', async (t) => (await t.all('outbox')).length);
    return {
      delivered: totals.delivered, accepted: totals.accepted, duplicate: totals.delivered - totals.accepted,
      rejected: totals.rejected, pending, expired, error: failure?.message ?? null, failure,
    };
  }

  async #flushCampaign(campaignId, totals) {
    let after = 0;
    for (;;) {
      const batch = await this.#store.tx('readonly', async (t) => (await t.all('outbox'))
        .map(([, e]) => e).filter((e) => e.campaign_id === campaignId && e.seq > after)
        .sort((a, b) => a.seq - b.seq).slice(0, this.batchSize));
      if (!batch.length) return null;
      after = batch.at(-1).seq;
      const delivery = await this.#postBatch(campaignId, batch.map((e) => JSON.parse(e.envelope)));
      const at = now();
      await this.#store.tx('readwrite', async (t) => {
        for (const id of delivery.delivered) {
          await t.delete('outbox', id);
          await t.put('verdicts', id, { status: 'delivered', campaign_id: campaignId, reason: null, at });
        }
        for (const [id, code, reason] of delivery.rejected) {
          await t.delete('outbox', id);
          await t.put('verdicts', id, { status: 'rejected', campaign_id: campaignId, code, reason, at });
        }
        for (const id of delivery.unsettled) {
          const entry = await t.get('outbox', id);
          if (entry) {
            await t.put('outbox', id, { ...entry, attempts: entry.attempts + 1, last_error: delivery.failure?.message ?? null, error_code: delivery.failure?.code ?? null, last_attempt: at });
          }
        }
      });
      totals.delivered += delivery.delivered.length;
      totals.accepted += delivery.accepted;
      totals.rejected += delivery.rejected.length;
      if (delivery.failure) return delivery.failure;
    }
  }

  // -- what the device holds --------------------------------------------------------------------------

  /** The reports waiting in the outbox, oldest first, with why each waits (`why`) and its attempts. */
  async pending() {
    const rows = await this.#store.tx('readonly', (t) => t.all('outbox'));
    return rows.map(([, e]) => e).sort((a, b) => a.seq - b.seq).map((e) => ({
      reportId: e.report_id, campaignId: e.campaign_id, queuedAt: e.created, attempts: e.attempts,
      lastAttempt: e.last_attempt, lastError: e.last_error, lastErrorCode: e.error_code,
      expiresAt: e.created + this.outboxMaxAge, why: e.last_error ?? 'not sent yet',
    }));
  }

  async #verdicts(status) {
    const rows = await this.#store.tx('readonly', (t) => t.all('verdicts'));
    return rows.filter(([, v]) => v.status === status).sort((a, b) => a[1].at - b[1].at)
      .map(([id, v]) => ({ reportId: id, campaignId: v.campaign_id, code: v.code ?? null, reason: v.reason, at: v.at }));
  }

  /** Reports the aggregator rejected (a per-report verdict), with its reasons; never retried. */
  rejections() {
    return this.#verdicts('rejected');
  }

  /** Reports that waited longer than `outboxMaxAge` and left the outbox undelivered (ε stays spent). */
  expired() {
    return this.#verdicts('expired');
  }

  /** Where a report is: `queued`, `delivered`, `rejected`, `expired` (or `unknown`). */
  async reportStatus(reportId) {
    return this.#store.tx('readonly', async (t) => {
      if (await t.get('outbox', reportId)) return 'queued';
      return (await t.get('verdicts', reportId))?.status ?? 'unknown';
    });
  }

  /** ε spent per campaign and in total (exact, shown as numbers), the caps and what is left. */
  async ledger() {
    const rows = await this.#store.tx('readonly', (t) => t.all('meta'));
    const campaigns = {};
    let total = frac(0n);
    for (const [key, value] of rows) {
      if (typeof key === 'string' && key.startsWith('spent:')) campaigns[key.slice(6)] = { epsilon: fmtEps(fracOf(value.epsilon)), reports: value.reports };
      if (key === 'total_spent') total = fracOf(value);
    }
    return {
      campaigns, total: fmtEps(total), lifetimeBudget: fmtEps(this.lifetime), perCampaign: fmtEps(this.perCampaign),
      remaining: Math.max(0, fmtEps(sub(this.lifetime, total))),
    };
  }

  /**
   * Forget a campaign on this device (pin, memoized answers, queued reports): for the development loop
   * only. Answering it again spends its ε again; the ε already spent stays on the ledger.
   */
  async forget(campaignId) {
    this.#configs.delete(campaignId);
    return withLock(this.#lockName, () => this.#store.tx('readwrite', async (t) => {
      const pinned = Boolean(await t.get('pins', campaignId));
      await t.delete('pins', campaignId);
      let dropped = 0;
      for (const [id, e] of await t.all('outbox')) if (e.campaign_id === campaignId) { await t.delete('outbox', id); dropped += 1; }
      for (const [id, r] of await t.all('reports')) if (r.campaign_id === campaignId) await t.delete('reports', id);
      for (const [id, r] of await t.all('rounds')) if (r.campaign_id === campaignId) await t.delete('rounds', id);
      for (const [id, v] of await t.all('verdicts')) if (v.campaign_id === campaignId) await t.delete('verdicts', id);
      return { campaignId, pinned, dropped };
    }));
  }
}

function positive(name, value) {
  if (typeof value !== 'number' || !Number.isFinite(value) || !(value > 0 && value <= 1000)) {
    throw new InvalidParameter(`${pyRepr(name)} must be a finite number in (0, 1000], got ${value}`);
  }
  return exactFraction(value, name);
}

const receipt = (campaignId, reportId, epsilonSpent, memoized, recurring, trustModel, queued, round = null) =>
  Object.freeze({ campaignId, reportId, epsilonSpent, memoized, recurring, trustModel, queued, round });

function changed(config, answeredAt, cost, status, round = null) {
  const when = new Date(answeredAt * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
  const where = `campaign ${pyRepr(config.id)}${round === null ? '' : ` in round ${pyRepr(round)}`}`;
  const head = `${where} was already answered at ${when} with another value or other groups; that answer stands and nothing was spent or queued now`;
  if (status === 'delivered') {
    const counted = round === null ? 'one answer per device' : 'one answer per device and round';
    return new AnswerChanged(
      `${head}. It was delivered, and the aggregator counts ${counted}: a new report would be a duplicate that spends ε=${fmtEps(cost)} for nothing, so it cannot be re-answered` +
      (round === null ? '' : '; answer the next round instead'),
      { answeredAt },
    );
  }
  return new AnswerChanged(
    `${head}. A new answer would spend ε=${fmtEps(cost)} again, and the aggregator counts one answer per device${round === null ? '' : ' and round'}. ` +
    `The earlier answer is ${status}, not delivered: to replace it, submit again with reanswer: true`,
    { answeredAt },
  );
}

const PRIVATE = Symbol('Client');
export { DeviceStateError };
