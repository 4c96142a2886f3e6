// The extension's own leases as a token source: fencing.lease_acquire for
// the grant, fencing.lease_next for each transaction's token (sent in the
// same round trip as the transaction's BEGIN), fencing.lease_renew while
// the holder lives, fencing.lease_release.

import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';
import type { Pool } from 'pg';
import { classifyError } from './errors';
import { LockSource, SourceOptions } from './source';
import { Token } from './token';
import type { Statement } from './pipeline';

export interface LeaseSourceOptions extends SourceOptions {
  /** the lease's name */
  name: string;
  /** who holds it, as fencing.lease_status shows it (default host:pid:random) */
  holder?: string;
}

function interval(ms: number): string {
  return `${Math.round(ms)} milliseconds`;
}

/** The lease's token in a fenced transaction's pipeline, and what to do once it ends. @internal */
export interface PipelinedToken {
  statement: Statement;
  /** the transaction ended: committed (with the token the statement returned) or not */
  done(committed: boolean, token: Token | null): void;
  /** the statement answered NULL: the lease is not held */
  lostNow(): Error;
}

export const PIPELINED = Symbol('fencing.pipelinedToken');

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

  private async one(text: string, values: unknown[]): Promise<string | null> {
    try {
      const { rows } = await this.db.query(text, values);
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
    const t = await this.one('SELECT fencing.lease_next($1, $2::fencing.fence, $3::interval)::text AS v',
      [this.name, this.current!.toString(), this.ttl]);
    return t === null ? null : Token.parse(t);
  }

  protected async renew(): Promise<boolean> {
    const ok = await this.one('SELECT fencing.lease_renew($1, $2::fencing.fence, $3::interval)::text AS v',
      [this.name, this.current!.toString(), this.ttl]);
    return ok === 'true';
  }

  protected async releaseGrant(): Promise<void> {
    const t = this.current;
    if (t) await this.one('SELECT fencing.lease_release($1, $2::fencing.fence)::text AS v', [this.name, t.toString()]);
  }

  /** Is the token held still the lease's current one, and live? */
  async check(): Promise<boolean> {
    if (!this.current) return false;
    return (await this.one('SELECT fencing.lease_check($1, $2::fencing.fence)::text AS v',
      [this.name, this.current.toString()])) === 'true';
  }

  /**
   * For a fenced transaction: waits for the source's other operations,
   * then gives the statement that takes the next token inside the
   * transaction itself (`SELECT fencing.set_token(fencing.lease_next(...))`,
   * in the round trip of BEGIN).  The lease's row stays locked until the
   * transaction ends, and the source runs nothing else until done() is
   * called: a rolled-back transaction leaves the lease at its old token.
   * @internal
   */
  [PIPELINED](): Promise<PipelinedToken> {
    return new Promise((resolveOuter, rejectOuter) => {
      void this.serial(() => new Promise<void>((finish) => {
        if (!this.held) {
          rejectOuter(this.lostReason());
          return finish();
        }
        resolveOuter({
          statement: {
            text: 'SELECT fencing.set_token(fencing.lease_next($1, $2::fencing.fence, $3::interval))::text AS token',
            values: [this.name, this.current!.toString(), this.ttl],
          },
          done: (committed, token) => {
            if (committed && token) this.current = token;
            finish();
          },
          lostNow: () => {
            this.markLost(`${this.describe()} is no longer held: it expired, was released or taken over`);
            return this.lostReason();
          },
        });
      }));
    });
  }
}
