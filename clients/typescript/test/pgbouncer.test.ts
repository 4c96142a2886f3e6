// Through PgBouncer in transaction pooling mode with ONE server connection:
// every client's transactions run on the same backend, one after another,
// so a token that outlived its transaction would be seen by the next one.

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { Pool } from 'pg';
import { classifyError, runFenced, StaleTokenError, TokenRequiredError } from '@fencing/client';
import { collectWarnings, env, newPool, protectedTable } from './helpers';

const direct = newPool();
// several client connections, one server connection behind them
const bounced = new Pool({ host: '127.0.0.1', port: env.pgbouncerPort, max: 3 });
after(async () => { await bounced.end(); await direct.end(); });

async function tokenSeen(): Promise<string | null> {
  return (await bounced.query("SELECT current_setting('fencing.token', true) AS t")).rows[0].t;
}

test('pgbouncer: runFenced commits through transaction pooling; the next transaction has no token', async () => {
  const t = await protectedTable(direct, 'ts_bouncer');
  const pid = async () => (await bounced.query('SELECT pg_backend_pid() AS p')).rows[0].p;
  const backend = await pid();
  await runFenced(bounced, '0:5', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
  assert.equal(await pid(), backend, 'one server connection behind the pooler');
  assert.ok(!(await tokenSeen()));
  await assert.rejects(runFenced(bounced, '0:4', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)), StaleTokenError);
  assert.ok(!(await tokenSeen()));
  // a write without a token right after: SF002, nothing was inherited
  const e = await bounced.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`).then(() => null, classifyError);
  assert.ok(e instanceof TokenRequiredError, String(e));
  // many clients at once, each with its own token, on the one backend
  await Promise.all([6, 7, 8, 9, 10, 11].map((c) =>
    runFenced(bounced, `0:${c}`, (cl) => cl.query(`INSERT INTO ${t} (id) VALUES ($1)`, [`c${c}`]))));
  assert.ok(!(await tokenSeen()));
  const { rows } = await direct.query(`SELECT count(*)::int AS n FROM ${t} WHERE fence IS NOT NULL`);
  assert.equal(rows[0].n, 7);
});

test('pgbouncer: the pool check: a session-level token left on the server connection reaches the next client, and the next fenced transaction resets it (a warning names the backend)', async () => {
  const t = await protectedTable(direct, 'ts_bouncer_leak');
  const a = await bounced.connect();
  try {
    await a.query("SET fencing.token = '0:999'");
  } finally {
    a.release();
  }
  // the test can see a leak: another client, the same server connection
  assert.equal(await tokenSeen(), '0:999');
  const { warnings } = await collectWarnings(() =>
    runFenced(bounced, '0:5', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)));
  const w = warnings.filter((x) => (x as { code?: string }).code === 'FENCING_LEFTOVER_TOKEN');
  assert.equal(w.length, 1, warnings.map(String).join(' | '));
  assert.match(w[0].message, /backend \d+ .*0:999/);
  assert.ok(!(await tokenSeen()), 'the RESET inside the transaction was kept at COMMIT');
  assert.equal((await direct.query(`SELECT fence::text AS f FROM ${t} WHERE id = 'r'`)).rows[0].f, '0:5');
});
