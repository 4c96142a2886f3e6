// runFenced: one transaction whose writes carry a fencing token.

import type { ClientBase, Pool, PoolClient } from 'pg';
import { classifyError, FencingError } from './errors';
import { Token } from './token';

/** A pg.Pool, or a connected client (pg.Client or a pool's client). */
export type Queryable = Pool | ClientBase;

/** Retries of serialization failures (40001) and deadlocks (40P01). */
export interface RetryOptions {
  /** attempts in all, the first included (default 1: no retry) */
  attempts?: number;
  /** first backoff, doubled at each retry, with jitter (default 10 ms) */
  baseDelayMs?: number;
  /** longest backoff (default 1000 ms) */
  maxDelayMs?: number;
}

export type IsolationLevel = 'read committed' | 'repeatable read' | 'serializable';

export interface FencedOptions {
  /** retry 40001/40P01 (never SF001 nor SF002): a number of attempts, or options */
  retry?: number | RetryOptions;
  /** the transaction's isolation level (default: the session's) */
  isolation?: IsolationLevel;
}

/** COMMIT answered ROLLBACK: the callback swallowed an error of its transaction. */
export class TransactionAbortedError extends Error {
  constructor() {
    super('the transaction had failed (an error inside it was caught) and COMMIT rolled it back');
    this.name = 'TransactionAbortedError';
  }
}

const RETRYABLE = new Set(['40001', '40P01']);
// marks an error after which the connection may still be in a transaction
const BROKEN = Symbol('fencing.connectionBroken');

function isPool(db: Queryable): db is Pool {
  return typeof (db as Pool).totalCount === 'number' && typeof (db as PoolClient).release !== 'function';
}

/**
 * Runs fn with a client of db: a client checked out of the pool (and given
 * back, or destroyed when it may still be in a transaction), or db itself.
 */
export async function withClient<T>(db: Queryable, fn: (client: ClientBase) => Promise<T>): Promise<T> {
  if (!isPool(db)) return fn(db);
  const client = await db.connect();
  let broken: Error | undefined;
  try {
    return await fn(client);
  } catch (e) {
    if ((e as { [BROKEN]?: boolean })[BROKEN]) broken = e as Error;
    throw e;
  } finally {
    client.release(broken);
  }
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

/**
 * BEGIN, body, COMMIT on client; ROLLBACK when anything fails.  An error is
 * returned classified (errors.ts).  When even ROLLBACK fails the error is
 * marked so that withClient destroys the connection instead of pooling it.
 */
export async function transaction<T>(
  client: ClientBase,
  isolation: IsolationLevel | undefined,
  body: (client: ClientBase) => Promise<T>,
): Promise<T> {
  await client.query(beginStatement(isolation));
  try {
    const result = await body(client);
    const done = await client.query('COMMIT');
    if (done.command === 'ROLLBACK') throw new TransactionAbortedError();
    return result;
  } catch (e) {
    const out = classifyError(e);
    try {
      await client.query('ROLLBACK');
    } catch {
      if (typeof out === 'object' && out !== null) (out as { [BROKEN]?: boolean })[BROKEN] = true;
    }
    throw out;
  }
}

function retryPlan(retry: FencedOptions['retry']): Required<RetryOptions> {
  const r = typeof retry === 'number' ? { attempts: retry } : retry ?? {};
  return { attempts: Math.max(1, r.attempts ?? 1), baseDelayMs: r.baseDelayMs ?? 10, maxDelayMs: r.maxDelayMs ?? 1000 };
}

/** Runs attempt() again on 40001/40P01, at most plan.attempts times in all. */
export async function withRetry<T>(retry: FencedOptions['retry'], attempt: () => Promise<T>): Promise<T> {
  const plan = retryPlan(retry);
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (e) {
      const code = (e as { code?: string }).code;
      if (e instanceof FencingError || n >= plan.attempts || !code || !RETRYABLE.has(code)) throw e;
      // a connection that may still be in a transaction is not used again
      if ((e as { [BROKEN]?: boolean })[BROKEN]) throw e;
      const cap = Math.min(plan.maxDelayMs, plan.baseDelayMs * 2 ** (n - 1));
      await new Promise((r) => setTimeout(r, cap / 2 + Math.random() * (cap / 2)));
    }
  }
}

/**
 * Runs fn in a transaction whose token is `token`: BEGIN; SELECT
 * fencing.set_token($1) (a bound parameter, local to the transaction, so it
 * works behind PgBouncer in transaction pooling); fn(client); COMMIT.  Any
 * error rolls back.  SF001 is thrown as a FencedOutError subclass
 * (StaleTokenError, TokenAlreadyUsedError, LeaseExpiredError,
 * ClaimTakenOverError), SF002 as TokenRequiredError; neither is ever
 * retried.  With `retry`, 40001 and 40P01 run the whole transaction again.
 *
 * Round trips: BEGIN, set_token, COMMIT, and fn's own queries; the same as
 * by hand.
 */
export async function runFenced<T>(
  db: Queryable,
  token: Token | string,
  fn: (client: ClientBase) => Promise<T>,
  options: FencedOptions = {},
): Promise<T> {
  const text = Token.from(token).toString();
  return withClient(db, (client) =>
    withRetry(options.retry, () =>
      transaction(client, options.isolation, async (c) => {
        await c.query('SELECT fencing.set_token($1)', [text]);
        return fn(c);
      }),
    ),
  );
}
