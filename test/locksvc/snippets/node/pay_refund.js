// Pay a refund with the token of a lock (node-postgres).
const { Client } = require('pg');

// SF001: the lock that issued the token is gone. Stop; never retry.
class LockLost extends Error {}

async function payRefund(client, token, refundId) {
  for (let attempt = 1; ; attempt++) {
    try {
      await client.query('BEGIN');
      // the token as a bound parameter: SET LOCAL cannot take one
      await client.query('SELECT fencing.set_token($1)', [token]);
      await client.query("UPDATE refunds SET state = 'paid' WHERE id = $1", [refundId]);
      await client.query('COMMIT');
      return;
    } catch (e) {
      await client.query('ROLLBACK');
      if (e.code === 'SF001') throw new LockLost(e.message);
      if (e.code === '40001' && attempt < 5) {
        console.log('40001: serialization failure, retrying');
        continue;
      }
      throw e;
    }
  }
}

async function main() {
  const [connectionString, token, refundId] = process.argv.slice(2);
  const client = new Client({ connectionString });
  await client.connect();
  try {
    await payRefund(client, token, refundId);
    console.log(`committed with token ${token}`);
  } catch (e) {
    if (!(e instanceof LockLost)) throw e;
    console.log(`SF001: ${e.message}: the lock is gone, stopping`);
    process.exitCode = 3;
  } finally {
    await client.end();
  }
}

main();
