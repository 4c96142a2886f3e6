-- fencing.advance(): compare-and-advance inside UPDATE.
SET search_path = public, fencing;

CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint, fence fence);
INSERT INTO accounts VALUES ('acct-1', 10000, NULL);

UPDATE accounts SET balance_cents = balance_cents - 100,
       fence = advance(fence, '3:42') WHERE id = 'acct-1' RETURNING *;
-- an older token is refused, and nothing is written
UPDATE accounts SET balance_cents = balance_cents - 100,
       fence = advance(fence, '3:41') WHERE id = 'acct-1';
SELECT * FROM accounts;
DROP TABLE accounts;
