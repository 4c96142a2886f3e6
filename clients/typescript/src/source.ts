// What every lock's token source shares: acquire with a timeout and an
// AbortSignal, renewal while the holder lives, the lock-lost signal, one
// operation on the lock at a time, and the first meter (the fences raised
// with the grant's token right after the lock is taken).

import type { Pool } from 'pg';
import { FencingError, LockLostError, NotAcquiredError, classifyError } from './errors';
import { pipeline, PipelineError } from './pipeline';
import { AcquireOptions, Scope, Token, TokenSource } from './token';

/** What every lock's source takes. */
export interface SourceOptions {
  /** the lock's time to live, in milliseconds; renewed every third of it while the holder lives */
  ttlMs: number;
  /** scopes whose fences every grant raises (acquire's `fences` replaces them for one grant) */
  fences?: readonly Scope[];
  /** called once when the lock is lost while held (not on release()) */
  onLost?: (err: LockLostError) => void;
  /** the pause between two attempts while another holder has the lock (default 50 ms) */
  retryDelayMs?: number;
}

/** A promise that resolves after ms, or rejects with signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => { clearTimeout(timer); reject(signal!.reason); };
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve(); }, Math.min(ms, 2 ** 31 - 1));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** p, or a rejection with message why once ms passed without p settling. */
export function within<T>(p: Promise<T>, ms: number, why: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(why)), ms);
  });
  p.catch(() => undefined);
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** A PostgreSQL array literal of text values. */
export function textArray(values: readonly string[]): string {
  return '{' + values.map((v) => '"' + v.replace(/[\\"]/g, (c) => '\\' + c) + '"').join(',') + '}';
}

/**
 * Raises the fence of each scope to token, in one transaction and one
 * round trip (fencing.raise_fence per scope): an older holder's later
 * write is then refused even before this holder's first real write.
 */
export async function raiseFences(db: Pool, token: Token, fences: readonly Scope[]): Promise<void> {
  if (fences.length === 0) return;
  const client = await db.connect();
  let broken: Error | undefined;
  try {
    const statements = [{ text: 'BEGIN' }, ...fences.map((f) => ({
      text: 'SELECT fencing.raise_fence($1::regclass, $2::text::fencing.fence, VARIADIC $3::text[])::text AS fence',
      values: [f.table, token.toString(),
        textArray(f.key === undefined ? [] : typeof f.key === 'string' ? [f.key] : [...f.key])],
    })), { text: 'COMMIT' }];
    try {
      await pipeline(client, statements);
    } catch (e) {
      await client.query('ROLLBACK').catch((err: Error) => { broken = err; });
      throw classifyError(e instanceof PipelineError ? e.error : e);
    }
  } finally {
    client.release(broken);
  }
}

const NOT_HELD = (() => {
  const c = new AbortController();
  c.abort(new LockLostError('the lock is not held'));
  return c.signal;
})();

/**
 * The machinery of a lock's source.  A subclass says how to take the lock
 * (grant), how to get a token of the grant held (next), how to renew and
 * how to give it up; this class runs them one at a time.
 */
export abstract class LockSource implements TokenSource {
  protected current: Token | null = null;
  private controller: AbortController | null = null;
  private renewTimer: NodeJS.Timeout | null = null;
  private lastRenewed = 0;
  /**
   * Set by a subclass's grant() to the moment it sent the request that
   * started the lock's TTL (its last renewal while it waited): the renewals
   * count from there, not from the end of grant().
   */
  protected renewedAt = 0;
  /** Whether next() renews the lock too (not etcd's put, which leaves its lease alone). */
  protected readonly nextRenews: boolean = true;
  private ops: Promise<unknown> = Promise.resolve();
  /** operations started or queued and not yet settled */
  private pending = 0;

  protected constructor(protected readonly db: Pool, protected readonly base: SourceOptions) {
    if (!(base.ttlMs > 0)) throw new RangeError('ttlMs must be a positive number of milliseconds');
  }

  /** What the errors name: "redis lock lock:{x}", ... */
  protected abstract describe(): string;
  /** Takes the lock: the grant's token, or null when another holder has it and `until` has passed. */
  protected abstract grant(until: number, signal?: AbortSignal): Promise<Token | null>;
  /** A new token of the grant held; null when the lock is no longer held. */
  protected abstract next(): Promise<Token | null>;
  /** Renews the lock; false when it is no longer held. */
  protected abstract renew(): Promise<boolean>;
  /** Gives the grant up (the service's side), and forgets it. */
  protected abstract releaseGrant(): Promise<void>;

  get token(): Token | null {
    return this.current;
  }

  get held(): boolean {
    return this.controller !== null && !this.controller.signal.aborted;
  }

  get lost(): AbortSignal {
    return this.controller?.signal ?? NOT_HELD;
  }

  /** Runs fn after every operation on the lock queued before it. */
  protected serial<T>(fn: () => Promise<T>): Promise<T> {
    // nothing queued: start at once (no turn of the event loop's queue in between)
    const run = this.pending === 0 ? fn() : this.ops.then(fn, fn);
    this.pending++;
    const settled = (): void => { this.pending--; };
    this.ops = run.then(settled, settled);
    return run;
  }

  async tryAcquire(options: Pick<AcquireOptions, 'fences' | 'signal'> = {}): Promise<Token | null> {
    return this.take(0, options);
  }

  async acquire(options: AcquireOptions = {}): Promise<Token> {
    const until = options.timeoutMs === undefined ? Infinity : Date.now() + Math.max(0, options.timeoutMs);
    const t = await this.take(until, options);
    if (!t) throw new NotAcquiredError(`${this.describe()} was not acquired within ${options.timeoutMs} ms: another holder has it`);
    return t;
  }

  private async take(until: number, options: Pick<AcquireOptions, 'fences' | 'signal'>): Promise<Token | null> {
    const token = await this.serial(async () => {
      options.signal?.throwIfAborted();
      if (this.held) throw new FencingError(`${this.describe()} is already held by this source`);
      this.renewedAt = 0;
      const started = Date.now();
      const t = await this.grant(until, options.signal);
      if (!t) return null;
      this.current = t;
      this.controller = new AbortController();
      this.lastRenewed = this.renewedAt || started;
      this.startRenewal();
      return t;
    });
    if (!token) return null;
    // renewals go on meanwhile
    try {
      await raiseFences(this.db, token, options.fences ?? this.base.fences ?? []);
    } catch (e) {
      await this.serial(() => this.endGrant(new LockLostError(`${this.describe()}: released, its fences could not be raised`)));
      throw e;
    }
    return token;
  }

  nextToken(): Promise<Token> {
    return this.serial(() => this.nextLocked());
  }

  /** nextToken's body, for a caller that already runs in serial(). */
  protected async nextLocked(): Promise<Token> {
    if (!this.held) throw this.lostReason();
    const sent = Date.now();
    const t = await this.next();
    if (!t) {
      this.markLost(`${this.describe()} is no longer held`);
      throw this.lostReason();
    }
    this.current = t;
    if (this.nextRenews) this.lastRenewed = sent;
    return t;
  }

  release(): Promise<void> {
    return this.serial(async () => {
      if (!this.controller) return;
      await this.endGrant(new LockLostError(`${this.describe()} was released`));
    });
  }

  private async endGrant(reason: LockLostError): Promise<void> {
    this.stopRenewal();
    const c = this.controller;
    try {
      await this.releaseGrant();
    } finally {
      this.current = null;
      if (c && !c.signal.aborted) c.abort(reason);
    }
  }

  /** The error nextToken() throws when the lock is not held. */
  protected lostReason(): LockLostError {
    const r = this.controller?.signal.reason;
    return r instanceof LockLostError ? r : new LockLostError(`${this.describe()} is not held`);
  }

  /** The lock is gone: stop renewing, abort `lost`, tell onLost (once). */
  protected markLost(why: string): void {
    const c = this.controller;
    if (!c || c.signal.aborted) return;
    this.stopRenewal();
    this.current = null;
    const err = new LockLostError(why);
    c.abort(err);
    this.forget();
    try {
      this.base.onLost?.(err);
    } catch (e) {
      process.nextTick(() => { throw e; });
    }
  }

  /** Drops what the subclass keeps of the grant, once it is lost (the service's side is gone already). */
  protected forget(): void {}

  private startRenewal(): void {
    const every = Math.max(10, Math.floor(this.base.ttlMs / 3));
    const tick = (): void => {
      this.renewTimer = null;
      void this.serial(async () => {
        if (!this.held) return;
        const sent = Date.now();
        try {
          // a renewal still unanswered when the TTL since the last one has passed is given up
          const left = Math.max(1, this.base.ttlMs - (Date.now() - this.lastRenewed));
          if (await within(this.renew(), left, `${this.describe()}: the renewal got no answer`)) this.lastRenewed = sent;
          else return this.markLost(`${this.describe()} could not be renewed: it expired or was taken over`);
        } catch (e) {
          // the service did not answer: the lock is lost once a whole TTL passed unrenewed
          if (Date.now() - this.lastRenewed >= this.base.ttlMs) {
            return this.markLost(`${this.describe()} could not be renewed for ${this.base.ttlMs} ms: ${(e as Error).message}`);
          }
        }
        if (this.held) {
          this.renewTimer = setTimeout(tick, every);
          this.renewTimer.unref();
        }
      });
    };
    // the first renewal a third of the TTL after the lock's TTL started (at once if grant() took longer)
    this.renewTimer = setTimeout(tick, Math.max(0, every - (Date.now() - this.lastRenewed)));
    this.renewTimer.unref();
  }

  private stopRenewal(): void {
    if (this.renewTimer) clearTimeout(this.renewTimer);
    this.renewTimer = null;
  }

  /**
   * For grant(), once the lock's TTL has started while it still has work to
   * do (the generation to read, the first token to take): renews every third
   * of the TTL, as the holder will once it holds the lock.  Returns stop().
   */
  protected keepAlive(renew: () => Promise<unknown>): () => void {
    const every = Math.max(10, Math.floor(this.base.ttlMs / 3));
    const timer = setInterval(() => {
      const sent = Date.now();
      renew().then((ok) => {
        if (ok !== false) this.renewedAt = Math.max(this.renewedAt, sent);
      }, () => undefined);
    }, every);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Polls grantOnce() until it grants or `until` passes (sources without a queue). */
  protected async poll(until: number, signal: AbortSignal | undefined, grantOnce: () => Promise<Token | null>): Promise<Token | null> {
    for (;;) {
      const t = await grantOnce();
      if (t) return t;
      const left = until - Date.now();
      if (left <= 0) return null;
      await sleep(Math.min(left, this.base.retryDelayMs ?? 50), signal);
    }
  }
}
