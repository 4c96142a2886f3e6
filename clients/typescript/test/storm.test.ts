// The storm: WORKERS workers in one process share a pool of POOL_MAX
// connections.  Each takes the Redis lock of a random one of RESOURCES
// contended rows (TTL_MS, renewed while held), writes 1 to 5 fenced
// transactions under it (a new token each), and releases it.  At random a
// holder's lock runs out under it while it holds a token for a write (its
// key expired, as a pause past the TTL lets it): it waits until another
// holder has written, then writes with that token.  Afterwards, in the
// database: no write was accepted with a token older than one accepted
// before it, no write after a newer holder's was accepted, every refusal
// was a classified SF001, and no pooled connection holds a token.
//
// FENCING_TS_STORM="workers rounds ttl_ms" changes the size (default 20 30 300).

import test, { after } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { FencedOutError, LockLostError, runFenced, StaleTokenError, StaticToken, Token } from '@fencing/client';
import { RedisSource } from '@fencing/client/redis';
import { env, newPool, unique } from './helpers';

const [WORKERS, ROUNDS, TTL_MS] = (process.env.FENCING_TS_STORM ?? '20 30 300').split(/\s+/).map(Number);
const RESOURCES = 8;
const PAUSE_P = 0.05;
const POOL_MAX = 10;

const pool = newPool({ max: POOL_MAX });
const redis = new Redis({ host: '127.0.0.1', port: env.redisPort });
after(async () => { redis.disconnect(); await pool.end(); });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test(`storm: ${WORKERS} workers x ${ROUNDS} lock grants, 1-5 fenced transactions each, Redis locks of ${TTL_MS} ms running out under holders`, async (tc) => {
  const run = unique('storm');
  await pool.query(`CREATE TABLE ${run} (id int PRIMARY KEY, n int NOT NULL DEFAULT 0, fence fencing.fence)`);
  await pool.query(`INSERT INTO ${run} (id) SELECT g FROM generate_series(0, ${RESOURCES - 1}) g`);
  await pool.query(`SELECT fencing.protect('${run}')`);
  await pool.query(`CREATE TABLE ${run}_log (id bigserial PRIMARY KEY, resource int NOT NULL, token fencing.fence NOT NULL, worker int NOT NULL, paused boolean NOT NULL)`);

  const c = { grants: 0, accepted: 0, stale: 0, otherSf001: 0, lockLost: 0, other: 0, busy: 0, pauses: 0,
    knownStale: 0, knownStaleAccepted: 0 };
  const others: string[] = [];

  const fenceOf = async (r: number): Promise<Token | null> => {
    const f = (await pool.query(`SELECT fence::text AS f FROM ${run} WHERE id = $1`, [r])).rows[0].f;
    return f === null ? null : Token.parse(f);
  };
  const write = async (src: RedisSource | StaticToken, r: number, w: number, paused: boolean): Promise<boolean> => {
    try {
      await runFenced(pool, src, async (cl, { token }) => {
        await cl.query(`UPDATE ${run} SET n = n + 1 WHERE id = $1`, [r]);
        await cl.query(`INSERT INTO ${run}_log (resource, token, worker, paused) VALUES ($1, $2::text::fencing.fence, $3, $4)`,
          [r, token.toString(), w, paused]);
      });
      c.accepted++;
      return true;
    } catch (e) {
      if (e instanceof StaleTokenError) c.stale++;
      else if (e instanceof FencedOutError || (e as { code?: string }).code === 'SF001') c.otherSf001++;
      else if (e instanceof LockLostError) c.lockLost++;
      else { c.other++; if (others.length < 5) others.push(String(e)); }
      return false;
    }
  };

  async function worker(w: number): Promise<void> {
    for (let i = 0; i < ROUNDS;) {
      const r = Math.floor(Math.random() * RESOURCES);
      const src = new RedisSource(redis, pool, { name: `${run}:${r}`, ttlMs: TTL_MS, retryDelayMs: 5 });
      if (!(await src.tryAcquire())) { c.busy++; await sleep(1 + Math.random() * 4); continue; }
      i++;
      c.grants++;
      try {
        const n = 1 + Math.floor(Math.random() * 5);
        for (let k = 0; k < n; k++) {
          if (Math.random() < PAUSE_P) {
            // the lock runs out while this holder holds a token for a write
            let inFlight: Token;
            try {
              inFlight = await src.nextToken();
            } catch (e) {
              if (!(e instanceof LockLostError)) throw e;
              c.lockLost++; // a loaded machine delayed its renewal past the TTL
              break;
            }
            c.pauses++;
            await redis.pexpire(src.lockKey, 1);
            let knownStale = false;
            const end = Date.now() + 3000;
            while (Date.now() < end) {
              const f = await fenceOf(r);
              if (f && f.compare(inFlight) > 0) { knownStale = true; break; }
              await sleep(5);
            }
            if (knownStale) c.knownStale++;
            if ((await write(new StaticToken(inFlight), r, w, true)) && knownStale) c.knownStaleAccepted++;
            break;
          }
          if (!(await write(src, r, w, false))) break;
        }
      } finally {
        await src.release();
      }
    }
  }

  const t0 = Date.now();
  await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
  const secs = (Date.now() - t0) / 1000;

  // in the database: accepted tokens only grow, resource by resource, in
  // commit order (a log row's id is drawn under the resource's row lock)
  const { rows: [db] } = await pool.query(`
    SELECT count(*)::int AS logged,
           count(*) FILTER (WHERE prev IS NOT NULL AND token OPERATOR(fencing.<=) prev)::int AS stale_accepted
      FROM (SELECT token, lag(token) OVER (PARTITION BY resource ORDER BY id) AS prev FROM ${run}_log) l`);
  const { rows: [n] } = await pool.query(`SELECT sum(n)::int AS n FROM ${run}`);
  const clients = await Promise.all(Array.from({ length: POOL_MAX }, () => pool.connect()));
  const tokens = await Promise.all(clients.map(async (cl) =>
    (await cl.query("SELECT current_setting('fencing.token', true) AS t, pg_backend_pid() AS p")).rows[0]));
  clients.forEach((cl) => cl.release());
  const withToken = tokens.filter((x) => x.t).length;
  const { rows: [busy] } = await pool.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = ANY($1) AND pid <> pg_backend_pid() AND state <> 'idle'",
    [tokens.map((x) => x.p)]);

  tc.diagnostic(`storm: ${WORKERS} workers x ${ROUNDS} grants in ${secs.toFixed(1)} s: ${c.grants} grants, ${c.accepted} transactions accepted, ` +
    `${c.stale} StaleTokenError, ${c.otherSf001} other SF001, ${c.lockLost} LockLostError, ${c.other} other errors; ` +
    `${c.pauses} locks ran out under a holder with a token in flight, ${c.knownStale} of them written after a newer holder ` +
    `(accepted: ${c.knownStaleAccepted}); ${db.stale_accepted} stale writes accepted in the database; ` +
    `${c.busy} attempts found the lock taken; ${new Set(tokens.map((x) => x.p)).size} pooled connections, ${withToken} with a token`);
  if (others.length) tc.diagnostic(`other errors: ${others.join(' | ')}`);

  assert.equal(c.other, 0, others.join(' | '));
  assert.equal(c.otherSf001, 0, 'every refusal of a Redis token in row scope is stale_token (strict mode, a new token per transaction)');
  assert.equal(db.stale_accepted, 0, 'a write accepted with a token not newer than the one before it');
  assert.equal(c.knownStaleAccepted, 0, 'a write accepted after a newer holder had written');
  assert.ok(c.knownStale > 0, 'no lock ran out before a newer holder wrote: the storm proved nothing');
  assert.equal(db.logged, c.accepted);
  assert.equal(n.n, c.accepted);
  assert.equal(withToken, 0);
  assert.equal(busy.n, 0);
});
