// The cost of the library: one fenced single-row UPDATE through runFenced
// against the same transaction written by hand with pg (BEGIN; SELECT
// fencing.set_token($1); UPDATE; COMMIT: four round trips, as a user
// writes it; runFenced sends BEGIN, its pool check and set_token in one and
// so makes three), interleaved pair by pair on one pooled connection,
// alternating which goes first.  Prints the median and p95 latency of each
// and the ratio of the medians.
//
//   node build/bench/bench.js          (PGHOST, PGPORT, PGUSER, PGDATABASE)
//   FENCING_TS_BENCH_N=pairs (default 5000)

import { Pool, PoolClient } from 'pg';
import { runFenced } from '@fencing/client';

const N = Number(process.env.FENCING_TS_BENCH_N ?? 5000);
const WARMUP = Math.min(200, N);

async function byHand(pool: Pool, token: string): Promise<void> {
  const c: PoolClient = await pool.connect();
  try {
    await c.query('BEGIN');
    await c.query('SELECT fencing.set_token($1)', [token]);
    await c.query('UPDATE bench_fenced SET n = n + 1 WHERE id = 1');
    await c.query('COMMIT');
  } catch (e) {
    await c.query('ROLLBACK');
    throw e;
  } finally {
    c.release();
  }
}

function library(pool: Pool, token: string): Promise<unknown> {
  return runFenced(pool, token, (c) => c.query('UPDATE bench_fenced SET n = n + 1 WHERE id = 1'));
}

function stats(xs: number[]): { median: number; p95: number } {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)] };
}

async function main(): Promise<void> {
  const pool = new Pool({ max: 1 });
  await pool.query('DROP TABLE IF EXISTS bench_fenced');
  await pool.query('CREATE TABLE bench_fenced (id int PRIMARY KEY, n int NOT NULL DEFAULT 0, fence fencing.fence)');
  await pool.query('INSERT INTO bench_fenced (id) VALUES (1)');
  await pool.query("SELECT fencing.protect('bench_fenced')");
  const lib: number[] = [];
  const hand: number[] = [];
  let counter = 0;
  const time = async (f: () => Promise<unknown>): Promise<number> => {
    const t0 = process.hrtime.bigint();
    await f();
    return Number(process.hrtime.bigint() - t0) / 1000;
  };
  for (let i = 0; i < WARMUP + N; i++) {
    // each write a newer token (the table is strict)
    const a = `0:${++counter}`;
    const b = `0:${++counter}`;
    let tl: number;
    let th: number;
    if (i % 2 === 0) {
      tl = await time(() => library(pool, a));
      th = await time(() => byHand(pool, b));
    } else {
      th = await time(() => byHand(pool, a));
      tl = await time(() => library(pool, b));
    }
    if (i >= WARMUP) { lib.push(tl); hand.push(th); }
  }
  const l = stats(lib);
  const h = stats(hand);
  console.log(`bench: ${N} pairs, one connection, fenced single-row UPDATE in a transaction (runFenced 3 round trips, by hand 4)`);
  console.log(`  runFenced: median ${l.median.toFixed(0)} µs, p95 ${l.p95.toFixed(0)} µs`);
  console.log(`  by hand:   median ${h.median.toFixed(0)} µs, p95 ${h.p95.toFixed(0)} µs`);
  console.log(`  ratio of medians runFenced / by hand: ${(l.median / h.median).toFixed(3)}`);
  await pool.query('DROP TABLE bench_fenced');
  await pool.end();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
