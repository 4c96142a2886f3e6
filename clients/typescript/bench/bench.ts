// The cost of the library: a fenced single-row UPDATE through runFenced
// against the same transaction written by hand with pg, the same driver,
// interleaved pair by pair on one pooled connection, alternating which
// goes first.  Two pairs of rows:
//
//   token  runFenced(pool, token, fn) against BEGIN; SELECT
//          fencing.set_token($1); UPDATE; COMMIT (four round trips, as a user
//          writes it; runFenced sends BEGIN, its pool check and set_token in
//          one and so makes three)
//   lease  runFenced(pool, leaseSource, fn), a new token of a held lease per
//          transaction taken before BEGIN, against SELECT
//          fencing.lease_next($1, $2, $3); BEGIN; SELECT fencing.set_token($1);
//          UPDATE; COMMIT by hand on a lease of its own (five round trips
//          against four)
//
// Prints the latencies of each (p25, median, p95), the ratios of their
// medians and of their p25s (a loaded machine's preemptions land in the
// upper half), the median of the pairs' own ratios, and the machine's load
// average before and after.
//
//   node build/bench/bench.js          (PGHOST, PGPORT, PGUSER, PGDATABASE)
//   FENCING_TS_BENCH_N=pairs of each (default 5000)

import { loadavg } from 'node:os';
import { Pool, PoolClient } from 'pg';
import { LeaseSource, runFenced } from '@fencing/client';

const N = Number(process.env.FENCING_TS_BENCH_N ?? 5000);
const WARMUP = Math.min(200, N);
const TABLE = `bench_fenced_${process.pid}`;

/** By hand: [SELECT lease_next(...);] BEGIN; SELECT fencing.set_token($1); UPDATE; COMMIT. */
async function byHand(pool: Pool, token: string | { lease: string; current: string }, id: number): Promise<string> {
  const c: PoolClient = await pool.connect();
  try {
    let t = token;
    if (typeof t !== 'string') {
      t = (await c.query("SELECT fencing.lease_next($1, $2, '60 s')::text AS t", [t.lease, t.current])).rows[0].t as string;
    }
    await c.query('BEGIN');
    await c.query('SELECT fencing.set_token($1)', [t]);
    await c.query(`UPDATE ${TABLE} SET n = n + 1 WHERE id = $1`, [id]);
    await c.query('COMMIT');
    return t;
  } catch (e) {
    await c.query('ROLLBACK');
    throw e;
  } finally {
    c.release();
  }
}

function stats(xs: number[]): { p25: number; median: number; p95: number } {
  const s = [...xs].sort((a, b) => a - b);
  return { p25: s[Math.floor(s.length / 4)], median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)] };
}

async function time(f: () => Promise<unknown>): Promise<number> {
  const t0 = process.hrtime.bigint();
  await f();
  return Number(process.hrtime.bigint() - t0) / 1000;
}

/** n pairs of lib() and hand(), interleaved, the first of each pair alternating. */
async function pairs(lib: () => Promise<unknown>, hand: () => Promise<unknown>): Promise<{ lib: number[]; hand: number[] }> {
  const l: number[] = [];
  const h: number[] = [];
  for (let i = 0; i < WARMUP + N; i++) {
    let tl: number;
    let th: number;
    if (i % 2 === 0) {
      tl = await time(lib);
      th = await time(hand);
    } else {
      th = await time(hand);
      tl = await time(lib);
    }
    if (i >= WARMUP) { l.push(tl); h.push(th); }
  }
  return { lib: l, hand: h };
}

function report(what: string, r: { lib: number[]; hand: number[] }): void {
  const l = stats(r.lib);
  const h = stats(r.hand);
  const paired = stats(r.lib.map((x, i) => x / r.hand[i]));
  console.log(`  ${what}`);
  console.log(`    runFenced: p25 ${l.p25.toFixed(0)} µs, median ${l.median.toFixed(0)} µs, p95 ${l.p95.toFixed(0)} µs`);
  console.log(`    by hand:   p25 ${h.p25.toFixed(0)} µs, median ${h.median.toFixed(0)} µs, p95 ${h.p95.toFixed(0)} µs`);
  console.log(`    runFenced / by hand: ratio of medians ${(l.median / h.median).toFixed(3)}, of p25s ${(l.p25 / h.p25).toFixed(3)},` +
    ` median of the pairs' ratios ${paired.median.toFixed(3)}`);
}

async function main(): Promise<void> {
  const pool = new Pool({ max: 1 });
  const load0 = loadavg();
  await pool.query(`CREATE TABLE ${TABLE} (id int PRIMARY KEY, n int NOT NULL DEFAULT 0, fence fencing.fence)`);
  await pool.query(`INSERT INTO ${TABLE} (id) VALUES (1), (2), (3), (4)`);
  await pool.query('SELECT fencing.protect($1)', [TABLE]);
  console.log(`bench: ${N} pairs of each, one connection, a fenced single-row UPDATE in a transaction` +
    ` (runFenced one round trip fewer than by hand); load average ${load0.map((x) => x.toFixed(2)).join(' ')}`);

  // a bare token: each write a newer one (the table is strict)
  let counter = 0;
  report('a token (runFenced(pool, token, fn) / BEGIN; set_token($1); UPDATE; COMMIT)', await pairs(
    () => runFenced(pool, `0:${++counter}`, (c) => c.query(`UPDATE ${TABLE} SET n = n + 1 WHERE id = 1`)),
    () => byHand(pool, `0:${++counter}`, 2)));

  // a lease held for the whole run, a new token per transaction
  const lease = new LeaseSource(pool, { name: `${TABLE}_lib`, ttlMs: 60000 });
  await lease.acquire();
  const handName = `${TABLE}_hand`;
  let handToken: string = (await pool.query(
    "SELECT fencing.lease_acquire($1, 'bench', '60 s')::text AS t", [handName])).rows[0].t;
  report('a lease (runFenced(pool, leaseSource, fn) / lease_next; BEGIN; set_token($1); UPDATE; COMMIT)', await pairs(
    () => runFenced(pool, lease, (c) => c.query(`UPDATE ${TABLE} SET n = n + 1 WHERE id = 3`)),
    async () => {
      handToken = await byHand(pool, { lease: handName, current: handToken }, 4);
    }));
  await lease.release();
  await pool.query('SELECT fencing.lease_release($1, $2)', [handName, handToken]);

  console.log(`  load average after: ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  await pool.query(`DROP TABLE ${TABLE}`);
  await pool.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
