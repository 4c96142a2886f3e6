// The zookeeper source against its real service: test/source-suite.ts,
// and what is ZooKeeper's own: node-zookeeper-client never fails a request
// by itself, so the source must.
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, Socket } from 'node:net';
import * as zookeeper from 'node-zookeeper-client';
import { LockLostError } from '@fencing/client';
import { ZooKeeperSource } from '@fencing/client/zookeeper';
import { sourceSuite } from './source-suite';
import { env, newPool, unique, waitFor } from './helpers';

sourceSuite('zookeeper', 'locks');

const pool = newPool({ max: 2 });
after(() => pool.end());

test('zookeeper: a request sent while the client reconnects, whose session then expired, fails with LockLostError (it never hangs)', async () => {
  const zk = zookeeper.createClient(env.zk!, { sessionTimeout: 1000 });
  await new Promise<void>((resolve) => { zk.once('connected', () => resolve()); zk.connect(); });
  // no renewal during the test: the request below is the only one in flight
  const src = new ZooKeeperSource(zk, pool, { path: `/locks/${unique('expired')}`, ttlMs: 600000 });
  try {
    await src.acquire({ timeoutMs: 30000 });
    const timeout = zk.getSessionTimeout();
    let pending: Promise<unknown> | null = null;
    // the moment the client notices its connection is gone, before it
    // reconnects and learns that its session expired
    zk.once('disconnected', () => { pending = src.nextToken(); });
    // this process stops past the session's timeout (as a GC pause would)
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, timeout * 3 + 1000);
    await waitFor('the client to notice', () => pending !== null, 30000);
    await assert.rejects(pending!, LockLostError);
    assert.ok(src.lost.aborted && !src.held);
    await assert.rejects(src.nextToken(), LockLostError);
  } finally {
    await src.release().catch(() => undefined);
    zk.close();
  }
});

test('zookeeper: a server that never answers: tryAcquire and acquire fail after the session timeout (they never hang)', async () => {
  const sockets: Socket[] = [];
  const silent = createServer((s) => { sockets.push(s); s.on('error', () => undefined); });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
  const port = (silent.address() as { port: number }).port;
  const zk = zookeeper.createClient(`127.0.0.1:${port}`, { sessionTimeout: 1000 });
  zk.connect();
  const src = new ZooKeeperSource(zk, pool, { path: `/locks/${unique('silent')}` });
  try {
    const t0 = Date.now();
    await assert.rejects(src.tryAcquire(), /did not answer/);
    await assert.rejects(src.acquire({ timeoutMs: 500 }), /did not answer/);
    assert.ok(Date.now() - t0 < 20000, `took ${Date.now() - t0} ms`);
    assert.ok(!src.held);
  } finally {
    zk.close();
    for (const s of sockets) s.destroy();
    silent.close();
  }
});
