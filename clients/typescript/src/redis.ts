// A lock on one Redis node (ioredis) as a token source.  The keys, as in
// the docs' recipe: lock:{NAME} holds the holder's random id, fence:{NAME}
// the counter (the braces keep both in one Redis Cluster slot).
//   grant:           SET lock NX PX ttl and, only when that set it, INCR fence
//   each transaction: if GET lock == id then PEXPIRE ttl; INCR fence
//   renewal:          if GET lock == id then PEXPIRE ttl
//   release:          if GET lock == id then DEL lock
// each one script.  Token: generation:counter, the generation read from
// the database right after the lock is taken.

import type { Redis } from 'ioredis';
import type { Pool } from 'pg';
import { randomUUID } from 'node:crypto';
import { GenerationOptions, readGeneration } from './generation';
import { LockSource, SourceOptions } from './source';
import { Token } from './token';

/** KEYS[1] lock, KEYS[2] counter; ARGV[1] the holder's id, ARGV[2] ttl (ms) → the counter, or nil. */
export const ACQUIRE_SCRIPT = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`;

/** KEYS[1] lock, KEYS[2] counter; ARGV[1] id, ARGV[2] ttl (ms) → the next counter while held, or nil. */
export const NEXT_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('INCR', KEYS[2])
end
return false`;

/** KEYS[1] lock; ARGV[1] id, ARGV[2] ttl (ms) → 1 while held, 0 when not. */
export const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

/** KEYS[1] lock; ARGV[1] id → 1 when deleted, 0 when not ours. */
export const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

export interface RedisSourceOptions extends SourceOptions, GenerationOptions {
  /** the lock's name: keys lock:{name} and fence:{name} */
  name: string;
}

/**
 * A lock on one Redis node.  Lost when its key expires (a holder paused
 * past ttlMs) or is taken by another; the counter must never go back:
 * after Redis lost data (a restart without persistence, FLUSHALL, a
 * failover) raise the generation.
 */
export class RedisSource extends LockSource {
  readonly lockKey: string;
  readonly counterKey: string;
  private id: string | null = null;
  private generation = 0n;

  constructor(private readonly redis: Redis, db: Pool, private readonly opts: RedisSourceOptions) {
    super(db, opts);
    this.lockKey = `lock:{${opts.name}}`;
    this.counterKey = `fence:{${opts.name}}`;
  }

  protected describe(): string {
    return `redis lock ${this.lockKey}`;
  }

  private ttl(): string {
    return String(Math.round(this.opts.ttlMs));
  }

  protected grant(until: number, signal?: AbortSignal): Promise<Token | null> {
    return this.poll(until, signal, async () => {
      const id = randomUUID();
      this.renewedAt = Date.now();
      const n = (await this.redis.eval(ACQUIRE_SCRIPT, 2, this.lockKey, this.counterKey, id, this.ttl())) as number | null;
      if (n === null) return null;
      this.id = id;
      const stop = this.keepAlive(() => this.renew());
      try {
        this.generation = await readGeneration(this.db, this.opts, 'redis');
      } catch (e) {
        await this.releaseGrant();
        throw e;
      } finally {
        stop();
      }
      return new Token(this.generation, BigInt(n));
    });
  }

  protected async next(): Promise<Token | null> {
    const n = (await this.redis.eval(NEXT_SCRIPT, 2, this.lockKey, this.counterKey, this.id!, this.ttl())) as number | null;
    return n === null ? null : new Token(this.generation, BigInt(n));
  }

  protected async renew(): Promise<boolean> {
    return (await this.redis.eval(RENEW_SCRIPT, 1, this.lockKey, this.id!, this.ttl())) === 1;
  }

  protected async releaseGrant(): Promise<void> {
    const id = this.id;
    this.id = null;
    if (id !== null) await this.redis.eval(RELEASE_SCRIPT, 1, this.lockKey, id);
  }

  protected forget(): void {
    this.id = null;
  }
}
