// The extension's own leases as a token source.

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { LeaseTokenSource, LeaseExpiredError, runFenced, Token } from '@fencing/client';
import { frozenHolderScenario, newPool, protectedTable, unique, waitFor } from './helpers';

const pool = newPool();
after(() => pool.end());

test('lease: every grant\'s token beats the one before', async () => {
  const src = new LeaseTokenSource(pool, { name: unique('lease'), ttlMs: 5000 });
  let last: Token | null = null;
  for (let i = 0; i < 3; i++) {
    const t = await src.acquire();
    if (last) assert.ok(t.compare(last) > 0, `${t} > ${last}`);
    last = t;
    await src.release();
  }
  assert.ok(last!.epoch >= 1n << 32n, 'lease epochs start at 2^32');
});

test('lease: a live lease gives another holder no token (tryAcquire null); renew keeps the token', async () => {
  const name = unique('lease');
  const a = new LeaseTokenSource(pool, { name, ttlMs: 10000 });
  const b = new LeaseTokenSource(pool, { name, ttlMs: 10000 });
  const t = await a.acquire();
  assert.equal(await b.tryAcquire(), null);
  assert.equal(await a.renew(), true);
  assert.ok(a.token!.equals(t));
  await a.release();
  assert.ok((await b.tryAcquire())!.compare(t) > 0);
  await b.release();
});

test('lease: a frozen holder past its TTL is fenced off (StaleTokenError) once another holder wrote', async (tc) => {
  const name = unique('lease');
  const table = await protectedTable(pool, 'ts_lease');
  const b = new LeaseTokenSource(pool, { name, ttlMs: 5000, acquireTimeoutMs: 30000, retryDelayMs: 20 });
  const r = await frozenHolderScenario(tc, pool, table, `lease_acquire(${name}) (A's ttl 500 ms)`,
    { kind: 'lease', name, ttlMs: 500 }, () => b.acquire());
  assert.match(r.reply, /^error StaleTokenError stale_token /);
  await b.release();
  assert.equal((await pool.query(`SELECT n FROM ${table}`)).rows[0].n, 2);
});

test('lease: a table protected with the lease refuses the holder once the lease ran out (LeaseExpiredError)', async () => {
  const name = unique('lease');
  const src = new LeaseTokenSource(pool, { name, ttlMs: 300 });
  const token = await src.acquire();
  const table = await protectedTable(pool, 'ts_leased', `, lease => '${name}'`);
  await runFenced(pool, token, (c) => c.query(`UPDATE ${table} SET n = n + 1 WHERE id = 'r'`));
  await waitFor('the lease to run out', async () => !(await src.check()));
  await assert.rejects(runFenced(pool, token, (c) => c.query(`UPDATE ${table} SET n = n + 1 WHERE id = 'r'`)),
    (e: unknown) => e instanceof LeaseExpiredError && e.reason === 'lease_expired');
});
