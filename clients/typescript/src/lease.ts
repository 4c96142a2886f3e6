// Tokens from the extension's own leases: fencing.lease_acquire / renew /
// release.  The token source and the resource share one database.

import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import { classifyError, LockNotAcquiredError } from './errors';
import type { Queryable } from './fenced';
import { Token, TokenSource } from './token';

export interface LeaseTokenSourceOptions {
  /** the lease's name */
  name: string;
  /** the lease's duration, in milliseconds */
  ttlMs: number;
  /** who holds it (default host:pid:random) */
  holder?: string;
  /** how long acquire() waits for a live lease to be freed (default 30 s) */
  acquireTimeoutMs?: number;
  /** the pause between two attempts of acquire() (default 50 ms) */
  retryDelayMs?: number;
}

function interval(ms: number): string {
  if (!(ms > 0)) throw new RangeError('a lease duration must be positive');
  return `${Math.round(ms)} milliseconds`;
}

/**
 * A built-in lease of the extension.  Its tokens are granted by the
 * database: every grant beats every earlier one of that name, across
 * failovers (the epoch).  Protect tables with fencing.protect(...,
 * lease => name) to have writes refused as soon as the lease ran out
 * (LeaseExpiredError), even before another holder wrote.
 */
export class LeaseTokenSource implements TokenSource {
  readonly name: string;
  readonly holder: string;
  private readonly opts: LeaseTokenSourceOptions;
  private current: Token | null = null;

  constructor(private readonly db: Queryable, options: LeaseTokenSourceOptions) {
    this.opts = options;
    this.name = options.name;
    this.holder = options.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    interval(options.ttlMs);
  }

  /** The token of the grant held, or null. */
  get token(): Token | null {
    return this.current;
  }

  /** One attempt: the grant's token, or null while another holder's lease is live. */
  async tryAcquire(): Promise<Token | null> {
    let rows;
    try {
      ({ rows } = await this.db.query('SELECT fencing.lease_acquire($1, $2, $3::interval)::text AS token',
        [this.name, this.holder, interval(this.opts.ttlMs)]));
    } catch (e) {
      throw classifyError(e);
    }
    const t = rows[0].token as string | null;
    this.current = t === null ? null : Token.parse(t);
    return this.current;
  }

  /** Waits for the lease (up to acquireTimeoutMs); LockNotAcquiredError after. */
  async acquire(): Promise<Token> {
    const deadline = Date.now() + (this.opts.acquireTimeoutMs ?? 30000);
    for (;;) {
      const t = await this.tryAcquire();
      if (t) return t;
      if (Date.now() >= deadline) throw new LockNotAcquiredError(`lease "${this.name}" is held by another holder`);
      await new Promise((r) => setTimeout(r, this.opts.retryDelayMs ?? 50));
    }
  }

  /** Extends the live lease by ttlMs; false once it expired, was released or taken over. */
  async renew(ttlMs: number = this.opts.ttlMs): Promise<boolean> {
    if (!this.current) return false;
    const { rows } = await this.db.query('SELECT fencing.lease_renew($1, $2::fencing.fence, $3::interval) AS ok',
      [this.name, this.current.toString(), interval(ttlMs)]);
    return rows[0].ok === true;
  }

  /** Is the token held still the lease's current one, and live? */
  async check(): Promise<boolean> {
    if (!this.current) return false;
    const { rows } = await this.db.query('SELECT fencing.lease_check($1, $2::fencing.fence) AS ok',
      [this.name, this.current.toString()]);
    return rows[0].ok === true;
  }

  /** Ends the lease now (if still ours), so the next acquire succeeds at once. */
  async release(): Promise<void> {
    if (!this.current) return;
    const t = this.current.toString();
    this.current = null;
    await this.db.query('SELECT fencing.lease_release($1, $2::fencing.fence)', [this.name, t]);
  }
}
