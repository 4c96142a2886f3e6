-- test/upgrade/writers.sql: the writers and the watcher of the upgrade
-- suites.  Each is a procedure that commits after every write and runs
-- until app.control.stop is set (or its time is up), so one CALL is one
-- long-lived backend: it keeps the library it loaded first.
--
-- app.fresh(w, seconds): writer w owns account w, ledger and holds
-- account 'acct-w', and (writer 1 only) the settings table and tenant
-- 'tw' of events; its n-th write carries token 10:n, newer than anything
-- before it.  Each write and its row in app.acked commit together, so a
-- row in app.acked is an acknowledged write.  A failure is logged in
-- app.failed (any failure of a fresh write is a fault).
--
-- app.stale(seconds, who): stale writer "who" tries every protected table with tokens that have
-- lost: the token of the last acknowledged write of a writer (equal to the
-- fence, from another transaction) and one below it, and epoch 1 tokens.
-- Each attempt is logged in app.stale with its SQLSTATE ('accepted' when
-- the write went through, a fault).
--
-- app.watcher(seconds): every 50 ms, the fences of the accounts and the
-- highest fence and number of rows of each scope name, into app.watch,
-- so that a lowered fence would show.  Each look's rows carry the time
-- before its statement began (since) and each row the time it was written
-- (at): a look whose since is after another's at took its snapshot after
-- that one, so it must see no lower fence.  (Two watchers run at once: the
-- order of their rows' times alone does not order their snapshots.)

SET client_min_messages = warning;

CREATE PROCEDURE app.fresh(w int, seconds float8)
LANGUAGE plpgsql AS $fn$
DECLARE
    n int;
    tok fencing.fence;
    deadline timestamptz := clock_timestamp() + make_interval(secs => seconds);
BEGIN
    -- a writer may come back in a new session: go on after its last write
    n := coalesce((SELECT max(a.n) FROM app.acked a WHERE a.writer = w), 0);
    LOOP
        EXIT WHEN (SELECT stop FROM app.control) OR clock_timestamp() > deadline;
        n := n + 1;
        tok := fencing.fence(10, n);
        BEGIN
            UPDATE app.accounts SET balance = balance + 1, fence = tok WHERE id = w;
            INSERT INTO app.ledger (account, amount, fence) VALUES ('acct-' || w, 1, tok);
            INSERT INTO app.holds (account, amount, fence) VALUES ('acct-' || w, 1, tok);
            IF w = 1 THEN
                UPDATE app.settings SET value = n::text, fence = tok WHERE name = 'mode';
                INSERT INTO app.events VALUES ('tw', 'eu', DATE '2025-03-01', n::text, tok);
            END IF;
            INSERT INTO app.acked (writer, n, tok) VALUES (w, n, tok);
        EXCEPTION WHEN OTHERS THEN
            INSERT INTO app.failed (writer, n, sqlstate, message) VALUES (w, n, SQLSTATE, SQLERRM);
        END;
        COMMIT;
        PERFORM pg_sleep(0.005);
    END LOOP;
END
$fn$;

-- One attempt: run sql (a write with a stale token); log the outcome.
CREATE PROCEDURE app.stale_try(who int, what text, tok fencing.fence, sql text)
LANGUAGE plpgsql AS $fn$
BEGIN
    BEGIN
        -- the token in the setting too: a row-scope UPDATE that leaves the
        -- fence column as it is carries the setting's token
        PERFORM set_config('fencing.token', tok::text, true);
        EXECUTE sql USING tok;
        INSERT INTO app.stale (writer, what, tok, sqlstate, message)
             VALUES (who, what, tok, 'accepted', 'a stale token was accepted');
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO app.stale (writer, what, tok, sqlstate, message)
             VALUES (who, what, tok, SQLSTATE, SQLERRM);
    END;
END
$fn$;

CREATE PROCEDURE app.stale(seconds float8, who int DEFAULT 0)
LANGUAGE plpgsql AS $fn$
DECLARE
    deadline timestamptz := clock_timestamp() + make_interval(secs => seconds);
    a record;
BEGIN
    LOOP
        EXIT WHEN (SELECT stop FROM app.control) OR clock_timestamp() > deadline;
        -- the last acknowledged token of each writer: equal to its fences
        FOR a IN SELECT DISTINCT ON (writer) writer, n, tok FROM app.acked
                  ORDER BY writer, n DESC LOOP
            CALL app.stale_try(who, 'accounts equal', a.tok,
                format('UPDATE app.accounts SET balance = 0, fence = $1 WHERE id = %s', a.writer));
            CALL app.stale_try(who, 'accounts lower', fencing.fence(10, a.n - 1),
                format('UPDATE app.accounts SET balance = 0, fence = $1 WHERE id = %s', a.writer));
            CALL app.stale_try(who, 'ledger equal', a.tok,
                format('INSERT INTO app.ledger (account, amount, fence) VALUES (%L, -1, $1)', 'acct-' || a.writer));
            CALL app.stale_try(who, 'holds lower', fencing.fence(10, a.n - 1),
                format('INSERT INTO app.holds (account, amount, fence) VALUES (%L, -1, $1)', 'acct-' || a.writer));
            IF a.writer = 1 THEN
                CALL app.stale_try(who, 'settings lower', fencing.fence(10, a.n - 1),
                    'UPDATE app.settings SET value = $$stale$$, fence = $1 WHERE name = $$mode$$');
                CALL app.stale_try(who, 'events equal', a.tok,
                    'INSERT INTO app.events VALUES ($$tw$$, $$eu$$, DATE $$2025-03-02$$, $$stale$$, $1)');
            END IF;
            COMMIT;
        END LOOP;
        -- epoch 1: older than every fence of the fill
        CALL app.stale_try(who, 'accounts epoch 1', '1:999', 'UPDATE app.accounts SET balance = 0, fence = $1 WHERE id = 40');
        CALL app.stale_try(who, 'archive epoch 1', '1:999', 'INSERT INTO app.archive VALUES (3, $1)');
        CALL app.stale_try(who, 'events epoch 1', '1:999',
            'INSERT INTO app.events VALUES ($$t1$$, $$us$$, DATE $$2024-07-01$$, $$stale$$, $1)');
        COMMIT;
        PERFORM pg_sleep(0.02);
    END LOOP;
END
$fn$;

ALTER TABLE app.watch ADD COLUMN since timestamptz;

CREATE PROCEDURE app.watcher(seconds float8)
LANGUAGE plpgsql AS $fn$
DECLARE
    deadline timestamptz := clock_timestamp() + make_interval(secs => seconds);
    t timestamptz;
BEGIN
    LOOP
        EXIT WHEN (SELECT stop FROM app.control) OR clock_timestamp() > deadline;
        t := clock_timestamp();
        INSERT INTO app.watch (what, fence, n, since)
             SELECT 'account ' || id, fence, NULL, t FROM app.accounts WHERE id <= 10;
        t := clock_timestamp();
        INSERT INTO app.watch (what, fence, n, since)
             SELECT 'scope ' || scope_name, fencing.max(fence), count(*), t
               FROM fencing.scopes GROUP BY scope_name;
        COMMIT;
        PERFORM pg_sleep(0.05);
    END LOOP;
END
$fn$;
