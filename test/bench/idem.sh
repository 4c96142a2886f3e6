#!/usr/bin/env bash
# test/bench/idem.sh: what an idempotency key costs.
#
#   sudo bash test/bench/idem.sh [seconds per run] [rounds]
#
# Builds the extension (optimised, no assertions) into a throwaway cluster
# with synchronous_commit = off and compares, with pgbench -c 4:
#
#   bare   BEGIN; INSERT INTO orders ...; COMMIT;
#   idem   BEGIN; idem_begin(key, request); INSERT INTO orders ...;
#          idem_complete(key, token, result); COMMIT;
#
# in two client styles: "statements" sends each statement on its own
# (extended protocol, prepared), as an application would; "server" calls
# one PL/pgSQL function per transaction that does the same work (one round
# trip, cached plans), which shows the cost inside the server alone.  Runs
# alternate bare/idem and the medians are compared, since the machine may
# be busy with other work.
set -u
. "$(dirname "$0")/../lib/common.sh"
trap fencing_cleanup EXIT
trap 'exit 130' INT TERM

secs=${1:-10}
rounds=${2:-3}

fencing_deps
fencing_build ""
fencing_cluster_start bench "shared_preload_libraries = 'fencing'" \
    "synchronous_commit = off" "max_locks_per_transaction = 128"

dir=$FENCING_WORK/scripts
mkdir -p "$dir"
cat >"$dir/bare.sql" <<'SQL'
\set r random(1, 9000000000000000)
BEGIN;
INSERT INTO orders (ref, amount_cents) VALUES (:r, 1250);
COMMIT;
SQL
cat >"$dir/idem.sql" <<'SQL'
\set r random(1, 9000000000000000)
BEGIN;
SELECT state, token FROM fencing.idem_begin('order:' || :r, '{"amount_cents": 1250}') \gset
INSERT INTO orders (ref, amount_cents) VALUES (:r, 1250);
SELECT fencing.idem_complete('order:' || :r, :token, '{"ok": true}');
COMMIT;
SQL
cat >"$dir/bare1.sql" <<'SQL'
\set r random(1, 9000000000000000)
SELECT bench_bare(:r);
SQL
cat >"$dir/idem1.sql" <<'SQL'
\set r random(1, 9000000000000000)
SELECT bench_idem(:r);
SQL
chown -R postgres: "$dir"

fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE DATABASE bench'
fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d bench \
    -c 'CREATE EXTENSION fencing' \
    -c 'CREATE TABLE orders (id bigserial PRIMARY KEY, ref bigint NOT NULL, amount_cents int NOT NULL, created_at timestamptz NOT NULL DEFAULT now())'
fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d bench <<'SQL'
CREATE FUNCTION bench_bare(r bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO orders (ref, amount_cents) VALUES (r, 1250);
END $$;
CREATE FUNCTION bench_idem(r bigint) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    b record;
BEGIN
    SELECT * INTO b FROM fencing.idem_begin('order:' || r, '{"amount_cents": 1250}');
    IF b.state = 'done' THEN
        RETURN;
    END IF;
    INSERT INTO orders (ref, amount_cents) VALUES (r, 1250);
    PERFORM fencing.idem_complete('order:' || r, b.token, '{"ok": true}');
END $$;
SQL

# tps of one pgbench run: script, protocol
run() {
    fencing_as_postgres pgbench -n -c 4 -j 4 -T "$secs" -M "$2" -f "$dir/$1.sql" bench 2>&1 |
        awk '/^tps/ { print $3 }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for style in statements server; do
    if [ $style = statements ]; then b=bare; i=idem; else b=bare1; i=idem1; fi
    : >"$dir/$b.tps"; : >"$dir/$i.tps"
    run "$b" prepared >/dev/null          # warm up
    for _ in $(seq "$rounds"); do
        run "$b" prepared >>"$dir/$b.tps"
        run "$i" prepared >>"$dir/$i.tps"
    done
    bt=$(median <"$dir/$b.tps"); it=$(median <"$dir/$i.tps")
    printf '%-10s bare %8.0f tps   idem %8.0f tps   ratio %.2f   (runs: bare %s / idem %s)\n' \
        "$style" "$bt" "$it" "$(awk -v a="$it" -v b="$bt" 'BEGIN { print a / b }')" \
        "$(paste -sd' ' "$dir/$b.tps")" "$(paste -sd' ' "$dir/$i.tps")"
done
