// Pay a refund with the token of a lock (node-postgres).
const { Client } = require('pg');

// SF001: the token was refused. Never retry with the same token.
class Refused extends Error {
  constructor(reason, message) {
    super(message);
    this.reason = reason;
  }
}

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
      // why, in the error's constraint field (never the text); a server
      // without it only says: a newer token was accepted
      if (e.code === 'SF001') throw new Refused(e.constraint || 'stale_token', e.message);
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
    if (!(e instanceof Refused)) throw e;
    if (e.reason === 'token_already_used') {
      // not a lost lock: this token wrote in another transaction already:
      // take a new one from the lock for each transaction
      console.log(`SF001 ${e.reason}: ${e.message}: stopping`);
      process.exitCode = 4;
    } else {
      // stale_token, lease_expired (claim_taken_over: the same for a claim):
      // the lock is gone; re-acquire it before any new work
      console.log(`SF001: ${e.message}: the lock is gone (${e.reason}), stopping`);
      process.exitCode = 3;
    }
  } finally {
    await client.end();
  }
}

main();
