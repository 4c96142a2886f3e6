// ZooKeeper (node-zookeeper-client, a three-server ensemble) as a token source.

import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import * as zookeeper from 'node-zookeeper-client';
import { Token } from '@fencing/client';
import { ZooKeeperTokenSource } from '@fencing/client/zookeeper';
import { env, frozenHolderScenario, newPool, protectedTable, unique } from './helpers';

const pool = newPool();
const zk = zookeeper.createClient(env.zk!, { sessionTimeout: 10000 });
before(() => new Promise<void>((resolve) => { zk.once('connected', () => resolve()); zk.connect(); }));
after(async () => { zk.close(); await pool.end(); });

test('zookeeper: every grant\'s token beats the one before (fence_from_zxid(czxid, generation))', async () => {
  const path = `/locks/${unique('z')}`;
  const src = new ZooKeeperTokenSource(zk, { path, db: pool });
  let last: Token | null = null;
  for (let i = 0; i < 3; i++) {
    const t = await src.acquire();
    const czxid = await new Promise<bigint>((resolve, reject) =>
      zk.exists(src.nodePath!, (err, stat) => (err ? reject(err) : resolve(ZooKeeperTokenSource.czxid(stat)))));
    assert.equal(t.epoch, czxid >> 32n);
    assert.equal(t.counter, czxid & 0xffffffffn);
    if (last) assert.ok(t.compare(last) > 0, `${t} > ${last}`);
    last = t;
    await src.release();
  }
});

test('zookeeper: a frozen holder past its session timeout is fenced off (StaleTokenError)', async (tc) => {
  const path = `/locks/${unique('z')}`;
  const table = await protectedTable(pool, 'ts_zk');
  const b = new ZooKeeperTokenSource(zk, { path, db: pool, acquireTimeoutMs: 60000 });
  const r = await frozenHolderScenario(tc, pool, table, `lock ${path} (A's session timeout 2 s)`,
    { kind: 'zookeeper', name: path, sessionTimeoutMs: 2000, zk: env.zk }, () => b.acquire());
  assert.match(r.reply, /^error StaleTokenError stale_token /);
  await b.release();
});
