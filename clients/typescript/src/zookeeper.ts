// ZooKeeper's lock recipe (node-zookeeper-client) as a token source, with
// the node names every client of the lock uses (Curator's
// InterProcessMutex, Go's zk.Lock, the docs' recipe): an ephemeral
// sequential node PATH/_c_<uuid>-lock-NNNNNNNNNN, the lowest sequence
// holding the lock, each other waiting for the node just before its own.
// Nodes are ordered by the ten digits after "lock-", whatever comes before
// (kazoo's Lock given the same names, Curator's nodes, ours).
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
//
// node-zookeeper-client never fails a request on its own: one sent while
// the client is disconnected waits for a reconnection that, after the
// session expired, never comes.  Every request of this source therefore
// has a deadline (the session timeout) and fails at once when the session
// expires; and one watcher function per client, shared by all its sources,
// is all this module ever registers (the client keeps a watcher until it
// fires and has no way to remove one).

import { randomUUID } from 'node:crypto';
import { Client, CreateMode, Event, Exception, Stat, State } from 'node-zookeeper-client';
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

/** The name of a contender's node: anything, "lock-", its ten-digit sequence. */
const LOCK_NODE = /lock-(\d{10})$/;

/** The fence of a zxid: ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff). */
export function fenceFromZxid(zxid: bigint, generation: bigint): Token {
  return new Token((generation << 32n) | (zxid >> 32n), zxid & 0xffffffffn);
}

/** The contenders among a lock path's children, lowest sequence first. */
export function lockOrder(children: readonly string[]): string[] {
  return children
    .filter((c) => LOCK_NODE.test(c))
    .map((c) => [LOCK_NODE.exec(c)![1], c] as const)
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([, c]) => c);
}

function code(e: unknown): number | undefined {
  return (e as Exception)?.getCode?.();
}

/** An error of a request that got no answer in time. */
class NoAnswerError extends Error {
  constructor(what: string, ms: number) {
    super(`ZooKeeper did not answer ${what} within ${ms} ms (the client is disconnected)`);
    this.name = 'NoAnswerError';
  }
}

/**
 * What this module keeps per client: whether its session expired, the
 * requests waiting for an answer (failed when it expires), and the one
 * watcher function it registers, which wakes whoever waits on a path.
 */
class ClientState {
  expired = false;
  private readonly pending = new Set<(e: Error) => void>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly held = new Map<object, () => void>();

  /** The watcher of every exists() this module sends on this client. */
  readonly watcher = (event: Event): void => {
    const w = this.waiters.get(event.getPath());
    if (w) for (const wake of [...w]) wake();
  };

  constructor(readonly zk: Client) {
    zk.on('expired', () => {
      this.expired = true;
      const err = new Error('the ZooKeeper session expired');
      for (const fail of [...this.pending]) fail(err);
      for (const lost of [...this.held.values()]) lost();
      for (const w of [...this.waiters.values()]) for (const wake of [...w]) wake();
    });
  }

  /** A request of fn, failed after ms without an answer or when the session expires. */
  call<T>(what: string, ms: number, fn: (done: (err: Error | Exception | null, v?: T) => void) => void): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (this.expired || this.zk.getState() === State.EXPIRED) {
        reject(Object.assign(new Error('the ZooKeeper session expired'), { sessionExpired: true }));
        return;
      }
      let settled = false;
      const finish = (): void => {
        settled = true;
        clearTimeout(timer);
        this.pending.delete(fail);
      };
      const fail = (e: Error): void => {
        if (settled) return;
        finish();
        reject(Object.assign(e, { sessionExpired: true }));
      };
      const timer = setTimeout(() => {
        if (settled) return;
        finish();
        reject(new NoAnswerError(what, ms));
      }, ms);
      this.pending.add(fail);
      fn((err, v) => {
        if (settled) return;
        finish();
        if (err) reject(err); else resolve(v as T);
      });
    });
  }

  /** Calls wake() on any event of path, until the returned function is called. */
  onPath(path: string, wake: () => void): () => void {
    let set = this.waiters.get(path);
    if (!set) this.waiters.set(path, (set = new Set()));
    set.add(wake);
    return () => {
      set!.delete(wake);
      if (set!.size === 0 && this.waiters.get(path) === set) this.waiters.delete(path);
    };
  }

  /** Calls lost() when the session expires, until drop(owner). */
  hold(owner: object, lost: () => void): void {
    this.held.set(owner, lost);
  }

  drop(owner: object): void {
    this.held.delete(owner);
  }
}

const states = new WeakMap<Client, ClientState>();

function stateOf(zk: Client): ClientState {
  let s = states.get(zk);
  if (!s) states.set(zk, (s = new ClientState(zk)));
  return s;
}

function expiredError(e: unknown): boolean {
  return code(e) === Exception.SESSION_EXPIRED || (e as { sessionExpired?: boolean })?.sessionExpired === true;
}

/**
 * A ZooKeeper lock.  After its session expired a node-zookeeper-client is
 * closed for good: make a new client (and new sources on it) to take locks
 * again.
 */
export class ZooKeeperSource extends LockSource {
  readonly path: string;
  private node: string | null = null;
  private generation = 0n;
  private readonly state: ClientState;
  /** the names of nodes a failed create may have left (removed at the next grant) */
  private readonly orphans = new Set<string>();

  constructor(private readonly zk: Client, db: Pool, private readonly opts: ZooKeeperSourceOptions) {
    super(db, { ...opts, ttlMs: opts.ttlMs ?? zk.getSessionTimeout() ?? 10000 });
    this.path = opts.path.replace(/\/+$/, '');
    this.state = stateOf(zk);
  }

  /** The lock node held (its full path), or null. */
  get nodePath(): string | null {
    return this.node;
  }

  protected describe(): string {
    return `ZooKeeper lock ${this.path}`;
  }

  /** How long a request may wait for its answer: the session's timeout. */
  private deadline(): number {
    return Math.max(1000, this.zk.getSessionTimeout() || this.base.ttlMs);
  }

  private call<T>(what: string, fn: (done: (err: Error | Exception | null, v?: T) => void) => void): Promise<T> {
    return this.state.call(what, this.deadline(), fn);
  }

  protected async grant(until: number, signal?: AbortSignal): Promise<Token | null> {
    await this.call<string>('mkdirp', (d) => this.zk.mkdirp(this.path, d));
    // Curator's protected name: a create whose answer was lost is found again by it
    const prefix = `_c_${randomUUID()}-lock-`;
    let node: string;
    try {
      node = await this.call<string>('create', (d) =>
        this.zk.create(`${this.path}/${prefix}`, Buffer.alloc(0), CreateMode.EPHEMERAL_SEQUENTIAL, d));
    } catch (e) {
      // the answer was lost: the node may exist all the same
      const all = expiredError(e) ? null
        : await this.call<string[]>('getChildren', (d) => this.zk.getChildren(this.path, d)).catch(() => null);
      const mine = all?.find((c) => c.startsWith(prefix));
      if (!mine) {
        if (!all) this.orphans.add(prefix);
        throw e;
      }
      node = `${this.path}/${mine}`;
    }
    const name = node.slice(this.path.length + 1);
    try {
      for (;;) {
        const children = lockOrder(await this.children());
        const i = children.indexOf(name);
        if (i < 0) throw new Error(`${this.describe()}: our node ${node} is gone (the session expired)`);
        if (i === 0) break;
        const left = until - Date.now();
        if (left <= 0) {
          await this.remove(node);
          return null;
        }
        // the watch wakes us; the bound only re-checks the queue now and then
        await this.waitDeleted(`${this.path}/${children[i - 1]}`, Math.min(left, this.base.ttlMs), signal);
      }
      this.node = node;
      this.state.hold(this, () => this.markLost(`${this.describe()}: the session expired`));
      this.generation = await readGeneration(this.db, this.opts, 'zookeeper');
      // the session is the lock's TTL: alive as of this request's answer
      this.renewedAt = Date.now();
      const token = await this.next();
      if (!token) throw new Error(`${this.describe()}: lost right after it was taken`);
      return token;
    } catch (e) {
      this.forget();
      await this.remove(node).catch(() => this.orphans.add(name));
      throw e;
    }
  }

  /** The children of the lock's path; nodes a failed create of this source left are removed. */
  private async children(): Promise<string[]> {
    const all = await this.call<string[]>('getChildren', (d) => this.zk.getChildren(this.path, d));
    if (this.orphans.size === 0) return all;
    const kept: string[] = [];
    for (const c of all) {
      const orphan = [...this.orphans].find((p) => c.startsWith(p));
      if (orphan === undefined) { kept.push(c); continue; }
      await this.remove(`${this.path}/${c}`);
      this.orphans.delete(orphan);
    }
    return kept;
  }

  private async remove(node: string): Promise<void> {
    try {
      await this.call('remove', (d) => this.zk.remove(node, -1, d));
    } catch (e) {
      if (code(e) !== Exception.NO_NODE) throw e;
    }
  }

  /** Waits for node to be deleted (or any other event on it), at most ms. */
  private async waitDeleted(node: string, ms: number, signal?: AbortSignal): Promise<void> {
    const stop = new AbortController();
    const onAbort = (): void => stop.abort(signal!.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    const unwatch = this.state.onPath(node, () => stop.abort());
    try {
      const stat = await this.call<Stat | null>('exists', (d) => this.zk.exists(node, this.state.watcher, d));
      if (stat && !this.state.expired) await sleep(ms, stop.signal).catch(() => undefined);
      signal?.throwIfAborted();
    } finally {
      unwatch();
      stop.abort();
      signal?.removeEventListener('abort', onAbort);
    }
  }

  protected async next(): Promise<Token | null> {
    const node = this.node;
    if (!node) return null;
    try {
      const stat = await this.call<Stat>('setData', (d) => this.zk.setData(node, Buffer.alloc(0), -1, d));
      return fenceFromZxid(stat.mzxid.readBigUInt64BE(0), this.generation);
    } catch (e) {
      if (code(e) === Exception.NO_NODE || expiredError(e)) return null;
      throw e;
    }
  }

  protected async renew(): Promise<boolean> {
    const node = this.node;
    if (!node) return false;
    try {
      return !!(await this.call<Stat | null>('exists', (d) => this.zk.exists(node, d)));
    } catch (e) {
      if (expiredError(e)) return false;
      throw e;
    }
  }

  protected async releaseGrant(): Promise<void> {
    const node = this.node;
    this.forget();
    if (node) {
      await this.remove(node).catch((e) => {
        if (!expiredError(e)) {
          this.orphans.add(node.slice(this.path.length + 1));
          throw e;
        }
      });
    }
  }

  protected forget(): void {
    this.node = null;
    this.state.drop(this);
  }
}
