// Typed errors for the SQLSTATEs of the fencing extension.  Each copies the
// fields of the node-postgres error it stands for (code, constraint, table,
// detail, hint, ...), so handlers that test err.code still work, and keeps
// that error as `cause`.

import type { DatabaseError } from 'pg';

/** SF001's reasons, as the server gives them in the constraint_name field. */
export type FencedOutReason =
  | 'stale_token'
  | 'token_already_used'
  | 'lease_expired'
  | 'claim_taken_over';

const DB_FIELDS = [
  'code', 'severity', 'detail', 'hint', 'position', 'internalPosition', 'internalQuery',
  'where', 'schema', 'table', 'column', 'dataType', 'constraint', 'file', 'line', 'routine',
] as const;

/** Base class of every error this library raises for a fencing SQLSTATE. */
export class FencingError extends Error {
  code?: string;
  severity?: string;
  detail?: string;
  hint?: string;
  schema?: string;
  table?: string;
  column?: string;
  constraint?: string;
  declare cause?: unknown;

  constructor(message: string, cause?: unknown) {
    super(message);
    this.name = new.target.name;
    if (cause !== undefined) {
      this.cause = cause;
      const src = cause as Record<string, unknown>;
      for (const f of DB_FIELDS) {
        if (src[f] !== undefined) (this as Record<string, unknown>)[f] = src[f];
      }
    }
  }
}

/**
 * SF001: the server refused the transaction's token.  Never retried: the
 * grant the token came from is no good any more (see `reason`).
 */
export class FencedOutError extends FencingError {
  readonly reason: string;
  constructor(reason: string, message: string, cause?: unknown) {
    super(message, cause);
    this.reason = reason;
  }
}

/** A newer token was accepted: the lock is lost; stop and acquire again. */
export class StaleTokenError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('stale_token', message, cause);
  }
}

/**
 * Strict mode: this very token was already used by another transaction.
 * Not a lost lock: retry through an idempotency key, or take a new token.
 */
export class TokenAlreadyUsedError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('token_already_used', message, cause);
  }
}

/** A built-in lease ran out or was released: acquire the lease again. */
export class LeaseExpiredError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('lease_expired', message, cause);
  }
}

/** An idempotency claim was lost: record nothing, call idem_begin again. */
export class ClaimTakenOverError extends FencedOutError {
  constructor(message: string, cause?: unknown) {
    super('claim_taken_over', message, cause);
  }
}

/** SF002: a write that needs a token had none (or two that differ). */
export class TokenRequiredError extends FencingError {}

/** SF003: an idempotency key was used before with a different request. */
export class IdempotencyKeyReusedError extends FencingError {}

/** SF004: another owner holds the idempotency key and its lease is live. */
export class InProgressError extends FencingError {}

/** A lock (or lease) could not be taken: no token was granted. */
export class LockNotAcquiredError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'LockNotAcquiredError';
  }
}

/**
 * The typed error for a node-postgres error, or the error itself when it
 * carries no fencing SQLSTATE.  SF001 is classified by its reason
 * (err.constraint); without one (a server before the reasons) it is a
 * StaleTokenError.
 */
export function classifyError(err: unknown): unknown {
  if (err instanceof FencingError || typeof err !== 'object' || err === null) return err;
  const e = err as Partial<DatabaseError>;
  const msg = e.message ?? String(err);
  switch (e.code) {
    case 'SF001':
      switch (e.constraint ?? 'stale_token') {
        case 'stale_token': return new StaleTokenError(msg, err);
        case 'token_already_used': return new TokenAlreadyUsedError(msg, err);
        case 'lease_expired': return new LeaseExpiredError(msg, err);
        case 'claim_taken_over': return new ClaimTakenOverError(msg, err);
        default: return new FencedOutError(e.constraint as string, msg, err);
      }
    case 'SF002': return new TokenRequiredError(msg, err);
    case 'SF003': return new IdempotencyKeyReusedError(msg, err);
    case 'SF004': return new InProgressError(msg, err);
    default: return err;
  }
}
