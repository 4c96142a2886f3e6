// etcd's own mutex (the etcd3 client) as a token source: the protocol of
// `etcdctl lock NAME` and Go's concurrency.Mutex, so that all of them
// exclude each other.  Each contender puts NAME/<lease id in hex> under its
// lease; the key with the lowest create revision holds the lock, and each
// other waits for the deletion of the key just before its own.
//
// The token: generation:revision, the revision the header of a
// transaction `If(CreateRevision(own key) == mine) Then(Put(own key,
// ignore lease))` answers, made while the lock is held: the grant's token
// is the first such put right after the lock is taken, each transaction's
// token another.  A failed compare means the lock is lost.

import { Etcd3, EtcdLeaseInvalidError, Lease } from 'etcd3';
import type { Pool } from 'pg';
import { GenerationOptions, readGeneration } from './generation';
import { LockSource, sleep, SourceOptions } from './source';
import { Token } from './token';

export interface EtcdSourceOptions extends SourceOptions, GenerationOptions {
  /** the lock's name: its keys are NAME/<lease id> */
  name: string;
}

export class EtcdSource extends LockSource {
  readonly name: string;
  private lease: Lease | null = null;
  private key: string | null = null;
  private createRevision = '0';
  private generation = 0n;
  protected override readonly nextRenews = false;

  /** ttlMs is rounded up to whole seconds, etcd's unit (at least 1 s; etcd may grant more). */
  constructor(private readonly etcd: Etcd3, db: Pool, private readonly opts: EtcdSourceOptions) {
    super(db, opts);
    this.name = opts.name.replace(/\/+$/, '');
  }

  /** The lock key held (NAME/<lease id in hex>), or null. */
  get lockKey(): string | null {
    return this.key;
  }

  protected describe(): string {
    return `etcd lock ${this.name}`;
  }

  protected async grant(until: number, signal?: AbortSignal): Promise<Token | null> {
    const lease = this.etcd.lease(Math.max(1, Math.ceil(this.opts.ttlMs / 1000)), { autoKeepAlive: false });
    lease.on('lost', () => undefined); // our own renewal tells the loss (source.ts)
    let stop = (): void => undefined;
    try {
      this.renewedAt = Date.now();
      const id = await lease.grant();
      // the lease lives from now on: kept alive while the lock is waited for and taken
      stop = this.keepAlive(() => lease.keepaliveOnce());
      const key = `${this.name}/${BigInt(id).toString(16)}`;
      const put = await this.etcd.if(key, 'Create', '==', 0)
        .then(this.etcd.put(key).value('').lease(id))
        .else(this.etcd.get(key))
        .commit();
      const mine = put.succeeded
        ? put.header.revision
        : put.responses[0].response_range!.kvs[0].create_revision;
      this.lease = lease;
      this.key = key;
      this.createRevision = String(mine);
      for (;;) {
        const all = await this.etcd.getAll().prefix(`${this.name}/`).sort('Create', 'Ascend').exec();
        const kvs = all.kvs;
        if (kvs.length > 0 && kvs[0].key.toString() === key) break;
        if (!kvs.some((kv) => kv.key.toString() === key)) throw new Error(`${this.describe()}: our key ${key} is gone (the lease expired)`);
        const left = until - Date.now();
        if (left <= 0) {
          await this.releaseGrant();
          return null;
        }
        // the key just before ours: wait for it to go
        const before = kvs.filter((kv) => BigInt(kv.create_revision) < BigInt(mine)).pop();
        const chunk = Math.min(left, Math.max(100, Math.floor(this.opts.ttlMs / 3)));
        if (before) await this.waitDeleted(before.key.toString(), all.header.revision, chunk, signal);
      }
      this.generation = await readGeneration(this.db, this.opts, 'etcd');
      const token = await this.next();
      if (!token) throw new Error(`${this.describe()}: lost right after it was taken`);
      return token;
    } catch (e) {
      await this.releaseGrant().catch(() => undefined);
      await lease.revoke().catch(() => undefined);
      throw e;
    } finally {
      stop();
    }
  }

  private async waitDeleted(key: string, revision: string, ms: number, signal?: AbortSignal): Promise<void> {
    const watcher = await this.etcd.watch().key(key).startRevision(String(BigInt(revision) + 1n)).create();
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      await Promise.race([
        new Promise<void>((resolve) => watcher.on('delete', () => resolve())),
        sleep(ms, stop.signal).catch(() => undefined),
      ]);
      signal?.throwIfAborted();
    } finally {
      stop.abort();
      signal?.removeEventListener('abort', onAbort);
      await watcher.cancel().catch(() => undefined);
    }
  }

  protected async next(): Promise<Token | null> {
    const res = await this.etcd.if(this.key!, 'Create', '==', this.createRevision)
      .then(this.etcd.put(this.key!).value('').ignoreLease())
      .commit();
    return res.succeeded ? new Token(this.generation, BigInt(res.header.revision)) : null;
  }

  protected async renew(): Promise<boolean> {
    try {
      await this.lease!.keepaliveOnce();
      return true;
    } catch (e) {
      if (e instanceof EtcdLeaseInvalidError) return false;
      throw e;
    }
  }

  protected async releaseGrant(): Promise<void> {
    const lease = this.lease;
    this.forget();
    if (lease) await lease.revoke();
  }

  protected forget(): void {
    this.lease = null;
    this.key = null;
  }
}
