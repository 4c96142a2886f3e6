// runOnce and the idempotency helpers against a real server.

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import {
  runOnce, idemBegin, idemCheckpoint, idemComplete, idemAbandon, KeyInProgressError, KeyReusedError,
  ClaimTakenOverError, LeaseSource,
} from '@fencing/client';
import { newPool, unique } from './helpers';

const pool = newPool();
after(() => pool.end());

async function ledger(): Promise<string> {
  const t = unique('ts_ledger');
  await pool.query(`CREATE TABLE ${t} (id serial PRIMARY KEY, refund text NOT NULL, amount int NOT NULL)`);
  return t;
}

test('a new key runs fn once and records its result with the business write; a retry replays it', async () => {
  const t = await ledger();
  const key = unique('refund');
  let calls = 0;
  const pay = () => runOnce(pool, key, { amount: 1250 }, async (c, claim) => {
    calls++;
    assert.equal(claim.state, 'started');
    await c.query(`INSERT INTO ${t} (refund, amount) VALUES ($1, -1250)`, [key]);
    return { psp: 're_123', claim: claim.token!.toString() };
  });
  const first = await pay();
  const second = await pay();
  assert.equal(calls, 1);
  assert.deepEqual(second, first);
  assert.equal((await pool.query(`SELECT count(*)::int AS n FROM ${t}`)).rows[0].n, 1);
});

test('fn fails: nothing is recorded, neither the write nor the claim; the next call runs', async () => {
  const t = await ledger();
  const key = unique('refund');
  await assert.rejects(runOnce(pool, key, { a: 1 }, async (c) => {
    await c.query(`INSERT INTO ${t} (refund, amount) VALUES ($1, 1)`, [key]);
    throw new Error('psp down');
  }), /psp down/);
  assert.equal((await pool.query(`SELECT count(*)::int AS n FROM ${t}`)).rows[0].n, 0);
  const r = await runOnce(pool, key, { a: 1 }, async (_c, claim) => claim.state);
  assert.equal(r, 'started');
});

test('a key another owner is running: KeyInProgressError; another request under the key: KeyReusedError', async () => {
  const key = unique('refund');
  const claim = await idemBegin(pool, key, { a: 1 }, { lease: '1 minute' });
  assert.equal(claim.state, 'started');
  await assert.rejects(runOnce(pool, key, { a: 1 }, async () => 'never'), KeyInProgressError);
  await assert.rejects(runOnce(pool, key, { a: 2 }, async () => 'never'), KeyReusedError);
  await idemComplete(pool, key, claim.token!, { ok: true });
  assert.deepEqual(await runOnce(pool, key, { a: 1 }, async () => 'never'), { ok: true });
});

test('a claim taken over after its lease: the old owner gets ClaimTakenOverError and records nothing', async () => {
  const key = unique('refund');
  const a = await idemBegin(pool, key, { amount: 5 }, { lease: '300 milliseconds' });
  await idemCheckpoint(pool, key, a.token!, 'psp:re_1', '300 milliseconds');
  // B retries until A's lease ran out (server clock) and it resumes
  let b;
  for (;;) {
    try {
      b = await idemBegin(pool, key, { amount: 5 }, { lease: '1 minute' });
      break;
    } catch (e) {
      if (!(e instanceof KeyInProgressError)) throw e;
      await new Promise((r) => setTimeout(r, 25));
    }
  }
  assert.equal(b.state, 'resumed');
  assert.equal(b.recoveryPoint, 'psp:re_1');
  assert.ok(b.token!.compare(a.token!) > 0);
  const lost = await idemComplete(pool, key, a.token!, { by: 'A' }).then(() => null, (e) => e);
  assert.ok(lost instanceof ClaimTakenOverError && lost.reason === 'claim_taken_over', String(lost));
  await idemComplete(pool, key, b.token!, { by: 'B' });
  assert.deepEqual((await idemBegin(pool, key, { amount: 5 })).result, { by: 'B' });
});

test('an abandoned claim resumes at once; the claim token can fence the request\'s writes', async () => {
  const key = unique('job');
  const t = unique('ts_jobs');
  await pool.query(`CREATE TABLE ${t} (k text PRIMARY KEY, runs int NOT NULL DEFAULT 0, fence fencing.fence)`);
  await pool.query(`SELECT fencing.protect('${t}', key_columns => '{k}')`);
  const a = await idemBegin(pool, key, {});
  await idemAbandon(pool, key, a.token!);
  const r = await runOnce(pool, key, {}, async (c, claim) => {
    await c.query(`INSERT INTO ${t} (k, runs) VALUES ($1, 1)`, [key]);
    return { state: claim.state, token: claim.token!.toString() };
  }, { token: 'claim' });
  assert.equal(r.state, 'resumed');
  assert.notEqual(r.token, a.token!.toString(), 'the resumed claim has a token of its own');
  const { rows } = await pool.query(`SELECT fence::text FROM ${t}`);
  assert.equal(rows[0].fence, r.token, 'the write carried the claim token');
});

test('runOnce with a lock\'s source: the request\'s writes carry the source\'s next token', async () => {
  const t = unique('ts_paid');
  await pool.query(`CREATE TABLE ${t} (id text PRIMARY KEY, fence fencing.fence)`);
  await pool.query(`SELECT fencing.protect('${t}')`);
  const lease = new LeaseSource(pool, { name: unique('once'), ttlMs: 10000 });
  await lease.acquire();
  try {
    for (const id of ['p1', 'p2']) {
      await runOnce(pool, unique('pay'), { id }, async (c) => {
        await c.query(`INSERT INTO ${t} (id) VALUES ($1)`, [id]);
      }, { token: lease });
    }
  } finally {
    await lease.release();
  }
  const { rows } = await pool.query(`SELECT fence::text AS f FROM ${t} ORDER BY id`);
  assert.equal(rows.length, 2);
  assert.notEqual(rows[0].f, rows[1].f);
});
