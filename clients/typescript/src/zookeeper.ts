// Tokens from ZooKeeper (node-zookeeper-client): the lock recipe, an
// ephemeral sequential node under the lock's path, the lowest holding the
// lock; the number is the node's czxid, mapped by the database with
// fencing.fence_from_zxid(czxid, generation).
//
// The lock is lost only when the server expires the client's session: a
// holder paused (GC, SIGSTOP) for less than the negotiated session timeout
// (client.getSessionTimeout(), the requested sessionTimeout bounded by the
// server's minSessionTimeout and maxSessionTimeout, 2 and 20 ticks by
// default) still holds it; a pause longer than that loses it, and its node
// is deleted so the next node's owner takes the lock.

import { Client, CreateMode, Exception, Stat } from 'node-zookeeper-client';
import { LockNotAcquiredError, classifyError } from './errors';
import type { Queryable } from './fenced';
import { GenerationOptions, readGeneration } from './generation';
import { Token, TokenSource } from './token';

export interface ZooKeeperTokenSourceOptions extends GenerationOptions {
  /** the database: maps the czxid with fencing.fence_from_zxid (and holds the generation) */
  db: Queryable;
  /** the lock's path (a znode whose children are the queue), e.g. /locks/refund-r1 */
  path: string;
  /** how long acquire() waits for the lock (default 30 s) */
  acquireTimeoutMs?: number;
}

const SEQ = /(\d{10})$/;

function cb<T>(fn: (done: (err: Error | Exception | null, v?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v as T))));
}

export class ZooKeeperTokenSource implements TokenSource {
  private node: string | null = null;
  private current: Token | null = null;

  constructor(private readonly zk: Client, private readonly opts: ZooKeeperTokenSourceOptions) {}

  get token(): Token | null {
    return this.current;
  }

  /** The lock node held (its full path), or null. */
  get nodePath(): string | null {
    return this.node;
  }

  async acquire(): Promise<Token> {
    if (this.node) throw new Error(`ZooKeeper lock ${this.opts.path} is already held by this source`);
    const path = this.opts.path.replace(/\/+$/, '');
    const deadline = Date.now() + (this.opts.acquireTimeoutMs ?? 30000);
    await cb<string>((d) => this.zk.mkdirp(path, d));
    const node = await cb<string>((d) => this.zk.create(`${path}/lock-`, Buffer.alloc(0), CreateMode.EPHEMERAL_SEQUENTIAL, d));
    const name = node.slice(path.length + 1);
    try {
      for (;;) {
        const children = (await cb<string[]>((d) => this.zk.getChildren(path, d)))
          .filter((c) => SEQ.test(c))
          .sort((a, b) => (SEQ.exec(a)![1] < SEQ.exec(b)![1] ? -1 : 1));
        const i = children.indexOf(name);
        if (i < 0) throw new LockNotAcquiredError(`ZooKeeper lock node ${node} is gone (session expired?)`);
        if (i === 0) break;
        // wait for the node before ours to go
        const prev = `${path}/${children[i - 1]}`;
        const left = deadline - Date.now();
        if (left <= 0) throw new LockNotAcquiredError(`ZooKeeper lock ${path} is held by another client`);
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(resolve, left);
          this.zk.exists(prev, () => { clearTimeout(timer); resolve(); },
            (err: Error | Exception | null, stat: Stat) => {
              if (err) { clearTimeout(timer); reject(err); } else if (!stat) { clearTimeout(timer); resolve(); }
            });
        });
      }
      const stat = await cb<Stat>((d) => this.zk.exists(node, d));
      if (!stat) throw new LockNotAcquiredError(`ZooKeeper lock node ${node} is gone (session expired?)`);
      const czxid = stat.czxid.readBigUInt64BE(0);
      const generation = await readGeneration(this.opts, 'zookeeper');
      let rows;
      try {
        ({ rows } = await this.opts.db.query('SELECT fencing.fence_from_zxid($1, $2)::text AS token',
          [czxid.toString(), generation]));
      } catch (e) {
        throw classifyError(e);
      }
      this.node = node;
      this.current = Token.parse(rows[0].token);
      return this.current;
    } catch (e) {
      await cb((d) => this.zk.remove(node, -1, d)).catch(() => undefined);
      throw e;
    }
  }

  /** Deletes the lock node (nothing to do when the session already lost it). */
  async release(): Promise<void> {
    const node = this.node;
    this.node = null;
    this.current = null;
    if (node) await cb((d) => this.zk.remove(node, -1, d)).catch(() => undefined);
  }

  /** The czxid of a Stat, as a bigint. */
  static czxid(stat: Stat): bigint {
    return stat.czxid.readBigUInt64BE(0);
  }
}
