// etcd (etcd3) as a token source.

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { Etcd3 } from 'etcd3';
import { Token } from '@fencing/client';
import { EtcdTokenSource } from '@fencing/client/etcd';
import { env, frozenHolderScenario, newPool, protectedTable, unique } from './helpers';

const pool = newPool();
const etcd = new Etcd3({ hosts: env.etcd! });
after(async () => { etcd.close(); await pool.end(); });

test('etcd: every grant\'s token beats the one before (generation:create revision)', async () => {
  const key = unique('locks/e');
  const src = new EtcdTokenSource(etcd, { key, ttlSeconds: 5, db: pool });
  let last: Token | null = null;
  for (let i = 0; i < 3; i++) {
    const t = await src.acquire();
    const kv = await etcd.get(key).exec();
    assert.equal(BigInt(kv.kvs[0].create_revision), t.counter, 'the token is the key\'s create revision');
    if (last) assert.ok(t.compare(last) > 0, `${t} > ${last}`);
    last = t;
    await src.release();
  }
});

test('etcd: a second client gets no token while the key is held', async () => {
  const key = unique('locks/e');
  const a = new EtcdTokenSource(etcd, { key, ttlSeconds: 5, db: pool });
  const b = new EtcdTokenSource(etcd, { key, ttlSeconds: 5, db: pool });
  await a.acquire();
  assert.equal(await b.tryAcquire(), null);
  await a.release();
  assert.ok(await b.tryAcquire());
  await b.release();
});

test('etcd: a frozen holder past its lease TTL is fenced off (StaleTokenError)', async (tc) => {
  const key = unique('locks/e');
  const table = await protectedTable(pool, 'ts_etcd');
  const b = new EtcdTokenSource(etcd, { key, ttlSeconds: 5, db: pool, retryDelayMs: 50 });
  const r = await frozenHolderScenario(tc, pool, table, `lock ${key} (A's lease TTL 2 s)`,
    { kind: 'etcd', name: key, ttlSeconds: 2, etcd: env.etcd }, () => b.acquire());
  assert.match(r.reply, /^error StaleTokenError stale_token /);
  await b.release();
});
