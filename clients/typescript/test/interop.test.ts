// The sources take the same locks as everyone else: against `etcdctl lock`
// (etcd's own mutex), a hand-written holder of the ZooKeeper lock recipe
// with the common node names (docs/vocabulary.md: PATH/<id>-lock-NNNNNNNNNN,
// here kazoo's form of them, <uuid hex>-lock-) and a hand-written holder of
// the Redis lock key (SET lock:{NAME} id NX PX), each holder excludes the
// other, both ways.

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { NotAcquiredError } from '@fencing/client';
import { env, newPool, unique } from './helpers';

const pool = newPool({ max: 2 });
after(() => pool.end());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `etcdctl lock NAME`: resolves with the key it prints once it holds the lock. */
function etcdctlLock(name: string): { proc: ChildProcess; locked: Promise<string>; stop(): Promise<void> } {
  const proc = spawn('etcdctl', [`--endpoints=${env.etcd}`, 'lock', name], {
    env: { ...process.env, ETCDCTL_API: '3' }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  proc.stderr!.on('data', (d) => { stderr += d; });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const locked = new Promise<string>((resolve, reject) => {
    createInterface({ input: proc.stdout! }).once('line', (l) => resolve(l.trim()));
    proc.once('exit', (c) => reject(new Error(`etcdctl lock exited ${c}: ${stderr}`)));
  });
  locked.catch(() => undefined);
  // SIGTERM: etcdctl unlocks (deletes its key, revokes its lease) and exits
  return { proc, locked, stop: async () => { if (proc.exitCode === null) proc.kill('SIGTERM'); await exited; } };
}

test('etcd: `etcdctl lock NAME` and EtcdSource exclude each other; both keys are NAME/<lease id in hex>', async () => {
  const { Etcd3 } = await import('etcd3');
  const { EtcdSource } = await import('@fencing/client/etcd');
  const etcd = new Etcd3({ hosts: env.etcd! });
  const name = `interop/${unique('etcd')}`;
  const src = new EtcdSource(etcd, pool, { name, ttlMs: 10000 });
  const cli = etcdctlLock(name);
  let other: ReturnType<typeof etcdctlLock> | null = null;
  try {
    const key = await cli.locked;
    assert.match(key, new RegExp(`^${name}/[0-9a-f]+$`), `etcdctl's key ${key}`);
    assert.equal(await src.tryAcquire(), null, 'the source got the lock etcdctl holds');
    const waiting = src.acquire({ timeoutMs: 30000 });
    await sleep(300);
    await cli.stop();
    const t = await waiting;
    assert.match(src.lockKey!, new RegExp(`^${name}/[0-9a-f]+$`));
    const lease = (await etcd.get(src.lockKey!).exec()).kvs[0].lease;
    assert.equal(src.lockKey, `${name}/${BigInt(lease).toString(16)}`, 'the key is named by its lease id in hex');
    // the source holds: a new etcdctl lock waits until it releases
    other = etcdctlLock(name);
    const early = await Promise.race([other.locked.then(() => 'locked'), sleep(1500).then(() => 'waiting')]);
    assert.equal(early, 'waiting', 'etcdctl took the lock the source holds');
    await src.nextToken();
    await src.release();
    const key2 = await other.locked;
    assert.match(key2, new RegExp(`^${name}/[0-9a-f]+$`));
    assert.ok(t.counter > 0n);
  } finally {
    await src.release().catch(() => undefined);
    await cli.stop();
    await other?.stop();
    etcd.close();
  }
});

test('zookeeper: a hand-written holder of the lock recipe (<uuid hex>-lock-NNNNNNNNNN) and ZooKeeperSource (Curator\'s _c_<uuid>-lock-NNNNNNNNNN) exclude each other', async () => {
  const zookeeper = await import('node-zookeeper-client');
  const { ZooKeeperSource } = await import('@fencing/client/zookeeper');
  const connect = async () => {
    const zk = zookeeper.createClient(env.zk!, { sessionTimeout: 10000 });
    await new Promise<void>((resolve) => { zk.once('connected', () => resolve()); zk.connect(); });
    return zk;
  };
  const zkSource = await connect();
  const zkHand = await connect();
  type Cb<T> = (err: Error | InstanceType<typeof zookeeper.Exception> | null, v: T) => void;
  const p = <T>(fn: (cb: Cb<T>) => void) => new Promise<T>((res, rej) => fn((e, v) => (e ? rej(e) : res(v))));
  const path = `/locks/${unique('interop')}`;
  // the recipe by hand: an ephemeral sequential node; the lowest sequence holds
  const seq = (n: string) => n.slice(n.lastIndexOf('lock-') + 5);
  const queue = async () => (await p<string[]>((cb) => zkHand.getChildren(path, cb)))
    .filter((c) => /lock-\d{10}$/.test(c)).sort((a, b) => (seq(a) < seq(b) ? -1 : 1));
  const handTake = async () => {
    await p<string>((cb) => zkHand.mkdirp(path, cb));
    const node = await p<string>((cb) => zkHand.create(`${path}/${randomUUID().replace(/-/g, '')}-lock-`,
      Buffer.alloc(0), zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL, cb));
    return node.slice(path.length + 1);
  };
  const src = new ZooKeeperSource(zkSource, pool, { path });
  try {
    const hand = await handTake();
    assert.deepEqual(await queue(), [hand], 'the hand-written holder holds the lock');
    assert.equal(await src.tryAcquire(), null, 'the source got the lock the hand-written holder holds');
    assert.deepEqual(await queue(), [hand], 'tryAcquire left no node behind');
    const waiting = src.acquire({ timeoutMs: 30000 });
    await sleep(300);
    const q = await queue();
    assert.equal(q.length, 2);
    assert.equal(q[0], hand);
    assert.match(q[1], /^_c_[0-9a-f-]{36}-lock-\d{10}$/, `the source's node ${q[1]} has Curator's name`);
    await p<void>((cb) => zkHand.remove(`${path}/${hand}`, -1, cb as Cb<void>));
    const t = await waiting;
    assert.equal(src.nodePath, `${path}/${q[1]}`);
    // the source holds: a hand-written contender queues behind it
    const hand2 = await handTake();
    const q2 = await queue();
    assert.deepEqual(q2, [q[1], hand2], 'the hand-written contender is behind the source');
    assert.ok((await src.nextToken()).compare(t) > 0);
    await src.release();
    assert.deepEqual(await queue(), [hand2], 'released: the hand-written contender holds the lock');
  } finally {
    await src.release().catch(() => undefined);
    zkSource.close();
    zkHand.close();
  }
});

test('redis: a hand-written holder of lock:{NAME} (SET NX PX) and RedisSource exclude each other; the source counts in fence:{NAME}', async () => {
  const { Redis } = await import('ioredis');
  const { RedisSource } = await import('@fencing/client/redis');
  const redis = new Redis({ host: '127.0.0.1', port: env.redisPort });
  const name = unique('interop');
  const src = new RedisSource(redis, pool, { name, ttlMs: 10000 });
  try {
    assert.equal(await redis.set(`lock:{${name}}`, 'by-hand', 'PX', 10000, 'NX'), 'OK');
    assert.equal(await src.tryAcquire(), null, 'the source got the lock held by hand');
    await assert.rejects(src.acquire({ timeoutMs: 200 }), NotAcquiredError);
    assert.equal(await redis.get(`lock:{${name}}`), 'by-hand');
    await redis.del(`lock:{${name}}`);
    const t = await src.acquire({ timeoutMs: 5000 });
    assert.equal(String(t.counter), await redis.get(`fence:{${name}}`), 'the grant token is INCR fence:{NAME}');
    assert.equal(await redis.set(`lock:{${name}}`, 'by-hand', 'PX', 10000, 'NX'), null, 'taken by hand while the source holds it');
    const n = await src.nextToken();
    assert.equal(String(n.counter), await redis.get(`fence:{${name}}`));
    await src.release();
    assert.equal(await redis.exists(`lock:{${name}}`), 0);
    assert.equal(await redis.set(`lock:{${name}}`, 'by-hand', 'PX', 10000, 'NX'), 'OK');
  } finally {
    await src.release().catch(() => undefined);
    redis.disconnect();
  }
});
