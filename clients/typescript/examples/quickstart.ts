// Pay an invoice while holding a lease: the write carries the lease's
// token, and the database refuses it once a newer holder has written.
import { Pool } from 'pg';
import { FencedOutError, LeaseTokenSource, runFenced } from '@fencing/client';

async function main(): Promise<void> {
  const pool = new Pool(); // PGHOST, PGPORT, PGUSER, PGDATABASE
  await pool.query('CREATE EXTENSION IF NOT EXISTS fencing');
  await pool.query(`CREATE TABLE IF NOT EXISTS invoices (
                      id text PRIMARY KEY,
                      status text NOT NULL,
                      fence fencing.fence)`);
  await pool.query("SELECT fencing.protect('invoices')");

  const lease = new LeaseTokenSource(pool, { name: 'invoices', ttlMs: 10_000 });
  const token = await lease.acquire();
  try {
    await runFenced(pool, token, (client) =>
      client.query(`INSERT INTO invoices (id, status) VALUES ('inv-1', 'paid')
                    ON CONFLICT (id) DO UPDATE SET status = excluded.status`));
    console.log(`invoice inv-1 paid with token ${token}`);
  } catch (e) {
    if (!(e instanceof FencedOutError)) throw e;
    console.log(`fenced out (${e.reason}): another holder took over; stopping`);
  } finally {
    await lease.release();
    await pool.end();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
