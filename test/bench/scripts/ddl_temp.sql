-- The issue's example: a temporary table created and dropped.
\set c :client_id
CREATE TEMP TABLE tmp_:c (id int PRIMARY KEY, v text);
DROP TABLE tmp_:c;
