-- test/upgrade/verify.sql: what must hold after an upgrade of a database
-- filled by test/upgrade/fill.sql (and written by test/upgrade/writers.sql).
--
--   SELECT * FROM app.verify();   one row per check: ok, description
--
-- Written against the 1.0 interface (so it runs at any version), and
-- behavioural where the storage may change between versions: a fence is
-- "unchanged" when a write with exactly that token is refused (SF001) and
-- one with the next token is accepted (then rolled back).  The checks of
-- idempotency keys and leases change their state (a resumed key, a new
-- lease): run app.verify() once per database.

SET client_min_messages = warning;

-- Run sql with $1 = tok, and fencing.token = tok (so that a row-scope
-- UPDATE that leaves the fence column as it is still carries the token),
-- in a subtransaction that is always rolled back; return 'accepted' or the
-- SQLSTATE it failed with.
CREATE FUNCTION app.try_write(sql text, tok fencing.fence) RETURNS text
LANGUAGE plpgsql SET search_path = public, fencing AS $fn$
BEGIN
    BEGIN
        PERFORM set_config('fencing.token', coalesce(tok::text, ''), true);
        EXECUTE sql USING tok;
        RAISE EXCEPTION USING ERRCODE = 'ZZ999';
    EXCEPTION WHEN SQLSTATE 'ZZ999' THEN
        RETURN 'accepted';
    WHEN OTHERS THEN
        RETURN SQLSTATE;
    END;
END
$fn$;

-- Run sql; return 'ok' or the SQLSTATE it failed with (not rolled back).
CREATE FUNCTION app.try_sql(sql text) RETURNS text
LANGUAGE plpgsql SET search_path = public, fencing AS $fn$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END
$fn$;

-- A fence is exactly f for the write sql: f is refused, next(f) accepted.
CREATE FUNCTION app.fence_is(sql text, f fencing.fence) RETURNS boolean
LANGUAGE sql SET search_path = public, fencing AS $fn$
    SELECT app.try_write(sql, f) = 'SF001' AND app.try_write(sql, fencing.next(f)) = 'accepted'
$fn$;

-- new_epoch: the database now runs on another server (pg_upgrade, a
-- restore), so fencing.current_epoch() must have grown: the first lease
-- granted must then beat every token granted before, whatever its name.
-- Otherwise a grant must beat the tokens granted before for that name.
CREATE FUNCTION app.verify(new_epoch boolean DEFAULT false)
    RETURNS TABLE (ok boolean, description text)
LANGUAGE plpgsql SET search_path = public, fencing AS $fn$
#variable_conflict use_column
DECLARE
    r record;
    bad text;
    cnt bigint;
    tok fencing.fence;
    tok2 fencing.fence;
    maxtok fencing.fence;
BEGIN
    -- protections
    SELECT string_agg(e.relid, ', ') INTO bad
      FROM app.expect_protected e
      LEFT JOIN fencing.protected_tables t ON t.relid::text = e.relid AND t.guard_intact
     WHERE t.relid IS NULL;
    ok := bad IS NULL;
    description := 'every protected table still protected, its guard intact (fencing.protected_tables)'
        || coalesce(': not for ' || bad, '');
    RETURN NEXT;

    SELECT count(*) INTO cnt FROM (
        (SELECT * FROM app.expect_protected
         EXCEPT ALL
         SELECT relid::text, fence_column, key_columns, strict, scope_name FROM fencing.protected)
        UNION ALL
        (SELECT relid::text, fence_column, key_columns, strict, scope_name FROM fencing.protected
         EXCEPT ALL
         SELECT * FROM app.expect_protected)) d;
    ok := cnt = 0;
    description := 'fencing.protected: the same fence columns, key columns, strictness and scope names';
    RETURN NEXT;

    -- row fences of rows no writer touched
    SELECT count(*) INTO cnt FROM app.accounts
     WHERE id > 10 AND (fence IS DISTINCT FROM fencing.fence(5, id) OR balance <> 1000);
    ok := cnt = 0;
    description := format('row scope: the fences of untouched rows unchanged (%s differ)', cnt);
    RETURN NEXT;
    ok := app.fence_is('UPDATE app.accounts SET balance = 1, fence = $1 WHERE id = 33', '5:33');
    description := 'row scope: a stale write (equal token) rejected with SF001, the next token accepted';
    RETURN NEXT;
    ok := app.try_write('UPDATE app.accounts SET balance = 1 WHERE id = 33', NULL) = 'SF002';
    description := 'row scope: a write without a token rejected with SF002';
    RETURN NEXT;

    -- key-scope fences that only the fill wrote (app.fence_is() sets the
    -- token: called by name from this function's own code, not from inside
    -- a query, where nothing may set it)
    bad := NULL;
    FOR r IN SELECT e.k, e.fence FROM app.expect_archive e LOOP
        IF NOT app.fence_is(format('INSERT INTO app.archive VALUES (%s, $1)', r.k), r.fence) THEN
            bad := concat_ws(', ', bad, r.k::text);
        END IF;
    END LOOP;
    ok := bad IS NULL;
    description := 'key scope: every untouched key''s fence unchanged (stale rejected with SF001, next accepted)'
        || coalesce(': not for keys ' || bad, '');
    RETURN NEXT;
    ok := app.try_write('INSERT INTO app.archive VALUES (99, $1)', '1:1') = 'accepted'
      AND app.try_write('INSERT INTO app.archive VALUES (3, $1)', '1:1') = 'SF001';
    description := 'key scope: a new key accepted with any token, a known key refuses an old one';
    RETURN NEXT;
    -- the partitioned table, keys of the fill: t1/us got 5:301 .. 5:491
    SELECT fencing.max(fence) INTO tok FROM app.events WHERE tenant = 't1' AND region = 'us';
    ok := app.fence_is('INSERT INTO app.events VALUES ($$t1$$, $$us$$, DATE $$2025-05-01$$, $$v$$, $1)', tok)
      AND app.fence_is('INSERT INTO app.events VALUES ($$t1$$, $$us$$, DATE $$2024-07-01$$, $$v$$, $1)', tok);
    description := format('partitioned key scope: fence %s unchanged through both partitions', tok);
    RETURN NEXT;
    -- the shared scope: a ledger fence refuses the same token in holds
    ok := app.fence_is('INSERT INTO app.holds (account, amount, fence) VALUES ($$acct-45$$, 0, $1)', '5:145');
    description := 'shared scope name: holds of acct-45 keep the fence its ledger row set (5:145)';
    RETURN NEXT;

    -- table scope: settings' last fill token 5:501, not strict: equal accepted
    IF NOT EXISTS (SELECT FROM app.acked WHERE writer = 1) THEN
        ok := app.try_write('UPDATE app.settings SET value = $$x$$, fence = $1 WHERE name = $$limit$$', '5:500') = 'SF001'
          AND app.try_write('UPDATE app.settings SET value = $$x$$, fence = $1 WHERE name = $$limit$$', '5:501') = 'accepted';
        description := 'table scope, not strict: fence 5:501 unchanged (5:500 refused, 5:501 accepted)';
        RETURN NEXT;
    END IF;

    -- the writers: every acknowledged write kept, no fence lowered
    FOR r IN SELECT writer, count(*) AS writes, max(n) AS last,
                    fencing.max(tok) AS tok
               FROM app.acked GROUP BY writer ORDER BY writer LOOP
        SELECT count(*) INTO cnt FROM app.acked a
         WHERE a.writer = r.writer
           AND (NOT EXISTS (SELECT FROM app.ledger l WHERE l.account = 'acct-' || a.writer AND l.fence = a.tok)
                OR NOT EXISTS (SELECT FROM app.holds h WHERE h.account = 'acct-' || a.writer AND h.fence = a.tok)
                OR (a.writer = 1 AND NOT EXISTS (SELECT FROM app.events e WHERE e.tenant = 'tw' AND e.fence = a.tok)));
        ok := cnt = 0;
        description := format('writer %s: all %s acknowledged writes are in ledger, holds (and events)%s',
                              r.writer, r.writes, CASE WHEN cnt > 0 THEN format(' (%s missing)', cnt) ELSE '' END);
        RETURN NEXT;
        SELECT a.fence, a.balance - 1000 INTO tok, cnt FROM app.accounts a WHERE a.id = r.writer;
        ok := tok = r.tok AND cnt = r.writes;
        description := format('writer %s: its account has the last acknowledged token %s (has %s) and %s increments (has %s)',
                              r.writer, r.tok, tok, r.writes, cnt);
        RETURN NEXT;
        ok := app.fence_is(format('INSERT INTO app.ledger (account, amount, fence) VALUES (%L, 0, $1)', 'acct-' || r.writer), r.tok)
          AND app.fence_is(format('UPDATE app.accounts SET balance = 0, fence = $1 WHERE id = %s', r.writer), r.tok);
        description := format('writer %s: its fences are its last acknowledged token %s, not lower', r.writer, r.tok);
        RETURN NEXT;
    END LOOP;

    -- idempotency keys replay
    SELECT count(*) INTO cnt FROM app.expect_done e,
           LATERAL fencing.idem_begin(e.key, jsonb_build_object('refund', substr(e.key, 10)::int)) b
     WHERE b.state = 'done' AND b.result = e.result;
    ok := cnt = (SELECT count(*) FROM app.expect_done) AND cnt = 10;
    description := format('idempotency: %s of 10 done keys replay their recorded result', cnt);
    RETURN NEXT;
    ok := app.try_sql($q$SELECT fencing.idem_begin('req-done-3', '{"refund": 4}')$q$) = 'SF003';
    description := 'idempotency: a done key reused with another request raises SF003';
    RETURN NEXT;
    ok := app.try_sql($q$SELECT fencing.idem_begin('req-running', '{"refund": "live"}', wait => false)$q$) = 'SF004';
    description := 'idempotency: a running key whose lease is live raises SF004';
    RETURN NEXT;
    SELECT b.token INTO tok2 FROM fencing.idem_begin('req-stalled', '{"refund": "stalled"}') b
     WHERE b.state = 'resumed' AND b.recovery_point = 'step-2';
    ok := tok2 IS NOT NULL AND tok2 > (SELECT token FROM app.expect_tokens WHERE what = 'claim req-stalled');
    description := format('idempotency: a key whose lease ran out resumes at its checkpoint with a higher claim (%s)', tok2);
    RETURN NEXT;
    ok := (SELECT state FROM fencing.idem_begin('req-abandoned', '{"refund": "abandoned"}')) = 'resumed';
    description := 'idempotency: an abandoned key resumes';
    RETURN NEXT;
    ok := (SELECT state FROM fencing.idem_begin('req-expired', '{"refund": "other"}')) = 'started';
    description := 'idempotency: an expired key counts as absent';
    RETURN NEXT;

    -- leases: the first grant afterwards beats every token granted before
    -- (on a new server), or those of its name (on the same server)
    SELECT fencing.max(token) INTO maxtok FROM app.expect_tokens;
    IF new_epoch THEN
        tok := fencing.lease_acquire('lease-after', 'new-worker', '1 hour');
        ok := tok > maxtok;
        description := format('leases: the first lease granted afterwards (%s) beats every token granted before (up to %s)',
                              tok, maxtok);
        RETURN NEXT;
    END IF;
    SELECT token INTO tok2 FROM app.expect_tokens WHERE what = 'lease lease-expired';
    tok := fencing.lease_acquire('lease-expired', 'new-worker', '1 hour');
    ok := tok > tok2 AND (NOT new_epoch OR tok > maxtok);
    description := format('leases: an expired lease is granted again with a higher token (%s, was %s)', tok, tok2);
    RETURN NEXT;
    SELECT token INTO tok2 FROM app.expect_tokens WHERE what = 'lease lease-released';
    tok := fencing.lease_acquire('lease-released', 'new-worker', '1 hour');
    ok := tok > tok2;
    description := format('leases: a released lease is granted again with a higher token (%s, was %s)', tok, tok2);
    RETURN NEXT;
    ok := fencing.lease_acquire('lease-live', 'intruder', '1 hour') IS NULL
      AND fencing.lease_check('lease-live', (SELECT token FROM app.expect_tokens WHERE what = 'lease lease-live'));
    description := 'leases: a live lease is still held by its holder and refused to another';
    RETURN NEXT;
END
$fn$;
