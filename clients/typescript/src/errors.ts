// Typed errors.  Every error of this library is a FencingError; those the
// server raised (a fencing SQLSTATE) are also node-postgres's own
// DatabaseError, with its fields (code, constraint, table, detail, hint,
// ...) copied from the error the server sent, which stays as `cause`: a
// handler that tests `err instanceof DatabaseError` or `err.code ===
// 'SF001'` still catches them.

import { DatabaseError } from 'pg';

const BRAND = Symbol.for('@fencing/client.FencingError');
const defaultHasInstance = Function.prototype[Symbol.hasInstance];

/**
 * The base of every error of this library: `err instanceof FencingError`
 * is true for all of them, those that are also DatabaseErrors included.
 */
export class FencingError extends Error {
  declare cause?: unknown;
  /** the SQLSTATE, for errors the server raised */
  code?: string;

  constructor(message: string, options?: { cause?: unknown }) {
    super(message);
    if (options?.cause !== undefined) this.cause = options.cause;
    Object.defineProperty(this, 'name', { value: new.target.name, configurable: true, writable: true });
  }

  static [Symbol.hasInstance](x: unknown): boolean {
    if (this === FencingError) return typeof x === 'object' && x !== null && (x as Record<symbol, unknown>)[BRAND] === true;
    return defaultHasInstance.call(this, x);
  }
}
Object.defineProperty(FencingError.prototype, BRAND, { value: true });

/** SF001's reasons, as the server gives them in the error's constraint field. */
export type FencedOutReason = 'stale_token' | 'token_already_used' | 'lease_expired' | 'claim_taken_over';

const DB_FIELDS = [
  'severity', 'code', 'detail', 'hint', 'position', 'internalPosition', 'internalQuery', 'where',
  'schema', 'table', 'column', 'dataType', 'constraint', 'file', 'line', 'routine',
] as const;

/** A fencing SQLSTATE from the server: a FencingError and a node-postgres DatabaseError. */
export class FencingDatabaseError extends DatabaseError {
  declare cause?: unknown;

  constructor(message: string, cause?: unknown) {
    super(message, (cause as { length?: number } | undefined)?.length ?? 0, 'error');
    Object.defineProperty(this, 'name', { value: new.target.name, configurable: true, writable: true });
    if (cause !== undefined) {
      this.cause = cause;
      const src = cause as Record<string, unknown>;
      for (const f of DB_FIELDS) {
        if (src[f] !== undefined) (this as unknown as Record<string, unknown>)[f] = src[f];
      }
    }
  }
}
Object.defineProperty(FencingDatabaseError.prototype, BRAND, { value: true });

/** SF001: the server refused the token (see `reason`).  Never retried. */
export class FencedOutError extends FencingDatabaseError {
  readonly reason: string;
  constructor(reason: string, message: string, cause?: unknown) {
    super(message, cause);
    this.reason = reason;
  }
}

/** SF001 stale_token: a newer token was accepted: the lock was lost; stop, acquire again. */
export class StaleTokenError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('stale_token', message, cause);
  }
}

/**
 * SF001 token_already_used: a strict table saw this very token in another
 * transaction.  A programming error, not a lost lock: take a new token for
 * each transaction (a lock's source does).
 */
export class TokenAlreadyUsedError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('token_already_used', message, cause);
  }
}

/** SF001 lease_expired: the built-in lease ran out or was released: acquire it again. */
export class LeaseExpiredError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('lease_expired', message, cause);
  }
}

/** SF001 claim_taken_over: an idempotency claim was lost: record nothing, begin the key again. */
export class ClaimTakenOverError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('claim_taken_over', message, cause);
  }
}

/** SF002: a write that needs a token had none, or two that differ. */
export class TokenRequiredError extends FencingDatabaseError {}

/** SF003: an idempotency key was used before with another request. */
export class KeyReusedError extends FencingDatabaseError {}

/** SF004: another owner runs the idempotency key and its lease is live: try later. */
export class KeyInProgressError extends FencingDatabaseError {}

/** SF005: DDL that would disable or break a protected table's guard. */
export class GuardAlteredError extends FencingDatabaseError {}

/** The lock was not taken in time (acquire's timeoutMs). */
export class NotAcquiredError extends FencingError {}

/** The lock was lost while held (expired, taken over, its session gone), or is not held. */
export class LockLostError extends FencingError {}

/**
 * The typed error for a node-postgres error, or the error itself when it
 * carries no fencing SQLSTATE.  SF001 is classified by its reason
 * (err.constraint); without one (a server before the reasons) it is a
 * StaleTokenError, and a reason this version does not know gives a plain
 * FencedOutError with that reason.
 */
export function classifyError(err: unknown): unknown {
  if (typeof err !== 'object' || err === null || err instanceof FencingError) return err;
  const e = err as Partial<DatabaseError>;
  const msg = e.message ?? String(err);
  switch (e.code) {
    case 'SF001':
      switch (e.constraint || 'stale_token') {
        case 'stale_token': return new StaleTokenError(msg, err);
        case 'token_already_used': return new TokenAlreadyUsedError(msg, err);
        case 'lease_expired': return new LeaseExpiredError(msg, err);
        case 'claim_taken_over': return new ClaimTakenOverError(msg, err);
        default: return new FencedOutError(e.constraint as string, msg, err);
      }
    case 'SF002': return new TokenRequiredError(msg, err);
    case 'SF003': return new KeyReusedError(msg, err);
    case 'SF004': return new KeyInProgressError(msg, err);
    case 'SF005': return new GuardAlteredError(msg, err);
    default: return err;
  }
}
