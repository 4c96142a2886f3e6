// A worker process for the tests: takes a lock from the token source its
// configuration names and writes with the grant's token on command.
//   in:  acquire | tryacquire | write TABLE ID | release | quit
//   out: locked TOKEN | nolock | ok | error CLASS REASON | released

import { createInterface } from 'node:readline';
import { Pool } from 'pg';
import { LeaseTokenSource, runFenced, Token, FencedOutError } from '@fencing/client';

interface Source {
  acquire(): Promise<Token>;
  tryAcquire?(): Promise<Token | null>;
  release(): Promise<void>;
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2]) as Record<string, any>;
  const pool = new Pool({ max: 1, port: cfg.pgPort ?? undefined });
  let source: Source;
  let close = async (): Promise<void> => {};
  switch (cfg.kind) {
    case 'lease':
      source = new LeaseTokenSource(pool, { name: cfg.name, ttlMs: cfg.ttlMs });
      break;
    case 'redis': {
      const { Redis } = await import('ioredis');
      const { RedisTokenSource } = await import('@fencing/client/redis');
      const redis = new Redis({ port: cfg.redisPort, host: '127.0.0.1', lazyConnect: false });
      source = new RedisTokenSource(redis, { name: cfg.name, ttlMs: cfg.ttlMs, db: pool });
      close = async () => { redis.disconnect(); };
      break;
    }
    case 'etcd': {
      const { Etcd3 } = await import('etcd3');
      const { EtcdTokenSource } = await import('@fencing/client/etcd');
      const etcd = new Etcd3({ hosts: cfg.etcd });
      source = new EtcdTokenSource(etcd, { key: cfg.name, ttlSeconds: cfg.ttlSeconds, db: pool });
      close = async () => etcd.close();
      break;
    }
    case 'zookeeper': {
      const zookeeper = await import('node-zookeeper-client');
      const { ZooKeeperTokenSource } = await import('@fencing/client/zookeeper');
      const zk = zookeeper.createClient(cfg.zk, { sessionTimeout: cfg.sessionTimeoutMs, retries: 0 });
      await new Promise<void>((resolve) => { zk.once('connected', () => resolve()); zk.connect(); });
      source = new ZooKeeperTokenSource(zk, { path: cfg.name, db: pool });
      close = async () => zk.close();
      break;
    }
    default:
      throw new Error(`unknown source ${cfg.kind}`);
  }

  let token: Token | null = null;
  const out = (s: string) => process.stdout.write(s + '\n');
  for await (const line of createInterface({ input: process.stdin })) {
    const [cmd, ...args] = line.trim().split(/\s+/);
    try {
      if (cmd === 'acquire') {
        token = await source.acquire();
        out(`locked ${token}`);
      } else if (cmd === 'tryacquire') {
        token = source.tryAcquire ? await source.tryAcquire() : await source.acquire();
        out(token ? `locked ${token}` : 'nolock');
      } else if (cmd === 'write') {
        if (!token) { out('error NoToken none'); continue; }
        const [table, id] = args;
        await runFenced(pool, token, (c) => c.query(`UPDATE ${table} SET n = n + 1 WHERE id = $1`, [id]));
        out('ok');
      } else if (cmd === 'release') {
        await source.release();
        out('released');
      } else if (cmd === 'quit') {
        break;
      }
    } catch (e) {
      const err = e as Error;
      out(`error ${err.name} ${e instanceof FencedOutError ? e.reason : (err as { code?: string }).code ?? '-'} ${err.message.replace(/\s+/g, ' ')}`);
    }
  }
  await close();
  await pool.end();
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
