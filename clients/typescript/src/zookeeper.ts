// ZooKeeper's lock recipe (node-zookeeper-client) as a token source: an
// ephemeral sequential node PATH/<uuid>__lock__<sequence> (the names kazoo's
// Lock gives; nodes are ordered by their sequence, so Curator's
// InterProcessMutex nodes `..-lock-<sequence>` queue with them), the lowest
// holding the lock, each other waiting for the node just before its own.
//
// The token: the mzxid of a setData on the holder's own lock node, made
// while it holds the lock (the grant's token is the first right after the
// lock is taken, each transaction's another; a node gone means the lock is
// lost), mapped as fencing.fence_from_zxid(zxid, generation) maps it:
// ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff).
//
// The lock's time to live is the session timeout the ensemble granted
// (client.getSessionTimeout()): a holder paused longer than that loses its
// session, the server deletes its node, and the next node's owner takes
// the lock.

import { randomUUID } from 'node:crypto';
import { Client, CreateMode, Event, Exception, Stat } from 'node-zookeeper-client';
import type { Pool } from 'pg';
import { GenerationOptions, readGeneration } from './generation';
import { LockSource, sleep, SourceOptions } from './source';
import { Token } from './token';

export interface ZooKeeperSourceOptions extends Omit<SourceOptions, 'ttlMs'>, GenerationOptions {
  /** the lock's path (a znode whose children are the queue), e.g. /locks/refund-r1 */
  path: string;
  /** how often the holder checks its node (default: a third of the session timeout); the session is the lock's TTL */
  ttlMs?: number;
}

const SEQ = /(\d{10})$/;

function cb<T>(fn: (done: (err: Error | Exception | null, v?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v as T))));
}

function isNoNode(e: unknown): boolean {
  return (e as Exception)?.getCode?.() === Exception.NO_NODE;
}

/** The fence of a zxid: ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff). */
export function fenceFromZxid(zxid: bigint, generation: bigint): Token {
  return new Token((generation << 32n) | (zxid >> 32n), zxid & 0xffffffffn);
}

export class ZooKeeperSource extends LockSource {
  readonly path: string;
  private node: string | null = null;
  private generation = 0n;
  private readonly onExpired = (): void => this.markLost(`ZooKeeper lock ${this.path}: the session expired`);

  constructor(private readonly zk: Client, db: Pool, private readonly opts: ZooKeeperSourceOptions) {
    super(db, { ...opts, ttlMs: opts.ttlMs ?? zk.getSessionTimeout() ?? 10000 });
    this.path = opts.path.replace(/\/+$/, '');
  }

  /** The lock node held (its full path), or null. */
  get nodePath(): string | null {
    return this.node;
  }

  protected describe(): string {
    return `ZooKeeper lock ${this.path}`;
  }

  private async sortedChildren(): Promise<string[]> {
    return (await cb<string[]>((d) => this.zk.getChildren(this.path, d)))
      .filter((c) => SEQ.test(c))
      .sort((a, b) => (SEQ.exec(a)![1] < SEQ.exec(b)![1] ? -1 : 1));
  }

  protected async grant(until: number, signal?: AbortSignal): Promise<Token | null> {
    await cb<string>((d) => this.zk.mkdirp(this.path, d));
    const node = await cb<string>((d) =>
      this.zk.create(`${this.path}/${randomUUID()}__lock__`, Buffer.alloc(0), CreateMode.EPHEMERAL_SEQUENTIAL, d));
    const name = node.slice(this.path.length + 1);
    try {
      for (;;) {
        const children = await this.sortedChildren();
        const i = children.indexOf(name);
        if (i < 0) throw new Error(`${this.describe()}: our node ${node} is gone (the session expired)`);
        if (i === 0) break;
        const left = until - Date.now();
        if (left <= 0) {
          await cb((d) => this.zk.remove(node, -1, d));
          return null;
        }
        // the watch wakes us; the bound only re-checks the queue now and then
        await this.waitDeleted(`${this.path}/${children[i - 1]}`, Math.min(left, this.base.ttlMs), signal);
      }
      this.node = node;
      this.zk.once('expired', this.onExpired);
      this.generation = await readGeneration(this.db, this.opts, 'zookeeper');
      const token = await this.next();
      if (!token) throw new Error(`${this.describe()}: lost right after it was taken`);
      this.watchNode(node);
      return token;
    } catch (e) {
      this.forget();
      await cb((d) => this.zk.remove(node, -1, d)).catch(() => undefined);
      throw e;
    }
  }

  /** Waits for node to be deleted, at most ms. */
  private waitDeleted(node: string, ms: number, signal?: AbortSignal): Promise<void> {
    const stop = new AbortController();
    const onAbort = () => stop.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const gone = new Promise<void>((resolve, reject) => {
      this.zk.exists(node, () => resolve(), (err, stat) => {
        if (err) reject(err); else if (!stat) resolve();
      });
    });
    return Promise.race([gone, sleep(ms, stop.signal)]).finally(() => {
      stop.abort();
      signal?.removeEventListener('abort', onAbort);
    });
  }

  /** The lock is lost the moment its node is deleted (session expired, or removed by hand). */
  private watchNode(node: string): void {
    const watch = (event?: Event): void => {
      if (this.node !== node) return;
      if (event && event.getName() === 'NODE_DELETED') {
        this.markLost(`${this.describe()}: its node ${node} was deleted`);
        return;
      }
      this.zk.exists(node, watch, (err, stat) => {
        if (!err && !stat && this.node === node) this.markLost(`${this.describe()}: its node ${node} is gone`);
      });
    };
    watch();
  }

  protected async next(): Promise<Token | null> {
    try {
      const stat = await cb<Stat>((d) => this.zk.setData(this.node!, Buffer.alloc(0), -1, d));
      return fenceFromZxid(stat.mzxid.readBigUInt64BE(0), this.generation);
    } catch (e) {
      if (isNoNode(e)) return null;
      throw e;
    }
  }

  protected async renew(): Promise<boolean> {
    const stat = await cb<Stat | null>((d) => this.zk.exists(this.node!, d));
    return !!stat;
  }

  protected async releaseGrant(): Promise<void> {
    const node = this.node;
    this.forget();
    if (node) await cb((d) => this.zk.remove(node, -1, d)).catch((e) => { if (!isNoNode(e)) throw e; });
  }

  protected forget(): void {
    this.node = null;
    this.zk.removeListener('expired', this.onExpired);
  }
}
