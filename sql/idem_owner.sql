--
-- Idempotency keys have owners: a key belongs to the role that began it.
-- An ordinary role that is not a member of it attacks another role's keys
-- with every helper; each attack fails with 42501, shows no claim token,
-- result or recovery point, and leaves the key's row as it was.
--
\set SHOW_CONTEXT never
-- The SQLSTATE of a statement, for the tables of refusals below.
CREATE FUNCTION pg_temp.sqlstate_of(query text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    code text;
BEGIN
    EXECUTE query;
    RETURN 'none';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE;
    RETURN code;
END
$$;
-- Everything a message could leak, and what an attack could change.
CREATE FUNCTION pg_temp.key_row(k text) RETURNS text
LANGUAGE sql AS $$
    SELECT pg_catalog.format('%s|%s|%s|%s|%s|%s|%s|%s|%s', i.state, i.result, i.claim,
                             i.recovery_point, i.locked_until, i.expires_at,
                             i.updated_at, i.request_hash, i.owner)
      FROM fencing.idempotency_keys AS i WHERE i.key = k
$$;
TRUNCATE fencing.idempotency_keys;
SELECT setval('fencing.idempotency_claim_seq', 500, false) IS NOT NULL AS restarted;
CREATE ROLE regress_owner_app;
CREATE ROLE regress_owner_team IN ROLE regress_owner_app;   -- a member of app
CREATE ROLE regress_owner_evil;                             -- an ordinary role
GRANT USAGE ON SCHEMA fencing TO regress_owner_app, regress_owner_team, regress_owner_evil;

-- app begins two keys: one it will complete, one it leaves running with a
-- recovery point.
SET ROLE regress_owner_app;
SELECT state, token AS pay1 FROM fencing.idem_begin('pay:1', '{"cents": 100}') \gset
\echo :state :pay1
SELECT state, token AS pay2 FROM fencing.idem_begin('pay:2', '{"cents": 200}') \gset
SELECT fencing.idem_checkpoint('pay:2', :'pay2', 'card-charged');
RESET ROLE;
SELECT key, owner, state FROM fencing.idempotency_keys ORDER BY key;
SELECT pg_temp.key_row('pay:1') AS pay1_before \gset
SELECT pg_temp.key_row('pay:2') AS pay2_before \gset

-- The attacker: every helper on app's running keys fails with 42501 and
-- says nothing of the key's state (not SF004 with the claim, not SF003).
-- It even knows the claim tokens here (a token leaked some other way).
SET ROLE regress_owner_evil;
SELECT * FROM fencing.idem_begin('pay:1', '{"cents": 100}');
SELECT * FROM fencing.idem_begin('pay:1', '{"cents": 100}', wait => false);
SELECT * FROM fencing.idem_begin('pay:1', '{"cents": 999}');
SELECT fencing.idem_complete('pay:1', :'pay1', '{"paid_to": "evil"}');
SELECT fencing.idem_checkpoint('pay:2', :'pay2', 'evil', lease => '1 day');
SELECT fencing.idem_abandon('pay:2', :'pay2');
-- a wrong token is refused the same way: no "current claim" in a DETAIL
SELECT fencing.idem_complete('pay:1', '0:1', '{}');
SELECT q, pg_temp.sqlstate_of(q) AS sqlstate
  FROM (VALUES ($$SELECT fencing.idem_begin('pay:2', '{"cents": 200}')$$),
               ($$SELECT fencing.idem_begin('pay:2', '{"cents": 200}', wait => false)$$),
               ($$SELECT fencing.idem_begin('pay:2', '{}', lease => '1 hour')$$),
               ($$SELECT fencing.idem_checkpoint('pay:2', '0:1', NULL)$$),
               (format($$SELECT fencing.idem_complete('pay:2', fencing.next(%L), 'null')$$, :'pay2')),
               (format($$SELECT fencing.idem_abandon('pay:1', %L)$$, :'pay1'))) AS t(q);
RESET ROLE;
SELECT pg_temp.key_row('pay:1') = :'pay1_before' AS pay1_untouched,
       pg_temp.key_row('pay:2') = :'pay2_before' AS pay2_untouched;

-- The owner completes pay:1; the attacker cannot replay its result either.
SET ROLE regress_owner_app;
SELECT fencing.idem_complete('pay:1', :'pay1', '{"receipt": "r-1"}');
SET ROLE regress_owner_evil;
SELECT * FROM fencing.idem_begin('pay:1', '{"cents": 100}');
SELECT fencing.idem_complete('pay:1', :'pay1', '{"receipt": "forged"}');

-- A member of the owner acts for it: team replays pay:1 (and resumes
-- pay:3 below); superusers act for every role.
SET ROLE regress_owner_team;
SELECT state, result FROM fencing.idem_begin('pay:1', '{"cents": 100}');
RESET ROLE;
SELECT state, result FROM fencing.idem_begin('pay:1', '{"cents": 100}');

-- A lapsed lease does not open the key to others: the attacker can neither
-- take pay:3 over nor learn its recovery point; the owner's role resumes.
SET ROLE regress_owner_app;
SELECT state, token AS pay3 FROM fencing.idem_begin('pay:3', '{}', lease => '1 millisecond') \gset
SELECT fencing.idem_checkpoint('pay:3', :'pay3', 'step-2', lease => '1 millisecond');
SELECT pg_sleep(0.01);
RESET ROLE;
SELECT pg_temp.key_row('pay:3') AS pay3_before \gset
SET ROLE regress_owner_evil;
SELECT * FROM fencing.idem_begin('pay:3', '{}');
RESET ROLE;
SELECT pg_temp.key_row('pay:3') = :'pay3_before' AS pay3_untouched;
SET ROLE regress_owner_team;
SELECT state, recovery_point, token OPERATOR(fencing.>) :'pay3'::fencing.fence AS higher
  FROM fencing.idem_begin('pay:3', '{}');

-- Keys begun by a member belong to the member: the role it is a member of
-- is not a member of it.
SELECT state FROM fencing.idem_begin('team:1', '{}');
SET ROLE regress_owner_app;
SELECT * FROM fencing.idem_begin('team:1', '{}');
RESET ROLE;

-- An expired key counts as absent, for everyone: whoever begins it next
-- owns the new incarnation, and the old owner is a stranger to it.
SET ROLE regress_owner_app;
SELECT state FROM fencing.idem_begin('pay:4', '{}', lease => '1 millisecond',
                                     retention => '1 millisecond');
SELECT pg_sleep(0.01);
SET ROLE regress_owner_evil;
SELECT state FROM fencing.idem_begin('pay:4', '{"mine": true}');
SET ROLE regress_owner_app;
SELECT pg_temp.sqlstate_of($$SELECT fencing.idem_begin('pay:4', '{"mine": true}')$$) AS app_on_pay4;
RESET ROLE;
SELECT key, owner, state, result FROM fencing.idempotency_keys ORDER BY key;

-- The same attacks when the helpers go through SPI: a table that has grown
-- a trigger (or an index, or row security) is not written directly.  The
-- trigger logs each row the helpers write, to show which path ran.
CREATE TABLE public.idem_writes (op text, key text);
CREATE FUNCTION public.idem_log() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.idem_writes VALUES (TG_OP, NEW.key);
    RETURN NEW;
END
$$;
CREATE TRIGGER idem_log AFTER INSERT OR UPDATE ON fencing.idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION public.idem_log();
GRANT INSERT ON public.idem_writes TO PUBLIC;
SET ROLE regress_owner_app;
SELECT state, token AS pay5 FROM fencing.idem_begin('pay:5', '{}') \gset
RESET ROLE;
SELECT pg_temp.key_row('pay:5') AS pay5_before \gset
SET ROLE regress_owner_evil;
SELECT * FROM fencing.idem_begin('pay:5', '{}');
SELECT fencing.idem_complete('pay:5', :'pay5', '"forged"');
SELECT fencing.idem_complete('pay:5', '0:1', '"forged"');
SELECT q, pg_temp.sqlstate_of(q) AS sqlstate
  FROM (VALUES ($$SELECT fencing.idem_begin('pay:5', '{}', wait => false)$$),
               (format($$SELECT fencing.idem_checkpoint('pay:5', %L, 'evil')$$, :'pay5')),
               (format($$SELECT fencing.idem_abandon('pay:5', %L)$$, :'pay5'))) AS t(q);
RESET ROLE;
SELECT pg_temp.key_row('pay:5') = :'pay5_before' AS pay5_untouched;
SET ROLE regress_owner_app;
SELECT fencing.idem_checkpoint('pay:5', :'pay5', 'half');
SELECT fencing.idem_complete('pay:5', :'pay5', '"ok"');
SELECT state, result FROM fencing.idem_begin('pay:5', '{}');
RESET ROLE;
-- the SPI path ran (the trigger saw its writes), and none of the attacker's
SELECT op, key FROM public.idem_writes ORDER BY op, key;
DROP TRIGGER idem_log ON fencing.idempotency_keys;
DROP TABLE public.idem_writes;
DROP FUNCTION public.idem_log();

-- A key of a role that was dropped: nobody but superusers may use it
-- until it expires.
CREATE ROLE regress_owner_gone;
SET ROLE regress_owner_gone;
SELECT state FROM fencing.idem_begin('gone:1', '{}');
RESET ROLE;
DROP ROLE regress_owner_gone;
SET ROLE regress_owner_evil;
SELECT pg_temp.sqlstate_of($$SELECT fencing.idem_begin('gone:1', '{}')$$) AS evil_on_gone;
RESET ROLE;
SELECT state FROM fencing.idem_begin('gone:1', '{}', wait => false);

-- A key of owner '-' (0, PUBLIC: the update to 1.1 as released gave the
-- keys begun under 1.0 to PUBLIC so, see update_from_1_0_security) belongs
-- to the extension's owner: no other role may use it, nor learn its claim.
UPDATE fencing.idempotency_keys SET owner = '-' WHERE key = 'pay:2';
SET ROLE regress_owner_evil;
\set VERBOSITY terse
SELECT * FROM fencing.idem_begin('pay:2', '{"cents": 200}', wait => false);
\set VERBOSITY default
RESET ROLE;

-- A key must outlive its claim's lease: idem_begin refuses a retention
-- shorter than the lease (22023) and writes nothing; equal is fine.
SELECT * FROM fencing.idem_begin('short:1', '{}', lease => '2 hours', retention => '1 hour');
SELECT * FROM fencing.idem_begin('short:1', '{}', lease => '1 month', retention => '29 days');
SELECT count(*) FROM fencing.idempotency_keys WHERE key LIKE 'short:%';
SELECT state FROM fencing.idem_begin('short:2', '{}', lease => '1 hour', retention => '1 hour');
-- ... and a checkpoint whose lease runs past the key's expiry moves the
-- expiry out with it, so the key cannot expire under a live lease.
SELECT claim AS short2 FROM fencing.idempotency_keys WHERE key = 'short:2' \gset
SELECT fencing.idem_checkpoint('short:2', :'short2', 'long step', lease => '3 hours');
SELECT expires_at >= locked_until AS outlives_lease,
       expires_at - updated_at AS retention_now
  FROM fencing.idempotency_keys WHERE key = 'short:2';
SELECT fencing.idem_checkpoint('short:2', :'short2', 'short step', lease => '1 minute');
SELECT expires_at - updated_at > '2 hours' AS expiry_never_moves_earlier
  FROM fencing.idempotency_keys WHERE key = 'short:2';

DROP OWNED BY regress_owner_app, regress_owner_team, regress_owner_evil;
DROP ROLE regress_owner_team;
DROP ROLE regress_owner_app;
DROP ROLE regress_owner_evil;
TRUNCATE fencing.idempotency_keys;
