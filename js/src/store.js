/**
 * The browser device's persistent state in IndexedDB, the twin of `deniable.client.state` (SQLite there):
 * the device secret, the pinned descriptors, the ε ledger with the memoized envelopes, the rounds of
 * recurring campaigns, the outbox and the per-report verdicts. An answer's ε spend, memo and outbox entry
 * are written in ONE readwrite transaction, so a tab closed or crashed mid-answer leaves either all three
 * or none (IndexedDB transactions are atomic and durable once `complete` fires).
 *
 * Object stores (database version 2):
 * - `meta`: `secret` (32 bytes from `crypto.getRandomValues`), `not_before` (a 429's Retry-After);
 * - `pins`: campaign id → `{fingerprint, summary}` (the summary holds no label, only SHA-256s of them);
 * - `reports`: report id → `{campaign_id, recurring, trust_model, cost: [num, den], envelope, answer_tag,
 *   created}`: the ledger and the memo (envelopes only: the raw value is never stored);
 * - `rounds`: `[campaign id, round]` → `{report_id, answer_id, envelope, created}`;
 * - `outbox`: report id → `{seq, campaign_id, envelope, created, attempts, last_error, error_code}`;
 * - `verdicts`: report id → `{status: delivered | rejected | expired, reason, at}`;
 * - `tokens`: admission token (base64url) → `{campaign_id, obtained}`: the wallet (bearer secrets, as the
 *   envelopes; one leaves it in the transaction of the report that spends it).
 *
 * Limits: whoever can run script in the page's origin reads all of it (the secret included), as anyone
 * with the state dir does on a native device; clearing the site's data loses the secret, so the next
 * answer is a new device with a new pseudonym (the aggregator cannot tell it from another respondent).
 */
import { DeviceStateError } from './errors.js';

const VERSION = 2; // 2: the tokens store
const STORES = ['meta', 'pins', 'reports', 'rounds', 'outbox', 'verdicts', 'tokens'];

const promised = (request) => new Promise((resolve, reject) => {
  request.onsuccess = () => resolve(request.result);
  request.onerror = () => reject(request.error);
});

function stateError(what, error) {
  if (error instanceof DeviceStateError) return error;
  const name = error?.name ?? 'Error';
  const why = name === 'QuotaExceededError'
    ? "the browser's storage quota for this site is full: free space (or allow more storage) and answer again"
    : `${name}: ${error?.message ?? error}`;
  return new DeviceStateError(`the device state in IndexedDB could not be ${what} (${why}); nothing was changed`);
}

export class DeviceStore {
  #db;

  static async open(name = 'deniable', indexedDB = globalThis.indexedDB) {
    if (!indexedDB) throw new DeviceStateError('this browser has no IndexedDB: the device cannot keep its secret and outbox');
    const store = new DeviceStore();
    try {
      const request = indexedDB.open(name, VERSION);
      request.onupgradeneeded = () => {
        const db = request.result;
        for (const s of STORES) if (!db.objectStoreNames.contains(s)) db.createObjectStore(s);
      };
      request.onblocked = () => {};
      store.#db = await promised(request);
    } catch (error) {
      throw stateError('opened', error);
    }
    store.#db.onversionchange = () => store.#db.close();
    return store;
  }

  close() {
    this.#db.close();
  }

  /**
   * Run `fn(t)` in one transaction over every store; `t.get(store, key)`, `t.put(store, key, value)`,
   * `t.delete(store, key)`, `t.all(store)` return promises that may be awaited inside `fn` (and nothing
   * else may: a pending non-IndexedDB promise would let the transaction commit early). Resolves with
   * `fn`'s result once the transaction has committed; any failure aborts it whole. `durability` 'strict'
   * (the default: flushed to disk before it completes, as every answer and verdict is) or 'relaxed' (for
   * the secret and the pins, which a later strict transaction flushes before any report leaves).
   */
  async tx(mode, fn, durability = 'strict') {
    let transaction;
    try {
      transaction = this.#db.transaction(STORES, mode, { durability });
    } catch (error) {
      throw stateError('read', error);
    }
    const done = new Promise((resolve, reject) => {
      transaction.oncomplete = () => resolve();
      transaction.onabort = () => reject(transaction.error ?? new Error('transaction aborted'));
      transaction.onerror = () => {};
    });
    const t = {
      get: (s, key) => promised(transaction.objectStore(s).get(key)),
      put: (s, key, value) => promised(transaction.objectStore(s).put(value, key)),
      delete: (s, key) => promised(transaction.objectStore(s).delete(key)),
      all: async (s) => {
        const store = transaction.objectStore(s);
        const [keys, values] = await Promise.all([promised(store.getAllKeys()), promised(store.getAll())]);
        return keys.map((key, i) => [key, values[i]]);
      },
    };
    let result;
    try {
      result = await fn(t);
    } catch (error) {
      try {
        transaction.abort();
      } catch {
        // already finished
      }
      done.catch(() => {});
      throw error;
    }
    try {
      await done;
    } catch (error) {
      throw stateError(mode === 'readonly' ? 'read' : 'written', error);
    }
    return result;
  }

  /** The device secret, created at first use (32 bytes from the CSPRNG, or `initial` when given). */
  async secret(initial = null) {
    const existing = await this.tx('readonly', (t) => t.get('meta', 'secret'));
    if (existing) return new Uint8Array(existing);
    const fresh = initial ?? globalThis.crypto.getRandomValues(new Uint8Array(32));
    return this.tx('readwrite', async (t) => {
      const raced = await t.get('meta', 'secret'); // another tab may have created it meanwhile
      if (raced) return new Uint8Array(raced);
      await t.put('meta', 'secret', fresh);
      return fresh;
    }, 'relaxed');
  }
}
