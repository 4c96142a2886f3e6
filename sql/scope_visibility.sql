-- scope_visibility: a key value or a fence is shown only to roles that
-- may read the protected table (SELECT on it, or on its fence and key
-- columns), to the scope's owner and its members, to the extension's
-- owner and to superusers: in fencing.scopes, in the scope storage tables,
-- and in the DETAIL of a stale write (SF001).
SET search_path = public, fencing;

CREATE ROLE regress_vis_hr;
CREATE ROLE regress_vis_hr_staff IN ROLE regress_vis_hr;
CREATE ROLE regress_vis_auditor;
CREATE ROLE regress_vis_colreader;
CREATE ROLE regress_vis_clerk;
CREATE ROLE regress_vis_mallory;
CREATE SCHEMA hr AUTHORIZATION regress_vis_hr;
GRANT USAGE ON SCHEMA hr TO regress_vis_auditor, regress_vis_colreader,
    regress_vis_clerk, regress_vis_mallory;

-- An error's SQLSTATE, message and DETAIL, or 'ok'
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    det text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || msg || E'\n' || det;
END $$;

-- HR keeps people by their national number, in key scope; payroll shares
-- the scope "people"; badges are fenced per row.
SET SESSION AUTHORIZATION regress_vis_hr;
CREATE TABLE hr.people (ssn text PRIMARY KEY, name text, fence fencing.fence);
CREATE TABLE hr.payroll (ssn text, cents bigint, fence fencing.fence);
CREATE TABLE hr.badges (id int PRIMARY KEY, holder text, fence fencing.fence);
SELECT fencing.protect('hr.people', key_columns => '{ssn}', scope_name => 'people');
SELECT fencing.protect('hr.payroll', key_columns => '{ssn}', scope_name => 'people');
SELECT fencing.protect('hr.badges');
CREATE TABLE hr.salaries (ssn text, cents bigint, fence fencing.fence);
SELECT fencing.protect('hr.salaries', key_columns => '{ssn}');
BEGIN; SET LOCAL fencing.token = '5:1';
INSERT INTO hr.people VALUES ('078-05-1120', 'Ann');
INSERT INTO hr.payroll VALUES ('219-09-9999', 100);
INSERT INTO hr.salaries VALUES ('078-05-1120', 500);
INSERT INTO hr.badges VALUES (1, 'Ann');
COMMIT;
-- the auditor may read people and salaries, not payroll; the column reader
-- may read only the key and fence columns of salaries; the clerk writes
-- without reading
GRANT SELECT ON hr.people, hr.salaries TO regress_vis_auditor;
GRANT SELECT (ssn, fence) ON hr.salaries TO regress_vis_colreader;
GRANT INSERT, UPDATE ON hr.people, hr.salaries, hr.badges TO regress_vis_clerk;
RESET SESSION AUTHORIZATION;

-- The extension's owner (a superuser here) sees every scope ...
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name IN ('people', 'hr.salaries') ORDER BY 1, 2;

-- ... and so do the scopes' owner and its members
SET SESSION AUTHORIZATION regress_vis_hr_staff;
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name IN ('people', 'hr.salaries') ORDER BY 1, 2;
RESET SESSION AUTHORIZATION;

-- A role that may read some tables sees the scopes of which it may read
-- every table: salaries, not people (payroll shares it)
SET SESSION AUTHORIZATION regress_vis_auditor;
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name IN ('people', 'hr.salaries') ORDER BY 1, 2;
RESET SESSION AUTHORIZATION;
-- Column privileges on the fence and key columns are enough
SET SESSION AUTHORIZATION regress_vis_colreader;
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name IN ('people', 'hr.salaries') ORDER BY 1, 2;
RESET SESSION AUTHORIZATION;
-- Once it may read payroll too, it sees people
GRANT SELECT ON hr.payroll TO regress_vis_auditor;
SET SESSION AUTHORIZATION regress_vis_auditor;
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name IN ('people', 'hr.salaries') ORDER BY 1, 2;
RESET SESSION AUTHORIZATION;

-- Nobody else sees a key, through the view or the storage tables (which
-- it may find in the registry: that shows no key)
SET SESSION AUTHORIZATION regress_vis_mallory;
SELECT count(*) AS keys_seen FROM fencing.scopes;
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name IN ('people', 'hr.salaries') ORDER BY 1, 2;
SELECT scope_name, owner, table_scope FROM fencing.scope_storage
 WHERE scope_name IN ('people', 'hr.salaries') ORDER BY 1;
SELECT s.scope_name,
       split_part(pg_temp.outcome(format('SELECT * FROM %s', s.storage)), ':', 1) AS read_storage
  FROM fencing.scope_storage s WHERE s.scope_name IN ('people', 'hr.salaries') ORDER BY 1;
SELECT s.scope_name, has_table_privilege(s.storage, 'SELECT') AS may_select
  FROM fencing.scope_storage s WHERE s.scope_name IN ('people', 'hr.salaries') ORDER BY 1;
RESET SESSION AUTHORIZATION;

-- A writer that may not read the table learns that its token lost, and to
-- which scope, not the key nor the fence; the HINT is the same
SET SESSION AUTHORIZATION regress_vis_clerk;
\set VERBOSITY default
BEGIN; SET LOCAL fencing.token = '4:0';
INSERT INTO hr.people VALUES ('078-05-1120', 'Ann again');
ROLLBACK;
BEGIN; SET LOCAL fencing.token = '4:0';
UPDATE hr.badges SET holder = 'Bob';
ROLLBACK;
-- a newer token is accepted as ever
BEGIN; SET LOCAL fencing.token = '6:0';
INSERT INTO hr.salaries VALUES ('078-05-1120', 600);
COMMIT;
RESET SESSION AUTHORIZATION;

-- A writer that may read the table sees both, as before
GRANT INSERT ON hr.salaries TO regress_vis_auditor;
SET SESSION AUTHORIZATION regress_vis_auditor;
BEGIN; SET LOCAL fencing.token = '5:9';
INSERT INTO hr.salaries VALUES ('078-05-1120', 1);
ROLLBACK;
RESET SESSION AUTHORIZATION;
-- so does one with SELECT on the fence and key columns only
GRANT INSERT ON hr.salaries TO regress_vis_colreader;
SET SESSION AUTHORIZATION regress_vis_colreader;
BEGIN; SET LOCAL fencing.token = '5:9';
INSERT INTO hr.salaries VALUES ('078-05-1120', 1);
ROLLBACK;
RESET SESSION AUTHORIZATION;
\set VERBOSITY terse

-- A scope that no table uses any more shows its rows to its owner only
SET SESSION AUTHORIZATION regress_vis_hr;
SELECT fencing.unprotect('hr.salaries');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_vis_auditor;
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name = 'hr.salaries';
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_vis_hr;
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name = 'hr.salaries';
RESET SESSION AUTHORIZATION;

-- clean up
SELECT fencing.reset_scope('hr.salaries');
DROP TABLE hr.people, hr.payroll, hr.badges, hr.salaries;
SELECT fencing.reset_scope('people');
DROP SCHEMA hr;
DROP ROLE regress_vis_hr_staff, regress_vis_hr, regress_vis_auditor,
    regress_vis_colreader, regress_vis_clerk, regress_vis_mallory;
