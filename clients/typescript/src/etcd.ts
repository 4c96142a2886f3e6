// Tokens from etcd (the etcd3 client): a lock key under a lease, as
// etcd3's own Lock takes it, and the key's create revision.
//
// The number: the lock key's CREATE REVISION, which is the revision of the
// transaction that created it (read from that transaction's response
// header, so no second read can see another holder's key).  One kind of
// revision per fence: do not mix it with `etcdctl lock`'s ETCD_LOCK_REV
// (the header revision of a queued grant) on one fence.
//
// The token: generation:revision, the generation read from the database
// right after the lock is taken (docs/lock-services.md).

import type { Etcd3, Lease } from 'etcd3';
import { randomUUID } from 'node:crypto';
import { LockNotAcquiredError } from './errors';
import { GenerationOptions, readGeneration } from './generation';
import { Token, TokenSource } from './token';

export interface EtcdTokenSourceOptions extends GenerationOptions {
  /** the lock key */
  key: string;
  /** the lease's TTL in seconds (default 10; etcd grants at least about 2 s) */
  ttlSeconds?: number;
  /** how long acquire() waits for the key to be freed (default 30 s) */
  acquireTimeoutMs?: number;
  /** the pause between two attempts of acquire() (default 50 ms) */
  retryDelayMs?: number;
  /** called when the lease is lost (keep-alives failed until it ran out) */
  onLost?: (err: Error) => void;
}

export class EtcdTokenSource implements TokenSource {
  private lease: Lease | null = null;
  private current: Token | null = null;
  private readonly value = randomUUID();

  constructor(private readonly etcd: Etcd3, private readonly opts: EtcdTokenSourceOptions) {}

  /** The token of the grant held, or null. */
  get token(): Token | null {
    return this.current;
  }

  /** One attempt: the grant's token, or null while another client holds the key. */
  async tryAcquire(): Promise<Token | null> {
    if (this.current) throw new Error(`etcd lock ${this.opts.key} is already held by this source`);
    const lease = this.etcd.lease(this.opts.ttlSeconds ?? 10);
    lease.on('lost', (err) => {
      if (this.lease === lease) {
        this.lease = null;
        this.current = null;
        this.opts.onLost?.(err);
      }
    });
    try {
      const id = await lease.grant();
      const res = await this.etcd
        .if(this.opts.key, 'Create', '==', 0)
        .then(this.etcd.put(this.opts.key).value(this.value).lease(id))
        .commit();
      if (!res.succeeded) {
        await lease.revoke().catch(() => undefined);
        return null;
      }
      // the put's revision: the key's create revision
      const revision = BigInt(res.header.revision);
      this.lease = lease;
      const generation = await readGeneration(this.opts, 'etcd');
      this.current = new Token(generation, revision);
      return this.current;
    } catch (e) {
      this.lease = null;
      await lease.revoke().catch(() => undefined);
      throw e;
    }
  }

  async acquire(): Promise<Token> {
    const deadline = Date.now() + (this.opts.acquireTimeoutMs ?? 30000);
    for (;;) {
      const t = await this.tryAcquire();
      if (t) return t;
      if (Date.now() >= deadline) throw new LockNotAcquiredError(`etcd lock ${this.opts.key} is held by another client`);
      await new Promise((r) => setTimeout(r, this.opts.retryDelayMs ?? 50));
    }
  }

  /** Revokes the lease: the key goes with it. */
  async release(): Promise<void> {
    const lease = this.lease;
    this.lease = null;
    this.current = null;
    if (lease) await lease.revoke().catch(() => undefined);
  }
}
