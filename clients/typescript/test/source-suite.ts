// What every token source must do, against its real service: the same
// tests for the lease, etcd, ZooKeeper and Redis, in two parts so that the
// test runner runs them side by side: source_KIND.test.ts calls
// sourceSuite(kind, 'locks') (tokens, exclusion, 100 transactions, the lost
// signal), source_KIND_pause.test.ts sourceSuite(kind, 'pauses') (a holder
// frozen with SIGSTOP, the first meter).

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import {
  LockLostError, NotAcquiredError, runFenced, Token, FencedOutError,
} from '@fencing/client';
import { ledgerTable, newPool, protectedTable, Timeline, unique, waitFor, Worker } from './helpers';
import { Kind, makeSource, Made, TTL } from './sources';

export function sourceSuite(kind: Kind, part: 'locks' | 'pauses'): void {
  const pool = newPool({ max: 6 });
  const opened: Made[] = [];
  after(async () => {
    for (const m of opened) { await m.source.release().catch(() => undefined); await m.close(); }
    await pool.end();
  });
  const make = async (name: string, ttlMs: number, extra = {}) => {
    const m = await makeSource(kind, pool, name, ttlMs, extra);
    opened.push(m);
    return m.source;
  };
  const { ttlMs, pauseMs } = TTL[kind];

  if (part === 'locks') test(`${kind}: every token beats the one before: the grant, each nextToken(), the next grant`, async () => {
    const name = unique('tok');
    const src = await make(name, 10000);
    const seen: Token[] = [];
    for (let g = 0; g < 2; g++) {
      seen.push(await src.acquire());
      assert.ok(src.held && !src.lost.aborted);
      for (let i = 0; i < 3; i++) seen.push(await src.nextToken());
      assert.ok(src.token!.equals(seen[seen.length - 1]));
      await src.release();
      assert.ok(!src.held && src.lost.aborted && src.token === null);
    }
    for (let i = 1; i < seen.length; i++) assert.ok(seen[i].compare(seen[i - 1]) > 0, `${seen[i]} > ${seen[i - 1]}`);
  });

  if (part === 'locks') test(`${kind}: tryAcquire gives another holder no token; acquire waits up to timeoutMs, a signal aborts it; release hands over`, async () => {
    const name = unique('ex');
    const a = await make(name, 10000);
    const b = await make(name, 10000);
    const ta = await a.acquire();
    assert.equal(await b.tryAcquire(), null);
    assert.ok(!b.held);
    const t0 = Date.now();
    await assert.rejects(b.acquire({ timeoutMs: 300 }), NotAcquiredError);
    assert.ok(Date.now() - t0 >= 290);
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error('shutting down')), 100);
    await assert.rejects(b.acquire({ signal: ac.signal }), /shutting down/);
    const waiting = b.acquire({ timeoutMs: 20000 });
    await new Promise((r) => setTimeout(r, 200));
    await a.release();
    const tb = await waiting;
    assert.ok(tb.compare(ta) > 0);
    await b.release();
  });

  if (part === 'locks') test(`${kind}: 100 transactions under one lock in strict mode, 0 refusals; after release the source refuses to hand out tokens (LockLostError)`, async () => {
    const t = await protectedTable(pool, `ts_many_${kind}`);
    const src = await make(unique('many'), 10000);
    await src.acquire();
    let refusals = 0;
    let last: Token | null = null;
    for (let i = 0; i < 100; i++) {
      try {
        const tok = await runFenced(pool, src, async (c, { token }) => {
          await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`);
          return token;
        });
        if (last) assert.ok(tok.compare(last) > 0);
        last = tok;
      } catch (e) {
        if (!(e instanceof FencedOutError)) throw e;
        refusals++;
      }
    }
    assert.equal(refusals, 0);
    const { rows } = await pool.query(`SELECT n, fence::text AS f FROM ${t} WHERE id = 'r'`);
    assert.equal(rows[0].n, 100);
    assert.equal(rows[0].f, last!.toString());
    await src.release();
    await assert.rejects(src.nextToken(), LockLostError);
    await assert.rejects(runFenced(pool, src, (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)), LockLostError);
    assert.equal((await pool.query(`SELECT n FROM ${t} WHERE id = 'r'`)).rows[0].n, 100);
  });

  if (part === 'pauses') test(`${kind}: a holder frozen (SIGSTOP) past its TTL loses the lock: when it wakes, its token in flight is refused (StaleTokenError), the source refuses a new one (LockLostError), lost and onLost tell it`, async (tc) => {
    const name = unique('frozen');
    const t = await protectedTable(pool, `ts_frozen_${kind}`);
    const tl = new Timeline();
    const a = new Worker({ kind, name, ttlMs });
    try {
      tl.event('A', `acquire ${kind} lock ${name} (ttl ${ttlMs} ms) -> ${await a.call('acquire')}`);
      tl.event('A', `UPDATE, a new token from the source -> ${await a.call(`update source ${t} r`)}`);
      const p = await a.call('next');
      tl.event('A', `takes its next token for a write: ${p}`);
      assert.match(p, /^token /);
      a.freeze();
      tl.event('test', 'kill -STOP A: frozen, holding the lock as far as it knows');
      const b = await make(name, 10000);
      const tb = await b.acquire({ timeoutMs: 60000 });
      tl.event('B', `acquire -> ${tb} (A's lock ran out)`);
      await runFenced(pool, b, (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
      tl.event('B', 'UPDATE with its next token -> COMMIT');
      a.thaw();
      tl.event('test', 'kill -CONT A');
      const r1 = await a.call(`update prepared ${t} r`);
      tl.event('A', `UPDATE with its token in flight -> ${r1}`);
      assert.match(r1, /^error StaleTokenError stale_token /);
      const r2 = await a.call(`update source ${t} r`);
      tl.event('A', `UPDATE with a new token from its source -> ${r2}`);
      assert.match(r2, /^error LockLostError /);
      const st = await a.call('status');
      tl.event('A', st);
      assert.equal(st, 'held false lost true onlost 1');
      assert.equal((await pool.query(`SELECT n FROM ${t} WHERE id = 'r'`)).rows[0].n, 2);
      await b.release();
    } finally {
      tl.print(tc);
      await a.stop();
    }
  });

  if (part === 'pauses') test(`${kind}: the first meter: a holder frozen after the new holder took the lock, before its first write, is refused once the new holder raised its fences`, async (tc) => {
    const name = unique('meter');
    const ledger = await ledgerTable(pool, `ts_meter_${kind}`);
    const fences = [{ table: ledger, key: 'acct-1' }];
    const tl = new Timeline();
    const a = new Worker({ kind, name, ttlMs });
    try {
      tl.event('A', `acquire, fences ${ledger}/acct-1 -> ${await a.call('acquire ' + JSON.stringify(fences))}`);
      const p = await a.call('next');
      tl.event('A', `takes its next token for a write: ${p}`);
      assert.match(p, /^token /);
      a.freeze();
      tl.event('test', 'kill -STOP A');
      const b = await make(name, 10000);
      const tb = await b.acquire({ timeoutMs: 60000, fences });
      tl.event('B', `acquire, fences ${ledger}/acct-1 -> ${tb}: raise_fence, no row written yet`);
      a.thaw();
      tl.event('test', 'kill -CONT A');
      const r1 = await a.call(`insert prepared ${ledger} acct-1`);
      tl.event('A', `INSERT acct-1 with its token in flight -> ${r1}`);
      assert.match(r1, /^error StaleTokenError stale_token /);
      // the window the first meter closes: a key B did not name takes A's write
      const r2 = await a.call(`insert prepared ${ledger} acct-2`);
      tl.event('A', `INSERT acct-2 (a key B raised no fence for) -> ${r2}`);
      assert.match(r2, /^ok /);
      await runFenced(pool, b, (c) => c.query(`INSERT INTO ${ledger} (acct, amount) VALUES ('acct-1', 1)`));
      tl.event('B', 'INSERT acct-1 with its next token -> COMMIT');
      const { rows } = await pool.query(`SELECT acct, count(*)::int AS n FROM ${ledger} GROUP BY acct ORDER BY acct`);
      assert.deepEqual(rows, [{ acct: 'acct-1', n: 1 }, { acct: 'acct-2', n: 1 }]);
      await b.release();
    } finally {
      tl.print(tc);
      await a.stop();
    }
  });

  if (part === 'locks') test(`${kind}: a lock lost while held aborts lost and calls onLost once; the paused holder is told when it wakes`, async () => {
    const name = unique('lost');
    let calls = 0;
    const a = await make(name, ttlMs, { onLost: () => { calls++; } });
    await a.acquire();
    const b = await make(name, 10000);
    // A stops renewing: its thread blocked past the TTL, as a GC pause would
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, pauseMs);
    await b.acquire({ timeoutMs: 60000 });
    await waitFor('A to notice', () => a.lost.aborted, 30000);
    assert.ok(a.lost.reason instanceof LockLostError);
    assert.equal(calls, 1);
    await assert.rejects(a.nextToken(), LockLostError);
    assert.equal(calls, 1);
    await b.release();
  });
}
