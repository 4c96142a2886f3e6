-- fencing.stats: the entry of a table is freed when the table is dropped
-- or unprotected, at commit; a rollback keeps it.
\set SHOW_CONTEXT never
SET search_path = public, fencing;

-- the counters of a table, by OID (it may be gone), or "none"
CREATE FUNCTION pg_temp.entry(r oid) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce((SELECT format('accepted %s stale %s missing %s', accepted,
                                   rejected_stale, rejected_missing)
                       FROM fencing.stats WHERE relid::oid = r), 'none')
$$;

CREATE TABLE sf_a (id int PRIMARY KEY, fence fencing.fence);
SELECT 'sf_a'::regclass::oid AS a \gset
SELECT protect('sf_a');
INSERT INTO sf_a VALUES (1, '1:1');
UPDATE sf_a SET fence = '1:0' WHERE id = 1;
SELECT pg_temp.entry(:a);

-- unprotect rolled back, whole or to a savepoint: the entry stays
BEGIN;
SELECT unprotect('sf_a');
ROLLBACK;
SELECT pg_temp.entry(:a);
BEGIN;
SAVEPOINT s;
SELECT unprotect('sf_a');
ROLLBACK TO SAVEPOINT s;
UPDATE sf_a SET fence = '1:2' WHERE id = 1;
COMMIT;
SELECT pg_temp.entry(:a);

-- unprotect committed (from a released savepoint): the entry is gone
-- (not before the commit)
BEGIN;
SAVEPOINT s;
SELECT unprotect('sf_a');
RELEASE SAVEPOINT s;
SELECT pg_temp.entry(:a) AS before_commit;
COMMIT;
SELECT pg_temp.entry(:a);

-- protected again, the table counts from zero
SELECT protect('sf_a');
UPDATE sf_a SET fence = '1:3' WHERE id = 1;
SELECT pg_temp.entry(:a);

-- unprotect and protect again in one transaction: counting starts anew,
-- and the writes after the commit are counted (nothing kept pointing at
-- the freed entry)
BEGIN;
SELECT unprotect('sf_a');
SELECT protect('sf_a');
UPDATE sf_a SET fence = '1:4' WHERE id = 1;
COMMIT;
SELECT pg_temp.entry(:a);
UPDATE sf_a SET fence = '1:5' WHERE id = 1;
UPDATE sf_a SET fence = '1:6' WHERE id = 1;
SELECT pg_temp.entry(:a);

-- DROP TABLE rolled back keeps it; committed, frees it
BEGIN;
DROP TABLE sf_a;
ROLLBACK;
SELECT pg_temp.entry(:a);
DROP TABLE sf_a;
SELECT pg_temp.entry(:a);

-- Partitions count in their protected parent's entry: dropping a
-- partition keeps it, dropping the parent frees it
CREATE TABLE sf_p (id int, fence fencing.fence) PARTITION BY RANGE (id);
CREATE TABLE sf_p1 PARTITION OF sf_p FOR VALUES FROM (0) TO (10);
CREATE TABLE sf_p2 PARTITION OF sf_p FOR VALUES FROM (10) TO (20);
SELECT 'sf_p'::regclass::oid AS p \gset
SELECT protect('sf_p');
INSERT INTO sf_p VALUES (1, '1:1'), (11, '1:1');
SELECT pg_temp.entry(:p);
DROP TABLE sf_p2;
SELECT pg_temp.entry(:p);
DROP TABLE sf_p;
SELECT pg_temp.entry(:p);

-- DROP SCHEMA ... CASCADE frees them too
CREATE SCHEMA sf_s;
CREATE TABLE sf_s.t (id int PRIMARY KEY, fence fencing.fence);
SELECT 'sf_s.t'::regclass::oid AS s \gset
SELECT protect('sf_s.t');
INSERT INTO sf_s.t VALUES (1, '1:1');
SELECT pg_temp.entry(:s);
DROP SCHEMA sf_s CASCADE;
SELECT pg_temp.entry(:s);

-- Dropping tables that were never protected changes nothing
SELECT count(*) AS entries FROM fencing.stats \gset
CREATE TABLE sf_plain (id int);
DROP TABLE sf_plain;
SELECT count(*) = :entries AS unchanged FROM fencing.stats;
