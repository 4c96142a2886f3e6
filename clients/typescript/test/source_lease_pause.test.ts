// The lease source against its real service, the pauses: test/source-suite.ts,
// and a holder frozen inside its transaction.
import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { LeaseSource, runFenced } from '@fencing/client';
import { sourceSuite } from './source-suite';
import { newPool, protectedTable, Timeline, unique, Worker } from './helpers';
import { TTL } from './sources';

sourceSuite('lease', 'pauses');

const pool = newPool({ max: 2 });
after(() => pool.end());

test('lease: a holder frozen inside its transaction keeps no one from the lease once its TTL ran out (lease_next runs before BEGIN: the transaction does not lock the lease\'s row)', async (tc) => {
  const name = unique('inside');
  const t = await protectedTable(pool, 'ts_inside');
  const { ttlMs } = TTL.lease;
  const tl = new Timeline();
  const a = new Worker({ kind: 'lease', name, ttlMs });
  const b = new LeaseSource(pool, { name, ttlMs: 10000 });
  try {
    tl.event('A', `acquire lease ${name} (ttl ${ttlMs} ms) -> ${await a.call('acquire')}`);
    const inside = await a.call(`hold ${t} r`);
    tl.event('A', `a fenced transaction, UPDATE done, still open -> ${inside}`);
    assert.match(inside, /^inside /);
    a.freeze();
    tl.event('test', 'kill -STOP A: frozen inside its transaction');
    const tb = await b.acquire({ timeoutMs: ttlMs * 5 });
    tl.event('B', `acquire -> ${tb} (A's lease ran out; A's transaction is still open)`);
    a.thaw();
    tl.event('test', 'kill -CONT A');
    const end = await a.call('go');
    tl.event('A', `its transaction goes on -> ${end}`);
    await runFenced(pool, b, (c) => c.query(`UPDATE ${t} SET n = n + 1 WHERE id = 'r'`));
    tl.event('B', 'UPDATE with its next token -> COMMIT');
    await b.release();
  } finally {
    tl.print(tc);
    await a.stop();
    await b.release().catch(() => undefined);
  }
});
