// Fenced transactions against a real server: tokens, typed errors, the
// pipeline, retries, signals, the pool check, several locks in one
// transaction.

import test, { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Client, DatabaseError } from 'pg';
import {
  FencedOutError, FencingError, LeaseSource, runFenced, runFencedMany, runLocked, StaleTokenError, StaticToken,
  Token, TokenAlreadyUsedError, TokenRequiredError, TokenSource, TransactionAbortedError, GuardAlteredError,
} from '@fencing/client';
import { collectWarnings, ddlGuarded, newPool, protectedTable, unique } from './helpers';

const pool = newPool({ max: 1 });
let t: string;
before(async () => { t = await protectedTable(pool, 'ts_fenced'); });
after(() => pool.end());

async function tokenOnNextCheckout(): Promise<string | null> {
  return (await pool.query("SELECT current_setting('fencing.token', true) AS t")).rows[0].t;
}

test('a newer token commits and the row keeps it; the callback gets the token', async () => {
  const r = await runFenced(pool, '0:10', async (c, { token }) =>
    ({ n: (await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r' RETURNING n`)).rows[0].n, token }));
  assert.equal(r.n, 1);
  assert.equal(r.token.toString(), '0:10');
  assert.equal((await pool.query(`SELECT fence::text FROM ${t} WHERE id = 'r'`)).rows[0].fence, '0:10');
});

test('an older token: StaleTokenError, a FencedOutError, a FencingError and pg\'s DatabaseError; rolled back, never retried', async () => {
  let calls = 0;
  await assert.rejects(
    runFenced(pool, '0:9', async (c) => { calls++; await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`); }, { attempts: 5 }),
    (e: unknown) => e instanceof StaleTokenError && e instanceof FencedOutError && e instanceof FencingError &&
      e instanceof DatabaseError && e.reason === 'stale_token' && e.code === 'SF001' && e.table === t &&
      e.cause instanceof DatabaseError,
  );
  assert.equal(calls, 1);
  assert.equal((await pool.query(`SELECT n FROM ${t} WHERE id = 'r'`)).rows[0].n, 1);
});

test('a StaticToken is the same token every time: a second transaction on a strict table is TokenAlreadyUsedError', async () => {
  const s = new StaticToken('0:20');
  await runFenced(pool, s, (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
  await assert.rejects(runFenced(pool, s, (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)),
    (e: unknown) => e instanceof TokenAlreadyUsedError && e.reason === 'token_already_used');
});

test('two differing tokens in one write: TokenRequiredError (SF002); DDL that breaks the guard: GuardAlteredError (SF005)', async (tc) => {
  await assert.rejects(runFenced(pool, '0:30', (c) => c.query(`UPDATE ${t} SET fence = '0:31'::text::fencing.fence WHERE id = 'r'`)),
    (e: unknown) => e instanceof TokenRequiredError && e.code === 'SF002');
  const g = await protectedTable(pool, 'ts_ddl');
  if (!(await ddlGuarded(pool, g))) {
    tc.diagnostic('SF005 not checked: no DDL guard here (the edition for managed PostgreSQL without event triggers: managed/README.md, the DDL guard (SF005))');
    return;
  }
  await assert.rejects(runFenced(pool, '0:1', (c) => c.query(`ALTER TABLE ${g} DROP COLUMN fence`)),
    (e: unknown) => e instanceof GuardAlteredError && e.code === 'SF005' && e instanceof FencingError);
});

test('no token and no open transaction reach the next checkout: after a commit, a refusal, a thrown callback, a swallowed error', async () => {
  await runFenced(pool, '0:40', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
  assert.ok(!(await tokenOnNextCheckout()));
  await assert.rejects(runFenced(pool, '0:1', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)), StaleTokenError);
  assert.ok(!(await tokenOnNextCheckout()));
  await assert.rejects(runFenced(pool, '0:41', async () => { throw new Error('boom'); }), /boom/);
  assert.ok(!(await tokenOnNextCheckout()));
  await assert.rejects(runFenced(pool, '0:41', async (c) => {
    await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`);
    await c.query('SELECT 1/0').catch(() => undefined);
  }), TransactionAbortedError);
  assert.ok(!(await tokenOnNextCheckout()));
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

test('the pool check: a connection carrying a session-level token is reset inside the transaction, with a warning naming its backend', async () => {
  const c = await pool.connect();
  const pid = (await c.query('SELECT pg_backend_pid() AS p')).rows[0].p;
  await c.query("SET fencing.token = '0:999999'");
  c.release();
  const { warnings } = await collectWarnings(() =>
    runFenced(pool, '0:50', (cl) => cl.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)));
  const w = warnings.filter((x) => (x as { code?: string }).code === 'FENCING_LEFTOVER_TOKEN');
  assert.equal(w.length, 1, warnings.map(String).join(' | '));
  assert.match(w[0].message, new RegExp(`backend ${pid}\\b.*0:999999`));
  assert.equal(w[0].name, 'FencingWarning');
  assert.equal((await pool.query(`SELECT fence::text FROM ${t} WHERE id = 'r'`)).rows[0].fence, '0:50');
  assert.ok(!(await tokenOnNextCheckout()), 'the session-level token is gone');
  // a clean connection: no warning
  const again = await collectWarnings(() => runFenced(pool, '0:51', (cl) => cl.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`)));
  assert.equal(again.warnings.length, 0);
});

test('round trips: one for BEGIN and the pool check with set_token (one statement, the token a bound parameter), then the callback\'s own, then COMMIT', async () => {
  const client = new Client();
  await client.connect();
  const sent: unknown[] = [];
  const query = client.query.bind(client) as (...a: unknown[]) => unknown;
  (client as unknown as { query: unknown }).query = (q: unknown, values?: unknown[]) => {
    sent.push(typeof q === 'string' ? q : (q as { statements?: { text: string; values?: unknown[] }[] }).statements ?? q);
    return query(q, values);
  };
  try {
    await runFenced(client, '0:60', (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
    assert.equal(sent.length, 3);
    const first = sent[0] as { text: string; values?: unknown[] }[];
    assert.deepEqual(first.map((s) => s.text), ['BEGIN',
      "SELECT pg_catalog.current_setting('fencing.token', true) AS leftover, pg_catalog.pg_backend_pid()::text AS pid, " +
      'fencing.set_token($1)::text AS token']);
    assert.deepEqual(first[1].values, ['0:60']);
    assert.match(String(sent[1]), /^UPDATE/);
    assert.equal(sent[2], 'COMMIT');
  } finally {
    await client.end();
  }
});

test('retries: 40001 runs the whole transaction again on a client checked out again, with a new token from the source', async () => {
  const k = unique('ts_retry');
  const t = await protectedTable(pool, 'ts_retry');
  const lease = new LeaseSource(pool, { name: k, ttlMs: 10000 });
  await lease.acquire();
  // any source: a new token through nextToken() for each attempt
  let nexts = 0;
  const counting: TokenSource = {
    tryAcquire: (o) => lease.tryAcquire(o), acquire: (o) => lease.acquire(o), release: () => lease.release(),
    nextToken: () => { nexts++; return lease.nextToken(); },
    get token() { return lease.token; }, get lost() { return lease.lost; }, get held() { return lease.held; },
  };
  await pool.query(`CREATE SEQUENCE ${k}_seq`);
  await pool.query(`CREATE FUNCTION ${k}_fail() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF nextval('${k}_seq') = 1 THEN
        RAISE EXCEPTION 'test serialization failure' USING ERRCODE = '40001';
      END IF;
      RETURN NEW;
    END $$`);
  await pool.query(`CREATE TRIGGER ${k}_t BEFORE UPDATE ON ${t} FOR EACH ROW EXECUTE FUNCTION ${k}_fail()`);
  const checkouts = { n: 0 };
  const connect = pool.connect.bind(pool);
  // pool.query() checks out with a callback; the library with a promise
  (pool as unknown as { connect: unknown }).connect = (...args: unknown[]) => {
    if (args.length === 0) checkouts.n++;
    return (connect as (...a: unknown[]) => unknown)(...args);
  };
  const tokens: Token[] = [];
  try {
    await runFenced(pool, counting, async (c, { token }) => {
      tokens.push(token);
      await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`);
    }, { attempts: 3, baseDelayMs: 1 });
  } finally {
    (pool as unknown as { connect: unknown }).connect = connect;
    await pool.query(`DROP TRIGGER ${k}_t ON ${t}`);
    await lease.release();
  }
  assert.equal(tokens.length, 2);
  assert.ok(tokens[1].compare(tokens[0]) > 0);
  assert.equal(checkouts.n, 2);
  assert.equal(nexts, 2);
  assert.equal((await pool.query(`SELECT fence::text FROM ${t} WHERE id = 'r'`)).rows[0].fence, tokens[1].toString());
});

test('an AbortSignal stops the transaction: rolled back, rejected with its reason', async () => {
  const t = await protectedTable(pool, 'ts_abort');
  const before = (await pool.query(`SELECT n FROM ${t} WHERE id = 'r'`)).rows[0].n;
  const ac = new AbortController();
  await assert.rejects(runFenced(pool, '0:70', async (c, { signal }) => {
    await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`);
    ac.abort(new Error('deadline passed'));
    assert.ok(signal.aborted);
  }, { signal: ac.signal }), /deadline passed/);
  assert.equal((await pool.query(`SELECT n FROM ${t} WHERE id = 'r'`)).rows[0].n, before);
  assert.ok(!(await tokenOnNextCheckout()));
  await assert.rejects(runFenced(pool, '0:71', async () => 1, { signal: AbortSignal.abort(new Error('already')) }), /already/);
});

test('runLocked takes the lease, runs a fenced transaction with its next token, releases', async () => {
  const name = unique('locked');
  const lease = new LeaseSource(pool, { name, ttlMs: 10000 });
  const t = await protectedTable(pool, 'ts_locked');
  const tok = await runLocked(pool, lease, async (c, { token }) => {
    await c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`);
    return token;
  }, { timeoutMs: 5000 });
  assert.ok(!lease.held);
  assert.equal((await pool.query(`SELECT fence::text FROM ${t} WHERE id = 'r'`)).rows[0].fence, tok.toString());
  assert.equal((await pool.query('SELECT fencing.lease_check($1, $2) AS ok', [name, tok.toString()])).rows[0].ok, false);
});

test('several locks in one transaction: a token per key in each row\'s fence column, judged per key; no session token', async () => {
  const acc = unique('ts_accounts');
  await pool.query(`CREATE TABLE ${acc} (acct text PRIMARY KEY, balance int NOT NULL, fence fencing.fence)`);
  await pool.query(`SELECT fencing.protect('${acc}', key_columns => '{acct}')`);
  const a = new LeaseSource(pool, { name: unique('acct-a'), ttlMs: 10000 });
  const b = new LeaseSource(pool, { name: unique('acct-b'), ttlMs: 10000 });
  await a.acquire();
  await b.acquire();
  const upsert = `INSERT INTO ${acc} (acct, balance, fence) VALUES ($1, $2, $3::text::fencing.fence)
                  ON CONFLICT (acct) DO UPDATE SET balance = ${acc}.balance + excluded.balance, fence = excluded.fence`;
  const transfer = (sources: { a: TokenSource | string; b: TokenSource | string }, amount: number) =>
    runFencedMany(pool, sources, async (c, tokens) => {
      assert.ok(!(await c.query("SELECT current_setting('fencing.token', true) AS t")).rows[0].t);
      await c.query(upsert, ['a', -amount, tokens.a.toString()]);
      await c.query(upsert, ['b', amount, tokens.b.toString()]);
      return tokens;
    });
  const t1 = await transfer({ a, b }, 10);
  const balances = async () => Object.fromEntries((await pool.query(`SELECT acct, balance FROM ${acc}`)).rows.map((r) => [r.acct, r.balance]));
  assert.deepEqual(await balances(), { a: -10, b: 10 });
  // a stale token on either key aborts the whole transfer
  const older = (x: Token) => new Token(x.epoch, x.counter - 1n);
  await assert.rejects(transfer({ a: older(t1.a).toString(), b }, 5), StaleTokenError);
  await assert.rejects(transfer({ a, b: older(t1.b).toString() }, 5), StaleTokenError);
  assert.deepEqual(await balances(), { a: -10, b: 10 });
  // the newer token wins on each key: both fresh, accepted; each row keeps its own
  const t2 = await transfer({ a, b }, 1);
  const { rows } = await pool.query(`SELECT acct, fence::text AS f FROM ${acc} ORDER BY acct`);
  assert.deepEqual(rows.map((r) => r.f), [t2.a.toString(), t2.b.toString()]);
  assert.deepEqual(await balances(), { a: -11, b: 11 });
  await a.release();
  await b.release();
});
