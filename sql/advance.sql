-- fencing.advance(current, token, strict): compare-and-advance.
SET search_path = public, fencing;

--
-- The rule, on values
--
-- a NULL current fence accepts any token
SELECT advance(NULL, '3:42');
SELECT advance(NULL, '0:0');
-- a newer token is returned
SELECT advance('3:41', '3:42'), advance('2:999', '3:0'), advance('0:0', '0:1');
-- the epoch dominates: a new epoch beats any counter of an old one
SELECT advance('1:9223372036854775807', '2:0');
SELECT advance('2:0', '1:9223372036854775807');
-- an equal token is stale when strict (the default) ...
SELECT advance('3:42', '3:42');
SELECT advance('3:42', '3:42', true);
SELECT advance('3:42', '3:42', strict => true);
-- ... and accepted when not strict
SELECT advance('3:42', '3:42', false);
SELECT advance('3:42', '3:42', strict => false);
-- an older token is stale either way
SELECT advance('3:42', '3:41');
SELECT advance('3:42', '3:41', false);
SELECT advance('3:42', '2:100', false);
-- a NULL strict flag means strict
SELECT advance('3:42', '3:42', NULL);
SELECT advance('3:41', '3:42', NULL);
-- a NULL token is an error (SF002), whatever the current fence
SELECT advance('3:42', NULL);
SELECT advance(NULL, NULL);
SELECT advance(NULL, NULL, false);
-- the SQLSTATEs
\set VERBOSITY sqlstate
SELECT advance('3:42', '3:42');
SELECT advance('3:42', NULL);
\set VERBOSITY default

-- The error fields, as a client sees them
DO $$
DECLARE
    st text; msg text; det text; hnt text;
BEGIN
    PERFORM fencing.advance('5:10', '5:9');
EXCEPTION WHEN SQLSTATE 'SF001' THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
    RAISE NOTICE 'sqlstate: %', st;
    RAISE NOTICE 'message: %', msg;
    RAISE NOTICE 'detail: %', det;
    RAISE NOTICE 'hint: %', hnt;
END $$;
-- SF001 is not a serialization failure: class SF, not 40
DO $$
BEGIN
    PERFORM fencing.advance('5:10', '5:9');
EXCEPTION
    WHEN serialization_failure THEN RAISE NOTICE 'caught as 40001 (wrong)';
    WHEN OTHERS THEN RAISE NOTICE 'caught as %', SQLSTATE;
END $$;

--
-- Inside UPDATE
--
CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL,
                       fence fence);
INSERT INTO accounts VALUES ('acct-1', 10000, NULL), ('acct-2', 500, '7:0');

-- the first write on a row with no fence yet
UPDATE accounts SET balance_cents = balance_cents - 100,
       fence = advance(fence, '3:42')
 WHERE id = 'acct-1' RETURNING *;
-- a newer token in the same epoch
UPDATE accounts SET balance_cents = balance_cents - 100,
       fence = advance(fence, '3:43')
 WHERE id = 'acct-1' RETURNING id, balance_cents, fence;
-- an older token is refused, and nothing is written
UPDATE accounts SET balance_cents = balance_cents - 100,
       fence = advance(fence, '3:41')
 WHERE id = 'acct-1' RETURNING *;
SELECT * FROM accounts ORDER BY id;
-- the same token again: refused when strict, accepted when not
UPDATE accounts SET balance_cents = balance_cents - 1,
       fence = advance(fence, '3:43')
 WHERE id = 'acct-1';
UPDATE accounts SET balance_cents = balance_cents - 1,
       fence = advance(fence, '3:43', strict => false)
 WHERE id = 'acct-1' RETURNING *;
-- a new epoch beats a large counter of the old one
UPDATE accounts SET fence = advance(fence, '3:9223372036854775807')
 WHERE id = 'acct-1' RETURNING fence;
UPDATE accounts SET fence = advance(fence, '4:0')
 WHERE id = 'acct-1' RETURNING fence;
UPDATE accounts SET fence = advance(fence, '3:9223372036854775807')
 WHERE id = 'acct-1' RETURNING fence;
-- a NULL token writes nothing either
UPDATE accounts SET balance_cents = 0, fence = advance(fence, NULL)
 WHERE id = 'acct-1';
-- a statement over several rows is all or nothing: acct-2's fence 7:0 beats
-- the token, so acct-1 is not written either
UPDATE accounts SET balance_cents = balance_cents + 1,
       fence = advance(fence, '5:0')
 RETURNING *;
SELECT * FROM accounts ORDER BY id;
-- with a token that beats both rows, both are written
UPDATE accounts SET balance_cents = balance_cents + 1,
       fence = advance(fence, '7:1')
 RETURNING *;
-- in a transaction, the failed write aborts it and nothing is kept
BEGIN;
UPDATE accounts SET balance_cents = 42, fence = advance(fence, '8:0')
 WHERE id = 'acct-1';
UPDATE accounts SET balance_cents = 42, fence = advance(fence, '7:0')
 WHERE id = 'acct-2';
COMMIT;
SELECT * FROM accounts ORDER BY id;
-- the check can live in WHERE instead, to skip rather than fail: not the
-- recommended use, but it must still never move a fence backwards
UPDATE accounts SET fence = '6:0' WHERE id = 'acct-1' AND fence < '6:0';
SELECT * FROM accounts ORDER BY id;

--
-- With INSERT ... ON CONFLICT DO UPDATE
--
INSERT INTO accounts VALUES ('acct-3', 0, '1:1')
    ON CONFLICT (id) DO UPDATE SET fence = advance(accounts.fence, excluded.fence)
RETURNING *;
INSERT INTO accounts VALUES ('acct-3', 0, '1:2')
    ON CONFLICT (id) DO UPDATE SET fence = advance(accounts.fence, excluded.fence)
RETURNING *;
INSERT INTO accounts VALUES ('acct-3', 0, '1:0')
    ON CONFLICT (id) DO UPDATE SET fence = advance(accounts.fence, excluded.fence)
RETURNING *;
SELECT * FROM accounts ORDER BY id;

DROP TABLE accounts;
