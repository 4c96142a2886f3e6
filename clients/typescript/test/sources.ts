// The four lock services' sources, made the same way for the tests and
// their worker processes: makeSource(kind, name, ttlMs) on the servers the
// suite started (helpers.env).

import { Pool } from 'pg';
import { LeaseSource, Scope, SourceOptions, TokenSource } from '@fencing/client';
import { env } from './helpers';

export type Kind = 'lease' | 'etcd' | 'zookeeper' | 'redis';
export const KINDS: Kind[] = ['lease', 'etcd', 'zookeeper', 'redis'];

/**
 * The locks of the tests that let a lock run out (a holder frozen past its
 * TTL), and a pause well past it (ms): 3 s, renewed every second, leaves a
 * loaded machine's late timers and slow answers room (2 s lost locks
 * before their first write when twenty test processes started at once).
 */
export const TTL: Record<Kind, { ttlMs: number; pauseMs: number }> = {
  lease: { ttlMs: 3000, pauseMs: 7000 },
  redis: { ttlMs: 3000, pauseMs: 7000 },
  etcd: { ttlMs: 3000, pauseMs: 7000 },       // etcd's leases are whole seconds
  zookeeper: { ttlMs: 3000, pauseMs: 7000 },  // the session timeout (the ensemble allows 1 s to 10 s)
};

export interface Made {
  source: TokenSource;
  close(): Promise<void>;
}

/** A source of kind for lock `name`, on its own connection to the service. */
export async function makeSource(kind: Kind, pool: Pool, name: string, ttlMs: number,
  extra: Partial<SourceOptions> & { fences?: Scope[] } = {}): Promise<Made> {
  switch (kind) {
    case 'lease':
      return { source: new LeaseSource(pool, { name, ttlMs, ...extra }), close: async () => undefined };
    case 'redis': {
      const { Redis } = await import('ioredis');
      const { RedisSource } = await import('@fencing/client/redis');
      const redis = new Redis({ host: '127.0.0.1', port: env.redisPort, maxRetriesPerRequest: 1 });
      return { source: new RedisSource(redis, pool, { name, ttlMs, ...extra }), close: async () => { redis.disconnect(); } };
    }
    case 'etcd': {
      const { Etcd3 } = await import('etcd3');
      const { EtcdSource } = await import('@fencing/client/etcd');
      const etcd = new Etcd3({ hosts: env.etcd! });
      return { source: new EtcdSource(etcd, pool, { name, ttlMs, ...extra }), close: async () => etcd.close() };
    }
    case 'zookeeper': {
      const zookeeper = await import('node-zookeeper-client');
      const { ZooKeeperSource } = await import('@fencing/client/zookeeper');
      const zk = zookeeper.createClient(env.zk!, { sessionTimeout: ttlMs });
      await new Promise<void>((resolve) => { zk.once('connected', () => resolve()); zk.connect(); });
      return {
        source: new ZooKeeperSource(zk, pool, { path: `/locks/${name}`, ...extra }),
        close: async () => zk.close(),
      };
    }
  }
}
