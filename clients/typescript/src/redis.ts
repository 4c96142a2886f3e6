// Tokens from a single Redis node (ioredis): SET lock NX PX ttl and, only
// when that took the lock, INCR the counter, in one Lua script; release
// with compare-and-delete.  Token: generation:counter.

import type { Redis } from 'ioredis';
import { randomUUID } from 'node:crypto';
import { LockNotAcquiredError } from './errors';
import { GenerationOptions, readGeneration } from './generation';
import { Token, TokenSource } from './token';

/** KEYS[1] lock, KEYS[2] counter; ARGV[1] our value, ARGV[2] ttl (ms) → the counter, or nil. */
export const ACQUIRE_SCRIPT = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`;

/** KEYS[1] lock; ARGV[1] our value → 1 when deleted, 0 when not ours. */
export const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

export interface RedisTokenSourceOptions extends GenerationOptions {
  /** the lock's name: keys lock:<name> and fence:<name> unless given */
  name: string;
  lockKey?: string;
  counterKey?: string;
  /** the lock's TTL in milliseconds */
  ttlMs: number;
  /** how long acquire() waits (default 30 s) */
  acquireTimeoutMs?: number;
  /** the pause between two attempts of acquire() (default 20 ms) */
  retryDelayMs?: number;
}

/**
 * A lock on one Redis node.  The lock is lost when its key expires (ttlMs);
 * the counter must never go back: after Redis lost data (a restart without
 * persistence, FLUSHALL, a failover) raise the generation.
 */
export class RedisTokenSource implements TokenSource {
  readonly lockKey: string;
  readonly counterKey: string;
  private value: string | null = null;
  private current: Token | null = null;

  constructor(private readonly redis: Redis, private readonly opts: RedisTokenSourceOptions) {
    this.lockKey = opts.lockKey ?? `lock:${opts.name}`;
    this.counterKey = opts.counterKey ?? `fence:${opts.name}`;
  }

  get token(): Token | null {
    return this.current;
  }

  /** One attempt: the grant's token, or null (no token) when another holds the lock. */
  async tryAcquire(): Promise<Token | null> {
    const value = randomUUID();
    const n = (await this.redis.eval(ACQUIRE_SCRIPT, 2, this.lockKey, this.counterKey, value,
      String(Math.round(this.opts.ttlMs)))) as number | null;
    if (n === null) return null;
    this.value = value;
    try {
      this.current = new Token(await readGeneration(this.opts, 'redis'), BigInt(n));
    } catch (e) {
      await this.release();
      throw e;
    }
    return this.current;
  }

  async acquire(): Promise<Token> {
    const deadline = Date.now() + (this.opts.acquireTimeoutMs ?? 30000);
    for (;;) {
      const t = await this.tryAcquire();
      if (t) return t;
      if (Date.now() >= deadline) throw new LockNotAcquiredError(`redis lock ${this.lockKey} is held by another client`);
      await new Promise((r) => setTimeout(r, this.opts.retryDelayMs ?? 20));
    }
  }

  /** Deletes the lock key if it is still ours. */
  async release(): Promise<void> {
    const value = this.value;
    this.value = null;
    this.current = null;
    if (value !== null) await this.redis.eval(RELEASE_SCRIPT, 1, this.lockKey, value);
  }
}
