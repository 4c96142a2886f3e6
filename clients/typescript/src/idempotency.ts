// Idempotency keys: fencing.idem_begin / idem_checkpoint / idem_complete /
// idem_abandon, and runOnce, which runs a request at most once.

import type { ClientBase } from 'pg';
import { classifyError } from './errors';
import { fencedTransaction, FencedOptions, Queryable, withAttempts } from './fenced';
import { Token, TokenSource } from './token';

export type ClaimState = 'started' | 'resumed' | 'done';

/** What fencing.idem_begin answered. */
export interface Claim {
  key: string;
  state: ClaimState;
  /** the claim token (started, resumed); null when done */
  token: Token | null;
  /** the recorded result when done */
  result: unknown;
  /** how far the last owner got (resumed) */
  recoveryPoint: string | null;
  expiresAt: Date | null;
}

export interface BeginOptions {
  /** the claim's lease, an interval (default '1 minute') */
  lease?: string;
  /** how long the key and its result are kept (default '24 hours') */
  retention?: string;
  /** wait for a concurrent transaction on the key (default true) */
  wait?: boolean;
}

export interface RunOnceOptions extends BeginOptions, FencedOptions {
  /**
   * The token of fn's writes: a lock's source (its next token), a token,
   * or 'claim' for the claim token (fencing a table protected in key scope
   * by the request's key).  Default: none (fn's writes need no token).
   */
  token?: TokenSource | Token | string | 'claim';
}

const BEGIN_SQL =
  'SELECT state, token::text AS token, result, recovery_point, expires_at' +
  ' FROM fencing.idem_begin($1, $2::jsonb, $3::interval, $4::interval, $5)';

interface BeginRow {
  state: ClaimState;
  token: string | null;
  result: unknown;
  recovery_point: string | null;
  expires_at: Date | null;
}

function toClaim(key: string, row: BeginRow): Claim {
  return {
    key,
    state: row.state,
    token: row.token === null ? null : Token.parse(row.token),
    result: row.result,
    recoveryPoint: row.recovery_point,
    expiresAt: row.expires_at,
  };
}

async function query(db: Queryable | ClientBase, text: string, values: unknown[]) {
  try {
    return await db.query(text, values);
  } catch (e) {
    throw classifyError(e);
  }
}

function beginValues(key: string, request: unknown, o: BeginOptions): unknown[] {
  return [key, JSON.stringify(request), o.lease ?? '1 minute', o.retention ?? '24 hours', o.wait ?? true];
}

/**
 * fencing.idem_begin: claims the key (started, resumed) or returns its
 * recorded result (done).  SF004 → KeyInProgressError, SF003 →
 * KeyReusedError.  On a pool it commits at once (a claim for a
 * request of several transactions); on a client it joins its transaction.
 */
export async function idemBegin(db: Queryable, key: string, request: unknown, options: BeginOptions = {}): Promise<Claim> {
  const r = await query(db, BEGIN_SQL, beginValues(key, request, options));
  return toClaim(key, r.rows[0] as BeginRow);
}

/** fencing.idem_checkpoint: records progress, renews the lease.  SF001 → ClaimTakenOverError. */
export async function idemCheckpoint(
  db: Queryable, key: string, token: Token | string, recoveryPoint: string, lease?: string,
): Promise<void> {
  await query(db, 'SELECT fencing.idem_checkpoint($1, $2::text::fencing.fence, $3, $4::interval)',
    [key, Token.from(token).toString(), recoveryPoint, lease ?? null]);
}

/** fencing.idem_complete: records the result.  SF001 → ClaimTakenOverError. */
export async function idemComplete(db: Queryable, key: string, token: Token | string, result: unknown): Promise<void> {
  await query(db, 'SELECT fencing.idem_complete($1, $2::text::fencing.fence, $3::jsonb)',
    [key, Token.from(token).toString(), JSON.stringify(result ?? null)]);
}

/** fencing.idem_abandon: gives the claim up; the next idem_begin resumes at once. */
export async function idemAbandon(db: Queryable, key: string, token: Token | string): Promise<void> {
  await query(db, 'SELECT fencing.idem_abandon($1, $2::text::fencing.fence)', [key, Token.from(token).toString()]);
}

/**
 * Runs a request at most once.  In one transaction: idem_begin; when the
 * key is done, its recorded result is returned and fn is not called;
 * otherwise fn(client, claim) runs and its result is recorded with
 * idem_complete before COMMIT, so the business writes and the result
 * commit together (an error rolls back both, and the claim).  A key that
 * another owner is running → KeyInProgressError.  The result goes through
 * JSON (a replay returns what JSON.parse gives).  `attempts` retries
 * 40001/40P01 as runFenced does.
 */
export async function runOnce<T>(
  db: Queryable,
  key: string,
  request: unknown,
  fn: (client: ClientBase, claim: Claim) => Promise<T>,
  options: RunOnceOptions = {},
): Promise<T> {
  const values = beginValues(key, request, options);
  const source = options.token === undefined || options.token === 'claim' ? null : options.token;
  return withAttempts(db, options, source, (client, plan) =>
    fencedTransaction(client, plan, options.isolation, options.signal, async (c) => {
      const claim = toClaim(key, (await c.query(BEGIN_SQL, values)).rows[0] as BeginRow);
      if (claim.state === 'done') return claim.result as T;
      // the claim token in a statement of its own: the server lets only a
      // call by name set fencing.token (SELECT fencing.set_token($1)); set
      // inside the statement that calls idem_begin it is refused (55P02)
      if (options.token === 'claim') await c.query('SELECT fencing.set_token($1)', [claim.token!.toString()]);
      const result = await fn(c, claim);
      await c.query('SELECT fencing.idem_complete($1, $2::text::fencing.fence, $3::jsonb)',
        [key, claim.token!.toString(), JSON.stringify(result ?? null)]);
      return result;
    }),
  );
}
