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
# (extended protocol, prepared), "one trip" sends the transaction as one
# multi-statement query, which leaves out the two extra round trips and
# shows the server-side cost.  Runs alternate bare/idem and the medians
# are compared, since the machine may be busy with other work.
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
BEGIN \; INSERT INTO orders (ref, amount_cents) VALUES (:r, 1250) \; COMMIT;
SQL
cat >"$dir/idem1.sql" <<'SQL'
\set r random(1, 9000000000000000)
BEGIN \; INSERT INTO orders (ref, amount_cents) VALUES (:r, 1250) \; SELECT fencing.idem_complete('order:' || :r, b.token, '{"ok": true}') FROM fencing.idem_begin('order:' || :r, '{"amount_cents": 1250}') AS b \; COMMIT;
SQL

chown -R postgres: "$dir"

fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d postgres -c 'CREATE DATABASE bench'
fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d bench \
    -c 'CREATE EXTENSION fencing' \
    -c 'CREATE TABLE orders (id bigserial PRIMARY KEY, ref bigint NOT NULL, amount_cents int NOT NULL, created_at timestamptz NOT NULL DEFAULT now())'

# tps of one pgbench run: script, protocol
run() {
    fencing_as_postgres pgbench -n -c 4 -j 4 -T "$secs" -M "$2" -f "$dir/$1.sql" bench 2>&1 |
        awk '/^tps/ { print $3 }'
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

for style in statements onetrip; do
    if [ $style = statements ]; then b=bare; i=idem; proto=prepared; else b=bare1; i=idem1; proto=simple; fi
    : >"$dir/$b.tps"; : >"$dir/$i.tps"
    run "$b" "$proto" >/dev/null          # warm up
    for _ in $(seq "$rounds"); do
        run "$b" "$proto" >>"$dir/$b.tps"
        run "$i" "$proto" >>"$dir/$i.tps"
    done
    bt=$(median <"$dir/$b.tps"); it=$(median <"$dir/$i.tps")
    printf '%-10s bare %8.0f tps   idem %8.0f tps   ratio %.2f   (runs: bare %s / idem %s)\n' \
        "$style" "$bt" "$it" "$(awk -v a="$it" -v b="$bt" 'BEGIN { print a / b }')" \
        "$(paste -sd' ' "$dir/$b.tps")" "$(paste -sd' ' "$dir/$i.tps")"
done
