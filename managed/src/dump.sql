------------------------------------------------------------------------------
-- pg_dump keeps protections, fences, keys and leases
------------------------------------------------------------------------------

-- Installed as an extension, the edition's tables are its members, which
-- pg_dump leaves out unless marked: mark those whose rows a restore must
-- keep, so that a restored database never lets a stale writer or a
-- replayed request in.  (The scopes' storage tables, the guard functions
-- and the counters are created by protect(), not by this script: they are
-- no members, and pg_dump dumps them, rows and all, as any table.  The
-- plain script's objects are no members of anything: pg_dump dumps them
-- all.)  fencing.edition_state is not marked: CREATE EXTENSION fills it
-- when a restore installs the edition again, with what that install could
-- do (the DDL guard or not).
DO $dump$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'fencing_sql') THEN
        PERFORM pg_catalog.pg_extension_config_dump('fencing.protected', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.scope_storage', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.leases', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.epoch_state', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.idempotency_keys', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.idempotency_claim_seq', '');
    END IF;
END
$dump$;
