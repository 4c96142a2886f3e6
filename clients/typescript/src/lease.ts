// The extension's own leases as a token source: fencing.lease_acquire for
// the grant, fencing.lease_next for each transaction's token (a statement
// of its own before the transaction's BEGIN, so that the lease's row is
// locked only for that statement: a holder frozen inside its transaction
// keeps no one waiting for the lease), fencing.lease_renew while the holder
// lives, fencing.lease_release.

import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { ClientBase, Pool } from 'pg';
import { classifyError } from './errors';
import { LockSource, SourceOptions } from './source';
import { Token } from './token';

/** @internal see LeaseSource[NEXT_ON] */
export const NEXT_ON = Symbol('fencing.nextTokenOn');

export interface LeaseSourceOptions extends SourceOptions {
  /** the lease's name */
  name: string;
  /** who holds it, as fencing.lease_status shows it (default host:pid:random) */
  holder?: string;
}

function interval(ms: number): string {
  return `${Math.round(ms)} milliseconds`;
}

/**
 * A built-in lease of the extension.  Its tokens are granted by the
 * database: every grant and every lease_next beats every token before it,
 * across failovers (the epoch).  A table protected with
 * `fencing.protect(..., lease => name)` refuses a write as soon as the
 * lease ran out (LeaseExpiredError), even before another holder wrote.
 */
export class LeaseSource extends LockSource {
  readonly name: string;
  readonly holder: string;
  private readonly ttl: string;

  constructor(db: Pool, options: LeaseSourceOptions) {
    super(db, options);
    this.name = options.name;
    this.holder = options.holder ?? `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    this.ttl = interval(options.ttlMs);
  }

  protected describe(): string {
    return `lease "${this.name}"`;
  }

  /** a client of this.db that next() uses instead of the pool, during [NEXT_ON] */
  private via: ClientBase | null = null;

  private async one(text: string, values: unknown[]): Promise<string | null> {
    try {
      const { rows } = await (this.via ?? this.db).query(text, values);
      return rows[0].v as string | null;
    } catch (e) {
      throw classifyError(e);
    }
  }

  protected grant(until: number, signal?: AbortSignal): Promise<Token | null> {
    return this.poll(until, signal, async () => {
      this.renewedAt = Date.now();
      const t = await this.one('SELECT fencing.lease_acquire($1, $2, $3::interval)::text AS v',
        [this.name, this.holder, this.ttl]);
      return t === null ? null : Token.parse(t);
    });
  }

  protected async next(): Promise<Token | null> {
    const t = await this.one('SELECT fencing.lease_next($1, $2::text::fencing.fence, $3::interval)::text AS v',
      [this.name, this.current!.toString(), this.ttl]);
    return t === null ? null : Token.parse(t);
  }

  protected async renew(): Promise<boolean> {
    const ok = await this.one('SELECT fencing.lease_renew($1, $2::text::fencing.fence, $3::interval)::text AS v',
      [this.name, this.current!.toString(), this.ttl]);
    return ok === 'true';
  }

  protected async releaseGrant(): Promise<void> {
    const t = this.current;
    if (t) await this.one('SELECT fencing.lease_release($1, $2::text::fencing.fence)::text AS v', [this.name, t.toString()]);
  }

  /**
   * nextToken() on a client of `db` that the caller checked out for its
   * transaction, before its BEGIN (lease_next in autocommit, the lease's row
   * locked for that statement only): one checkout for the token and the
   * transaction.  Null when the lease lives in another pool than `db`.
   * @internal
   */
  [NEXT_ON](db: Pool, client: ClientBase): Promise<Token> | null {
    if (!this.usesPool(db)) return null;
    return this.serial(async () => {
      this.via = client;
      try {
        return await this.nextLocked();
      } finally {
        this.via = null;
      }
    });
  }

  /** @internal does the lease live in db (the pool the source was given)? */
  usesPool(db: unknown): boolean {
    return db === this.db;
  }

  /** Is the token held still the lease's current one, and live? */
  async check(): Promise<boolean> {
    if (!this.current) return false;
    return (await this.one('SELECT fencing.lease_check($1, $2::text::fencing.fence)::text AS v',
      [this.name, this.current.toString()])) === 'true';
  }
}
