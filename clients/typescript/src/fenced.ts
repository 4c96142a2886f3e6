// Fenced transactions: runFenced (one lock), runFencedMany (a token per
// key, several locks), runLocked (take the lock, run, release), and the
// transaction and retry machinery they share with runOnce.

import type { ClientBase, Pool, PoolClient } from 'pg';
import { classifyError, FencingError } from './errors';
import { LeaseSource, NEXT_ON } from './lease';
import { pipeline, PipelineError, Row, Statement } from './pipeline';
import { sleep } from './source';
import { AcquireOptions, isTokenSource, Token, TokenSource } from './token';

/** A pg.Pool, or a connected client (pg.Client or a pool's client). */
export type Queryable = Pool | ClientBase;

export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

export interface FencedOptions {
  /**
   * How many times to try, the first included (default 1: no retry).  Only
   * 40001 (serialization failure) and 40P01 (deadlock) are tried again, each
   * time on a client checked out of the pool again and with a new token
   * from the source; a fencing error (SF00x) never is.
   */
  attempts?: number;
  /** first pause before a retry, doubled each time, with jitter (default 10 ms) */
  baseDelayMs?: number;
  /** longest pause before a retry (default 1000 ms) */
  maxDelayMs?: number;
  /** the transaction's isolation level (default: the session's) */
  isolation?: IsolationLevel;
  /** abort the transaction: it rolls back (at the latest instead of COMMIT) and the promise rejects with the reason */
  signal?: AbortSignal;
}

/** What a fenced transaction's callback gets besides its client. */
export interface FencedContext {
  /** the transaction's token */
  token: Token;
  /** aborts when the caller's signal aborts or the lock is lost: stop, the transaction will roll back */
  signal: AbortSignal;
}

/** COMMIT answered ROLLBACK: the callback swallowed an error of its own transaction. */
export class TransactionAbortedError extends Error {
  constructor() {
    super('the transaction had failed (an error inside it was caught) and COMMIT rolled it back');
    this.name = 'TransactionAbortedError';
  }
}

const RETRYABLE = new Set(['40001', '40P01']);
const TOKEN_SQL = 'SELECT fencing.set_token($1)::text AS token';
// The pool check: at the start of a transaction a fencing.token is a
// session-level leftover.  Read first, then the token set, in one statement
// (a call by name; its columns are evaluated in order).
const CHECK_SQL =
  "SELECT pg_catalog.current_setting('fencing.token', true) AS leftover, pg_catalog.pg_backend_pid()::text AS pid";
const CHECK_AND_SET_SQL = `${CHECK_SQL}, fencing.set_token($1)::text AS token`;

function isPool(db: Queryable): db is Pool {
  return typeof (db as Pool).totalCount === 'number' && typeof (db as PoolClient).release !== 'function';
}

function beginStatement(isolation?: IsolationLevel): string {
  switch (isolation) {
    case undefined: return 'BEGIN';
    case 'read committed': return 'BEGIN ISOLATION LEVEL READ COMMITTED';
    case 'repeatable read': return 'BEGIN ISOLATION LEVEL REPEATABLE READ';
    case 'serializable': return 'BEGIN ISOLATION LEVEL SERIALIZABLE';
    default: throw new RangeError(`unknown isolation level ${String(isolation)}`);
  }
}

/** A signal that never aborts. */
const NEVER = new AbortController().signal;
const NOTHING = (): void => undefined;

/** A signal that aborts when any of signals does (one of them itself, when there is only one). */
function anySignal(signals: (AbortSignal | undefined)[]): { signal: AbortSignal; dispose(): void } {
  const live = signals.filter((s): s is AbortSignal => s !== undefined);
  if (live.length <= 1) return { signal: live[0] ?? NEVER, dispose: NOTHING };
  const c = new AbortController();
  const onAbort = (e: Event) => c.abort((e.target as AbortSignal).reason);
  for (const s of live) {
    if (s.aborted) { c.abort(s.reason); break; }
    s.addEventListener('abort', onAbort, { once: true });
  }
  return { signal: c.signal, dispose: () => live.forEach((s) => s.removeEventListener('abort', onAbort)) };
}

/** How the transaction gets its token: the statement after BEGIN, in its round trip. */
export interface TokenPlan {
  /** the pool check, and set_token when there is a token */
  statement: Statement;
  lostSignal?: AbortSignal;
  /** the transaction's token */
  token(row: Row | undefined): Token | null;
  /** the statement failed: the error to throw */
  failed(err: unknown): unknown;
}

export async function tokenPlan(source: TokenSource | Token | string | null, given?: Token): Promise<TokenPlan> {
  if (source === null) {
    return { statement: { text: CHECK_SQL }, token: () => null, failed: classifyError };
  }
  const t = given ?? (isTokenSource(source) ? await source.nextToken() : Token.from(source));
  return {
    statement: { text: CHECK_AND_SET_SQL, values: [t.toString()] },
    lostSignal: isTokenSource(source) ? source.lost : undefined,
    token: () => t,
    failed: classifyError,
  };
}

/** Marks an error after which the connection may still be in a transaction. */
const BROKEN = Symbol('fencing.connectionBroken');

async function rollback(client: ClientBase, err: unknown): Promise<void> {
  try {
    await client.query('ROLLBACK');
  } catch {
    if (typeof err === 'object' && err !== null) (err as { [BROKEN]?: boolean })[BROKEN] = true;
  }
}

/**
 * One transaction on client: BEGIN, the pool check and the token in one
 * round trip, body, COMMIT; ROLLBACK when anything fails.  The pool check:
 * a fencing.token set at session level (a leftover of some other code on
 * this connection) is reset inside this transaction, the token set again,
 * and a warning names the backend.
 */
export async function fencedTransaction<T>(
  client: ClientBase,
  plan: TokenPlan,
  isolation: IsolationLevel | undefined,
  signal: AbortSignal | undefined,
  body: (client: ClientBase, token: Token | null, signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = anySignal([signal, plan.lostSignal]);
  let token: Token | null = null;
  let committed = false;
  try {
    const statements: Statement[] = [{ text: beginStatement(isolation) }, plan.statement];
    let rows: Row[][];
    try {
      ({ rows } = await pipeline(client, statements));
    } catch (e) {
      const pe = e instanceof PipelineError ? e : new PipelineError(0, e);
      // BEGIN failed: nothing to roll back
      const out = pe.index === 1 ? plan.failed(pe.error) : classifyError(pe.error);
      if (pe.index > 0) await rollback(client, out);
      throw out;
    }
    token = plan.token(rows[1]?.[0]);
    try {
      const [leftover, pid] = rows[1][0];
      if (leftover) {
        process.emitWarning(
          `connection to backend ${pid} carried a session-level fencing.token (${leftover}): reset before this transaction`,
          { type: 'FencingWarning', code: 'FENCING_LEFTOVER_TOKEN' });
        await client.query('RESET fencing.token');
        if (token) await client.query(TOKEN_SQL, [token.toString()]);
      }
      abort.signal.throwIfAborted();
      const result = await body(client, token, abort.signal);
      abort.signal.throwIfAborted();
      const done = await client.query('COMMIT');
      if (done.command === 'ROLLBACK') throw new TransactionAbortedError();
      committed = true;
      return result;
    } catch (e) {
      const out = classifyError(e);
      if (!committed) await rollback(client, out);
      throw out;
    }
  } finally {
    abort.dispose();
  }
}

/**
 * Runs attempt(client, plan) with a client of db (checked out of the pool
 * for each attempt, given back after it, destroyed when it may still be in
 * a transaction), again on 40001/40P01 up to `attempts` times in all.  The
 * token of each attempt is taken first, before a client is checked out (a
 * source may need the pool itself), except a lease of this same pool's,
 * which takes it on that client before BEGIN.
 */
export async function withAttempts<T>(
  db: Queryable,
  options: FencedOptions,
  source: TokenSource | Token | string | null,
  attempt: (client: ClientBase, plan: TokenPlan) => Promise<T>,
): Promise<T> {
  const attempts = Math.max(1, Math.floor(options.attempts ?? 1));
  const base = options.baseDelayMs ?? 10;
  const max = options.maxDelayMs ?? 1000;
  for (let n = 1; ; n++) {
    options.signal?.throwIfAborted();
    try {
      if (!isPool(db)) return await attempt(db, await tokenPlan(source));
      // a lease of this pool takes its token on the transaction's own client
      const onClient = source instanceof LeaseSource && source.usesPool(db);
      const early = onClient ? null : await tokenPlan(source);
      const client: PoolClient = await db.connect();
      let broken: Error | undefined;
      try {
        const plan = early ?? await tokenPlan(source, await (source as LeaseSource)[NEXT_ON](db, client)!);
        return await attempt(client, plan);
      } catch (e) {
        if ((e as { [BROKEN]?: boolean })[BROKEN]) broken = e as Error;
        throw e;
      } finally {
        client.release(broken);
      }
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (e instanceof FencingError || n >= attempts || !code || !RETRYABLE.has(code)) throw e;
      if (!isPool(db) && (e as { [BROKEN]?: boolean })[BROKEN]) throw e;
      const cap = Math.min(max, base * 2 ** (n - 1));
      await sleep(cap / 2 + Math.random() * (cap / 2), options.signal);
    }
  }
}

/**
 * Runs fn in a fenced transaction: BEGIN; the token; fn(client, { token,
 * signal }); COMMIT.  The token: with a lock's source, a new one from it
 * for this transaction (`nextToken()`, which proves the lock is still
 * held; a lost lock throws LockLostError and nothing is written), so a
 * holder writes as many transactions as it likes under one lock in strict
 * mode; with a Token (or its text, or a StaticToken), that token.  It is
 * set with `SELECT fencing.set_token($1)` (a bound parameter, local to the
 * transaction) in the round trip of BEGIN.  Any error rolls back and is
 * thrown typed (errors.ts); only 40001/40P01 are retried (`attempts`).
 */
export function runFenced<T>(
  db: Queryable,
  source: TokenSource | Token | string,
  fn: (client: ClientBase, ctx: FencedContext) => Promise<T>,
  options: FencedOptions = {},
): Promise<T> {
  return withAttempts(db, options, source, (client, plan) =>
    fencedTransaction(client, plan, options.isolation, options.signal,
      (c, token, signal) => fn(c, { token: token!, signal })));
}

/**
 * Several locks in one transaction: a new token from each source (a key
 * of `sources` each), given to fn, which writes each into the fence
 * column of the rows under that lock; no session token is set, and the
 * guard judges each row by its own token (a stale one on any row aborts
 * the whole transaction).
 */
export function runFencedMany<K extends string, T>(
  db: Queryable,
  sources: Readonly<Record<K, TokenSource | Token | string>>,
  fn: (client: ClientBase, tokens: Record<K, Token>, ctx: { signal: AbortSignal }) => Promise<T>,
  options: FencedOptions = {},
): Promise<T> {
  const keys = Object.keys(sources) as K[];
  const lost = keys.map((k) => sources[k]).filter(isTokenSource).map((s) => s.lost);
  let tokens: Record<K, Token>;
  // the tokens of each attempt, taken before a client is checked out
  const many: TokenSource = {
    async nextToken() {
      const got = await Promise.all(keys.map((k) => {
        const s = sources[k];
        return isTokenSource(s) ? s.nextToken() : Promise.resolve(Token.from(s));
      }));
      tokens = Object.fromEntries(keys.map((k, i) => [k, got[i]])) as Record<K, Token>;
      return got[0];
    },
  } as TokenSource;
  return withAttempts(db, options, many, async (client, plan) => {
    const abort = anySignal([options.signal, ...lost]);
    try {
      return await fencedTransaction(client, { ...plan, statement: { text: CHECK_SQL }, token: () => null }, options.isolation, abort.signal,
        (c, _t, signal) => fn(c, tokens, { signal }));
    } finally {
      abort.dispose();
    }
  });
}

/**
 * One call: takes the lock (acquire with `timeoutMs`, `signal`, `fences`),
 * runs fn in a fenced transaction with the source's next token, and
 * releases the lock whatever happened.
 */
export async function runLocked<T>(
  db: Queryable,
  source: TokenSource,
  fn: (client: ClientBase, ctx: FencedContext) => Promise<T>,
  options: FencedOptions & AcquireOptions = {},
): Promise<T> {
  await source.acquire({ timeoutMs: options.timeoutMs, signal: options.signal, fences: options.fences });
  try {
    return await runFenced(db, source, fn, options);
  } finally {
    await source.release();
  }
}
