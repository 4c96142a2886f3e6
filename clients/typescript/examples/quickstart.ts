// Pay invoices while holding a lease: each transaction takes a new token
// from the lease, and the database refuses the writes of a holder that
// lost it.
import { Pool } from 'pg';
import { FencingError, LeaseSource, runFenced } from '@fencing/client';

async function main(): Promise<void> {
  const pool = new Pool(); // PGHOST, PGPORT, PGUSER, PGDATABASE
  await pool.query('CREATE EXTENSION IF NOT EXISTS fencing');
  await pool.query(`CREATE TABLE IF NOT EXISTS invoices (
                      id text PRIMARY KEY,
                      status text NOT NULL,
                      fence fencing.fence)`);
  await pool.query("SELECT fencing.protect('invoices')");

  const lease = new LeaseSource(pool, { name: 'invoices', ttlMs: 10_000 });
  await lease.acquire({ timeoutMs: 30_000 });
  try {
    for (const id of ['inv-1', 'inv-2']) {
      const token = await runFenced(pool, lease, async (client, { token }) => {
        await client.query(`INSERT INTO invoices (id, status) VALUES ($1, 'paid')
                            ON CONFLICT (id) DO UPDATE SET status = excluded.status`, [id]);
        return token;
      });
      console.log(`invoice ${id} paid with token ${token}`);
    }
  } catch (e) {
    if (!(e instanceof FencingError)) throw e;
    console.log(`${e.name}: the lease is lost, stopping (${e.message})`);
  } finally {
    await lease.release();
    await pool.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
