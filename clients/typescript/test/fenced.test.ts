// runFenced against a real server: tokens, typed errors, retries, round
// trips, and connections that go back to the pool without a token.

import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from 'pg';
import {
  runFenced, StaleTokenError, TokenAlreadyUsedError, TokenRequiredError, FencedOutError, TransactionAbortedError,
} from '@fencing/client';
import { newPool, NO_REASONS, protectedTable, serverGivesReasons, unique } from './helpers';

const pool = newPool({ max: 1 });
let t: string;
before(async () => { t = await protectedTable(pool, 'ts_fenced'); });
after(() => pool.end());

async function tokenOnNextCheckout(): Promise<string | null> {
  const { rows } = await pool.query("SELECT current_setting('fencing.token', true) AS t");
  return rows[0].t;
}

test('a newer token commits; the row keeps it', async () => {
  const n = await runFenced(pool, '0:10', async (c) => (await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r' RETURNING n`)).rows[0].n);
  assert.equal(n, 1);
  const { rows } = await pool.query(`SELECT fence::text FROM ${t} WHERE id = 'r'`);
  assert.equal(rows[0].fence, '0:10');
});

test('an older token: StaleTokenError (a FencedOutError, reason stale_token), rolled back, not retried', async () => {
  let calls = 0;
  await assert.rejects(
    runFenced(pool, '0:9', async (c) => { calls++; await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`); }, { retry: 5 }),
    (e: unknown) => e instanceof StaleTokenError && e instanceof FencedOutError && e.reason === 'stale_token' && e.code === 'SF001',
  );
  assert.equal(calls, 1);
  assert.equal((await pool.query(`SELECT n FROM ${t} WHERE id = 'r'`)).rows[0].n, 1);
});

test('the same token in a second transaction: TokenAlreadyUsedError (reason token_already_used)', async (tc) => {
  if (!(await serverGivesReasons(pool))) return tc.skip(NO_REASONS);
  await runFenced(pool, '0:20', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
  await assert.rejects(
    runFenced(pool, '0:20', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)),
    (e: unknown) => e instanceof TokenAlreadyUsedError && e.reason === 'token_already_used',
  );
});

test('two differing tokens in one write: TokenRequiredError (SF002)', async () => {
  await assert.rejects(
    runFenced(pool, '0:30', (c) => c.query(`UPDATE ${t} SET fence = '0:31' WHERE id = 'r'`)),
    (e: unknown) => e instanceof TokenRequiredError && (e as TokenRequiredError).code === 'SF002',
  );
});

test('no token reaches the next checkout: after a commit, a refusal, a thrown callback, a swallowed error', async () => {
  await runFenced(pool, '0:40', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
  assert.equal(await tokenOnNextCheckout(), '');
  await assert.rejects(runFenced(pool, '0:1', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)), StaleTokenError);
  assert.equal(await tokenOnNextCheckout(), '');
  await assert.rejects(runFenced(pool, '0:41', async () => { throw new Error('boom'); }), /boom/);
  assert.equal(await tokenOnNextCheckout(), '');
  await assert.rejects(runFenced(pool, '0:41', async (c) => {
    await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`);
    await c.query('SELECT 1/0').catch(() => undefined);
  }), TransactionAbortedError);
  assert.equal(await tokenOnNextCheckout(), '');
  // the pooled connection, seen from another one: idle, not in a transaction
  const pid = (await pool.query('SELECT pg_backend_pid() AS p')).rows[0].p;
  const inspector = new Client();
  await inspector.connect();
  try {
    const { rows } = await inspector.query('SELECT state FROM pg_stat_activity WHERE pid = $1', [pid]);
    assert.equal(rows[0].state, 'idle');
  } finally {
    await inspector.end();
  }
  assert.equal(pool.totalCount, 1);
});

test('40001 is retried with the same token and commits; SF001 never is', async () => {
  const k = unique('ts_retry');
  // a sequence is not rolled back: the trigger fails the first attempt only
  await pool.query(`CREATE SEQUENCE ${k}_seq`);
  await pool.query(`CREATE FUNCTION ${k}_fail() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('${k}_seq') = 1 THEN
        RAISE EXCEPTION 'test serialization failure' USING ERRCODE = '40001';
      END IF;
      RETURN NEW;
    END $$`);
  await pool.query(`CREATE TRIGGER ${k}_t BEFORE UPDATE ON ${t} FOR EACH ROW EXECUTE FUNCTION ${k}_fail()`);
  let attempts = 0;
  try {
    await runFenced(pool, '0:50', async (c) => {
      attempts++;
      await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`);
    }, { retry: { attempts: 3, baseDelayMs: 1 } });
  } finally {
    await pool.query(`DROP TRIGGER ${k}_t ON ${t}`);
  }
  assert.equal(attempts, 2);
  assert.equal((await pool.query(`SELECT fence::text FROM ${t} WHERE id = 'r'`)).rows[0].fence, '0:50');
});

test('round trips: BEGIN, set_token and COMMIT, plus the callback\'s own, the token a bound parameter', async () => {
  const client = new Client();
  await client.connect();
  const sent: { text: string; values?: unknown[] }[] = [];
  const query = client.query.bind(client) as (...a: unknown[]) => unknown;
  (client as unknown as { query: unknown }).query = (text: unknown, values?: unknown[]) => {
    sent.push(typeof text === 'string' ? { text, values } : (text as { text: string; values?: unknown[] }));
    return query(text, values);
  };
  try {
    await runFenced(client, '0:60', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
    assert.deepEqual(sent.map((q) => q.text.split(' ')[0]), ['BEGIN', 'SELECT', 'UPDATE', 'COMMIT']);
    assert.deepEqual(sent[1], { text: 'SELECT fencing.set_token($1)', values: ['0:60'] });
  } finally {
    await client.end();
  }
});
