// Redis (one node, ioredis) as a token source.

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { Token } from '@fencing/client';
import { RedisTokenSource } from '@fencing/client/redis';
import { env, frozenHolderScenario, newPool, protectedTable, unique, Worker } from './helpers';

const pool = newPool();
const redis = new Redis({ host: '127.0.0.1', port: env.redisPort });
after(async () => { redis.disconnect(); await pool.end(); });

test('redis: every grant\'s token beats the one before (generation:counter)', async () => {
  const src = new RedisTokenSource(redis, { name: unique('r'), ttlMs: 5000, db: pool });
  let last: Token | null = null;
  for (let i = 0; i < 3; i++) {
    const t = await src.acquire();
    assert.equal(t.epoch, 0n);
    if (last) assert.ok(t.compare(last) > 0, `${t} > ${last}`);
    last = t;
    await src.release();
  }
  assert.equal(last!.counter, 3n);
});

test('redis: a worker that did not get the lock gets no token, and the counter did not move', async () => {
  const name = unique('r');
  const holder = new RedisTokenSource(redis, { name, ttlMs: 30000, db: pool });
  const t = await holder.acquire();
  const w = new Worker({ kind: 'redis', name, ttlMs: 30000, redisPort: env.redisPort });
  try {
    assert.equal(await w.call('tryacquire'), 'nolock');
    assert.match(await w.call('write nothing r'), /^error NoToken/);
    assert.equal(await redis.get(`fence:${name}`), '1');
    // release is compare-and-delete: the worker's release leaves the lock alone
    assert.equal(await w.call('release'), 'released');
    assert.ok(await redis.exists(`lock:${name}`));
  } finally {
    await w.stop();
  }
  assert.equal(t.counter, 1n);
  await holder.release();
  assert.equal(await redis.exists(`lock:${name}`), 0);
});

test('redis: a frozen holder past its TTL is fenced off (StaleTokenError)', async (tc) => {
  const name = unique('r');
  const table = await protectedTable(pool, 'ts_redis');
  const b = new RedisTokenSource(redis, { name, ttlMs: 5000, db: pool, retryDelayMs: 20 });
  const r = await frozenHolderScenario(tc, pool, table, `SET lock:${name} NX PX ttl + INCR (A's ttl 500 ms)`,
    { kind: 'redis', name, ttlMs: 500, redisPort: env.redisPort }, () => b.acquire());
  assert.match(r.reply, /^error StaleTokenError stale_token /);
  await b.release();
});
