-- A CREATE/ALTER/DROP mix on tables nobody protected: a temporary table,
-- then a partitioned table with a partition created, one attached and
-- detached, a trigger added and disabled, a column dropped.
\set c :client_id
CREATE TEMP TABLE tmp_:c (id int PRIMARY KEY, v text, n int);
ALTER TABLE tmp_:c ADD COLUMN x int;
ALTER TABLE tmp_:c ALTER COLUMN n TYPE bigint;
CREATE INDEX ON tmp_:c (v);
ALTER TABLE tmp_:c RENAME COLUMN x TO y;
DROP TABLE tmp_:c;
CREATE TABLE parted_:c (id int, d int, v text) PARTITION BY RANGE (d);
CREATE TABLE p1_:c PARTITION OF parted_:c FOR VALUES FROM (0) TO (10);
CREATE TABLE p2_:c (id int, d int, v text);
ALTER TABLE parted_:c ATTACH PARTITION p2_:c FOR VALUES FROM (10) TO (20);
CREATE TRIGGER zzz_audit BEFORE UPDATE ON parted_:c FOR EACH ROW EXECUTE FUNCTION bench_noop();
ALTER TABLE parted_:c DISABLE TRIGGER ALL;
ALTER TABLE parted_:c DETACH PARTITION p2_:c;
ALTER TABLE parted_:c DROP COLUMN v;
DROP TABLE parted_:c, p2_:c;
