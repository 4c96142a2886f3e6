// A ledger worker behind a Redis lock: it raises the account's fence the
// moment it takes the lock, posts several entries under that one lock (a
// new token for each transaction), and stops as soon as the lock is lost.
import { Pool } from 'pg';
import { Redis } from 'ioredis';
import { FencingError, runFenced } from '@fencing/client';
import { RedisSource } from '@fencing/client/redis';

async function main(): Promise<void> {
  const pool = new Pool(); // PGHOST, PGPORT, PGUSER, PGDATABASE
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  await pool.query('CREATE EXTENSION IF NOT EXISTS fencing');
  await pool.query(`CREATE TABLE IF NOT EXISTS fencing_lock_generations (
                      service text PRIMARY KEY, generation bigint NOT NULL)`);
  await pool.query("INSERT INTO fencing_lock_generations VALUES ('redis', 0) ON CONFLICT DO NOTHING");
  await pool.query(`CREATE TABLE IF NOT EXISTS ledger (
                      id bigserial PRIMARY KEY,
                      acct text NOT NULL,
                      amount int NOT NULL,
                      fence fencing.fence)`);
  await pool.query("SELECT fencing.protect('ledger', key_columns => '{acct}')");

  const lock = new RedisSource(redis, pool, {
    name: 'acct-1',
    ttlMs: 5_000,
    onLost: (err) => console.log(`lock lost: ${err.message}`),
  });
  await lock.acquire({ timeoutMs: 30_000, fences: [{ table: 'ledger', key: 'acct-1' }] });
  try {
    for (const amount of [100, -30, -20]) {
      const token = await runFenced(pool, lock, async (client, { token }) => {
        await client.query('INSERT INTO ledger (acct, amount) VALUES ($1, $2)', ['acct-1', amount]);
        return token;
      });
      console.log(`posted ${amount} to acct-1 with token ${token}`);
    }
  } catch (e) {
    if (!(e instanceof FencingError)) throw e;
    console.log(`${e.name}: stopping (${e.message})`);
  } finally {
    await lock.release();
    redis.disconnect();
    await pool.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
