#!/usr/bin/env bash
# test/suites/citus.sh: the guard on Citus distributed and reference
# tables, on a coordinator and two workers (a third joins later) on this
# machine.
#
# Needs FENCING_CITUS_SRC: Citus source tarballs (citus-X.Y.Z.tar.gz, or
# directories holding them; .ci/run passes the vendor directory's).  The one
# supporting PostgreSQL $FENCING_PGVER is built once and cached (see
# test/lib/citus.sh).  Without it the suite reports itself skipped.
#
# Every test shows a stale write refused with SF001, raised on a worker and
# relayed by the coordinator with its DETAIL and HINT, a fresh one
# accepted, and counts rows after.  Prints TAP.

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/citus.sh
. "$FENCING_ROOT/test/lib/citus.sh"

if [ -z "${FENCING_CITUS_SRC:-}" ]; then
    echo "1..0 # SKIP FENCING_CITUS_SRC is not set (Citus source tarballs, e.g. citus-13.2.2.tar.gz for PostgreSQL 15)"
    exit 0
fi
# shellcheck disable=SC2086
tarball=$(fencing_citus_pick $FENCING_CITUS_SRC)
if [ -z "$tarball" ]; then
    echo "1..0 # SKIP no Citus tarball in FENCING_CITUS_SRC ($FENCING_CITUS_SRC) supports PostgreSQL $FENCING_PGVER"
    exit 0
fi

fencing_workdir
t0=$(date +%s)
cache=$(fencing_citus_build "$tarball") || fencing_die "cannot build Citus from $tarball"
fencing_log "Citus from $cache ($(sed -n 's/^build_seconds //p' "$cache/BUILT")s to build; $(($(date +%s) - t0))s this run)"
fencing_citus_install "$cache"

# stop our servers; the scratch directory is test/check.sh's to remove
citus_cleanup() {
    local d
    for d in "${FENCING_CLUSTERS[@]}"; do
        fencing_cluster_stop "$d"
    done
}
trap citus_cleanup EXIT

# --- the cluster: a coordinator and two workers; w3 joins for the rebalance
declare -A PORT
# PostgreSQL 15.20 approves logical decoding plugins; Citus' shard split
# decodes with its own
plugins=
if fencing_as_postgres "$FENCING_BINDIR/postgres" --describe-config 2>/dev/null >"$FENCING_WORK/citus-gucs" &&
    grep -q '^output_plugin_libraries' "$FENCING_WORK/citus-gucs"; then
    plugins="output_plugin_libraries = 'pgoutput, test_decoding, citus'"
fi
start_node() {
    local name=$1
    fencing_cluster_start "citus-$name" \
        "shared_preload_libraries = 'citus,fencing'" \
        "max_connections = 100" \
        "max_prepared_transactions = 100" \
        "wal_level = logical" \
        "max_replication_slots = 20" \
        "max_wal_senders = 20" \
        "citus.node_conninfo = 'sslmode=disable'" \
        "citus.local_hostname = '127.0.0.1'" \
        "${plugins:-}" \
        "log_min_messages = warning"
    PORT[$name]=$PGPORT
}
for node in coord w1 w2 w3; do
    start_node $node
done

# psql on a node, as the postgres OS user: q NODE SQL... (one -c each)
q() {
    local node=$1; shift
    local args=() s
    for s in "$@"; do args+=(-c "$s"); done
    fencing_as_postgres psql -X -q -At -h 127.0.0.1 -p "${PORT[$node]}" -d postgres \
        -v ON_ERROR_STOP=1 "${args[@]}"
}
# the same, expecting an error: prints the verbose error text (SQLSTATE,
# DETAIL, HINT, CONTEXT) and whatever came before it
qerr() {
    local node=$1; shift
    q "$node" '\set VERBOSITY verbose' "$@" 2>&1
}
# a coordinator session that may SET LOCAL fencing.token and have it
# reach the workers
COORD_TOKEN="SET citus.propagate_set_commands = 'local'"

n=0
failed=0
ok() {
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=$((failed + 1))
    fi
}
is() {
    local got=$1 want=$2 name=$3
    if [ "$got" = "$want" ]; then
        ok 0 "$name"
    else
        ok 1 "$name"
        printf '#   got:  %s\n#   want: %s\n' "$got" "$want" | head -40
    fi
}
like() {
    local got=$1 pattern=$2 name=$3
    # not a pipe into grep -q: under pipefail the writer's SIGPIPE would fail it
    if grep -qE -- "$pattern" <<<"$got"; then
        ok 0 "$name"
    else
        ok 1 "$name"
        printf '#   got:  %s\n#   want: /%s/\n' "$got" "$pattern" | head -40
    fi
}
# a stale write relayed from a worker: SF001, DETAIL, HINT, and the node
stale() {
    local got=$1 name=$2
    like "$got" 'ERROR:  SF001: stale fence token' "$name: SF001"
    like "$got" 'DETAIL:  The row has already accepted fence token' "$name: its DETAIL"
    like "$got" 'HINT:  The lock that issued token .* was lost' "$name: its HINT"
}
# a token equal to the row's fence (strict), relayed from a worker: its own
# message (the token was already used), the same DETAIL, a HINT with remedies
used() {
    local got=$1 name=$2
    like "$got" 'ERROR:  SF001: fence token [0-9]+:[0-9]+ for table "[a-z_0-9]+" was already used' "$name: SF001"
    like "$got" 'DETAIL:  The row has already accepted fence token' "$name: its DETAIL"
    like "$got" 'HINT:  A strict table accepts a token in one transaction only' "$name: its HINT"
}
# the worker of a row's shard: port and shard name
shard_of() { q coord "SELECT get_shard_id_for_distribution_column('$1', $2)"; }
node_of_shard() {
    q coord "SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = $1 LIMIT 1"
}
node_name_by_port() {
    local p=$1 k
    for k in "${!PORT[@]}"; do [ "${PORT[$k]}" = "$p" ] && echo "$k"; done
}
# guard triggers (row guard enabled ALWAYS, TRUNCATE guard) of every
# placement of a table: "placements guarded truncate-guarded"
guard_census() {
    q coord "SELECT count(*), count(*) FILTER (WHERE g.result = '1'), count(*) FILTER (WHERE t.result <> '0')
             FROM run_command_on_placements('$1',
                  \$\$SELECT count(*) FROM pg_trigger WHERE tgrelid = '%s'::regclass
                    AND tgfoid = 'fencing.guard'::regproc AND tgenabled = 'A'\$\$) g
             JOIN run_command_on_placements('$1',
                  \$\$SELECT count(*) FROM pg_trigger WHERE tgrelid = '%s'::regclass
                    AND tgfoid = 'fencing.guard_truncate'::regproc AND tgenabled = 'A'\$\$) t
             USING (shardid, nodename, nodeport)" | tr '|' ' '
}

# --- Citus and fencing on every node
for node in coord w1 w2 w3; do
    q $node "CREATE EXTENSION citus" >/dev/null || fencing_die "CREATE EXTENSION citus failed on $node"
done
q coord "SELECT citus_set_coordinator_host('127.0.0.1', ${PORT[coord]})" >/dev/null
for node in w1 w2; do
    q coord "SELECT citus_add_node('127.0.0.1', ${PORT[$node]})" >/dev/null \
        || fencing_die "citus_add_node $node failed"
done
q coord "CREATE EXTENSION fencing" >/dev/null || fencing_die "CREATE EXTENSION fencing failed"
fencing_log "Citus cluster up: coordinator ${PORT[coord]}, workers ${PORT[w1]} ${PORT[w2]} (w3 ${PORT[w3]} joins later)"

ext=$(for node in coord w1 w2; do q $node "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"; done | tr '\n' ' ')
v=$(sed -n "s/^default_version *= *'\\(.*\\)'.*/\\1/p" "$FENCING_ROOT/fencing.control")
is "$ext" "$v $v $v " "CREATE EXTENSION fencing on the coordinator reaches every worker (at $v)"

# --- a distributed table in row scope
q coord "SET citus.shard_count = 4" \
    "CREATE TABLE accounts (id bigint PRIMARY KEY, balance int NOT NULL DEFAULT 0, fence fencing.fence)" \
    "SELECT create_distributed_table('accounts', 'id')" \
    "INSERT INTO accounts (id) SELECT g FROM generate_series(1, 40) g" >/dev/null
out=$(q coord "SELECT fencing.protect('accounts')" 2>&1)
is "$out" "" "protect() on a distributed table, on the coordinator"
is "$(guard_census accounts)" "4 4 4" "every shard on every node has the row guard (ALWAYS) and the TRUNCATE guard"
is "$(q coord "SELECT count(DISTINCT nodeport) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'accounts'::regclass")" \
    "2" "the shards are spread over both workers"

# every row gets a token
out=$(q coord "UPDATE accounts SET fence = '10:0'" 2>&1)
is "$out" "" "a multi-shard UPDATE with a first token is accepted"
is "$(q coord "SELECT count(*) FROM accounts WHERE fence::text = '10:0'")" "40" "... on all 40 rows"

# routed UPDATE
s1=$(shard_of accounts 1)
p1=$(node_of_shard "$s1")
out=$(qerr coord "UPDATE accounts SET balance = balance + 100, fence = '9:99' WHERE id = 1")
stale "$out" "routed UPDATE with a stale token"
like "$out" "while executing command on 127.0.0.1:$p1" "routed UPDATE: the error comes from the worker of the row's shard"
out=$(q coord "UPDATE accounts SET balance = balance + 1, fence = '11:0' WHERE id = 1" 2>&1)
is "$out" "" "routed UPDATE with a fresh token is accepted"
is "$(q coord "SELECT balance, fence FROM accounts WHERE id = 1")" "1|11:0" "... and only the fresh write landed"

# routed DELETE, the token in SET LOCAL (propagated)
out=$(qerr coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '10:0'" "DELETE FROM accounts WHERE id = 2" "COMMIT")
used "$out" "routed DELETE with SET LOCAL fencing.token equal to the row's fence"
out=$(q coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '10:3'" "DELETE FROM accounts WHERE id = 2" "COMMIT" 2>&1)
is "$out" "" "routed DELETE with a fresh token is accepted"
is "$(q coord "SELECT count(*) FROM accounts")" "39" "... 39 rows left"

# without citus.propagate_set_commands the token never reaches the worker:
# the write fails closed
out=$(qerr coord "BEGIN" "SET LOCAL fencing.token = '99:0'" "UPDATE accounts SET balance = 7 WHERE id = 3" "COMMIT")
like "$out" 'ERROR:  SF002: UPDATE on table "accounts_[0-9]+" requires a fence token' \
    "SET LOCAL fencing.token without citus.propagate_set_commands = local: refused on the worker (SF002), not let through"
is "$(q coord "SELECT balance FROM accounts WHERE id = 3")" "0" "... the row is unchanged"

# routed INSERT: a new row takes its token; a stale write to it is refused
out=$(q coord "INSERT INTO accounts (id, balance, fence) VALUES (100, 5, '20:0')" 2>&1)
is "$out" "" "routed INSERT with a token is accepted"
out=$(qerr coord "UPDATE accounts SET balance = 0, fence = '19:0' WHERE id = 100")
stale "$out" "stale UPDATE of the row just inserted"
out=$(q coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '21:0'" "INSERT INTO accounts (id, balance) VALUES (101, 6)" "COMMIT" 2>&1)
is "$out" "" "routed INSERT with SET LOCAL fencing.token is accepted"
is "$(q coord "SELECT id, balance, fence FROM accounts WHERE id IN (100, 101) ORDER BY id" | tr '\n' ' ')" \
    "100|5|20:0 101|6|21:0 " "... the guard on the worker wrote the token into the row"

# multi-shard UPDATE: one stale row refuses the whole statement
q coord "UPDATE accounts SET fence = '30:0' WHERE id = 40" >/dev/null
out=$(qerr coord "UPDATE accounts SET balance = balance + 1000, fence = '25:0'")
stale "$out" "multi-shard UPDATE with a token older than one row's fence"
is "$(q coord "SELECT count(*) FROM accounts WHERE balance >= 1000")" "0" "... no row of any shard changed"
out=$(q coord "UPDATE accounts SET balance = balance + 1000, fence = '31:0'" 2>&1)
is "$out" "" "multi-shard UPDATE with a fresh token is accepted"
is "$(q coord "SELECT count(*) FROM accounts WHERE balance >= 1000 AND fence::text = '31:0'")" "41" "... on all 41 rows"

# INSERT ... ON CONFLICT DO UPDATE
out=$(qerr coord "INSERT INTO accounts (id, balance, fence) VALUES (5, 1, '30:5') ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence")
stale "$out" "INSERT ... ON CONFLICT DO UPDATE with a stale token"
out=$(q coord "INSERT INTO accounts (id, balance, fence) VALUES (5, 1, '32:5') ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance, fence = EXCLUDED.fence" 2>&1)
is "$out" "" "INSERT ... ON CONFLICT DO UPDATE with a fresh token is accepted"
is "$(q coord "SELECT balance, fence FROM accounts WHERE id = 5")" "1|32:5" "... the row took it"

# COPY: new rows in row scope have no fence to beat; the guard still runs on
# the worker for every copied row (it writes the token, and refuses two)
printf '200,1,\n201,2,\n202,3,\n' >"$FENCING_WORK/copy.csv"
chmod a+r "$FENCING_WORK/copy.csv"
out=$(qerr coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '40:0'" \
    "\\copy accounts (id, balance, fence) FROM '$FENCING_WORK/copy.csv' WITH (FORMAT csv)" "COMMIT")
is "$out" "" "COPY with SET LOCAL fencing.token is accepted"
is "$(q coord "SELECT count(*) FROM accounts WHERE id BETWEEN 200 AND 202 AND fence::text = '40:0'")" "3" \
    "... the guard on the workers wrote the token into the 3 copied rows"
printf '203,1,41:0\n' >"$FENCING_WORK/copy2.csv"
chmod a+r "$FENCING_WORK/copy2.csv"
out=$(qerr coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '40:0'" \
    "\\copy accounts (id, balance, fence) FROM '$FENCING_WORK/copy2.csv' WITH (FORMAT csv)" "COMMIT")
# Citus' COPY relays the worker's message and DETAIL, not its SQLSTATE or HINT
like "$out" 'ERROR:  (SF002|XX000): conflicting fence tokens for table "accounts_[0-9]+"' "COPY of a row whose fence disagrees with the token is refused on the worker"
like "$out" 'DETAIL:  The setting fencing.token is 40:0 but the write puts 41:0 in the fence column.' "... the DETAIL relayed"
is "$(q coord "SELECT count(*) FROM accounts")" "44" "... 44 rows"

# a write sent to a shard directly, on its worker
s7=$(shard_of accounts 7)
n7=$(node_name_by_port "$(node_of_shard "$s7")")
sh7=$(q coord "SELECT shard_name('accounts', $s7)")
out=$(qerr "$n7" "SET citus.enable_manual_changes_to_shards = on" "UPDATE $sh7 SET balance = -1, fence = '12:0' WHERE id = 7")
stale "$out" "UPDATE sent directly to shard $sh7 on its worker, stale"
out=$(q "$n7" "SET citus.enable_manual_changes_to_shards = on" "UPDATE $sh7 SET balance = 77, fence = '50:7' WHERE id = 7" 2>&1)
is "$out" "" "... fresh, accepted"
out=$(qerr "$n7" "SET citus.enable_manual_changes_to_shards = on" "DELETE FROM $sh7 WHERE id = 7")
like "$out" 'ERROR:  SF002: DELETE on table .* requires a fence token' "DELETE on the shard directly without a token is refused"
is "$(q coord "SELECT balance, fence FROM accounts WHERE id = 7")" "77|50:7" "... the coordinator sees the one accepted write"

# --- guarding the guard: the distributed table and its shards
for ddl in "ALTER TABLE accounts DISABLE TRIGGER zz_fencing_guard" \
    "ALTER TABLE accounts DISABLE TRIGGER ALL" \
    "ALTER TABLE accounts ENABLE REPLICA TRIGGER zz_fencing_guard" \
    "DROP TRIGGER zz_fencing_guard ON accounts" \
    "ALTER TABLE accounts DROP COLUMN fence"; do
    out=$(qerr coord "SET citus.enable_unsafe_triggers = on" "$ddl")
    like "$out" 'ERROR:  SF005:' "SF005 on the coordinator: $ddl"
done
is "$(guard_census accounts)" "4 4 4" "... every shard keeps its guard"

sg="zz_fencing_guard_$s7"
for ddl in "ALTER TABLE $sh7 DISABLE TRIGGER $sg" \
    "ALTER TABLE $sh7 DISABLE TRIGGER ALL" \
    "ALTER TABLE $sh7 DISABLE TRIGGER USER" \
    "ALTER TABLE $sh7 ENABLE REPLICA TRIGGER $sg" \
    "ALTER TABLE $sh7 ENABLE TRIGGER $sg" \
    "DROP TRIGGER $sg ON $sh7" \
    "DROP TRIGGER zz_fencing_truncate ON $sh7" \
    "ALTER TABLE $sh7 DISABLE TRIGGER zz_fencing_truncate" \
    "ALTER TRIGGER $sg ON $sh7 RENAME TO a_guard" \
    "CREATE OR REPLACE TRIGGER $sg BEFORE INSERT OR UPDATE OR DELETE ON $sh7 FOR EACH ROW EXECUTE FUNCTION fencing.guard('citus:1', 'fence_column=fence', 'strict=off')" \
    "CREATE TRIGGER zzz_late BEFORE UPDATE ON $sh7 FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()" \
    "ALTER TABLE $sh7 DROP COLUMN fence" \
    "ALTER TABLE $sh7 ALTER COLUMN fence TYPE text" \
    "ALTER TABLE $sh7 RENAME COLUMN fence TO f2" \
    "ALTER TABLE $sh7 ALTER COLUMN fence SET DEFAULT '99:0'" \
    "ALTER TABLE $sh7 ALTER COLUMN balance TYPE bigint USING balance * 2"; do
    out=$(qerr "$n7" "SET citus.enable_manual_changes_to_shards = on" "$ddl")
    like "$out" 'ERROR:  SF005:' "SF005 on shard $sh7 on its worker: ${ddl:0:90}"
done
# run_command_on_placements() reaches the shards through Citus' connections
# too, but as a user's command: checked on every worker
out=$(q coord "SELECT count(*) FILTER (WHERE NOT success), count(*) FILTER (WHERE result LIKE '%cannot disable trigger%of protected table%')
               FROM run_command_on_placements('accounts', 'ALTER TABLE %s DISABLE TRIGGER ALL')")
is "$out" "4|4" "run_command_on_placements() disabling the guard: refused on every shard"
like "$(qerr "$n7" "SET citus.enable_manual_changes_to_shards = on" "ALTER TABLE $sh7 DISABLE TRIGGER $sg")" \
    "HINT:  Call fencing.unprotect\('public.accounts'\) on the coordinator first." "... the HINT names the distributed table"
out=$(qerr "$n7" "SET citus.enable_manual_changes_to_shards = on" "UPDATE $sh7 SET fence = '1:0' WHERE id = 7")
stale "$out" "after all that, a stale write to the shard is still refused"

# TRUNCATE
out=$(qerr coord "TRUNCATE accounts")
like "$out" 'ERROR:  SF002: cannot truncate protected table "accounts"' "TRUNCATE of the distributed table is refused (SF002)"
out=$(qerr "$n7" "SET citus.enable_manual_changes_to_shards = on" "TRUNCATE $sh7")
like "$out" "ERROR:  SF002: cannot truncate protected table \"$sh7\"" "TRUNCATE of a shard on its worker is refused (SF002)"
is "$(q coord "SELECT count(*) FROM accounts")" "44" "... 44 rows still"

# --- a distributed partitioned table: every partition's shards, and a
# partition created later
q coord "SET citus.shard_count = 4" \
    "CREATE TABLE events (id bigint, day date, v int, fence fencing.fence, PRIMARY KEY (id, day)) PARTITION BY RANGE (day)" \
    "CREATE TABLE events_jan PARTITION OF events FOR VALUES FROM ('2024-01-01') TO ('2024-02-01')" \
    "SELECT create_distributed_table('events', 'id', colocate_with => 'none')" \
    "INSERT INTO events VALUES (1, '2024-01-05', 0, '5:0'), (2, '2024-01-06', 0, '5:0')" >/dev/null
out=$(q coord "SELECT fencing.protect('events')" 2>&1)
is "$out" "" "protect() on a distributed partitioned table"
is "$(guard_census events_jan)" "4 4 4" "... every shard of its partition has both guards"
out=$(qerr coord "UPDATE events SET v = 1, fence = '4:0' WHERE id = 1")
like "$out" 'ERROR:  SF001: stale fence token 4:0 for table "events_jan_[0-9]+"' "partitioned: a stale write to a partition's shard is refused"
out=$(q coord "UPDATE events SET v = 1, fence = '6:0' WHERE id = 1" 2>&1)
is "$out" "" "partitioned: a fresh write is accepted"
out=$(qerr coord "CREATE TABLE events_feb PARTITION OF events FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')")
like "$out" 'ERROR:  55000: creating a partition of protected distributed table "events" needs citus.enable_unsafe_triggers' \
    "partitioned: a new partition needs citus.enable_unsafe_triggers, and says so"
q coord "SET citus.enable_unsafe_triggers = on" \
    "CREATE TABLE events_feb PARTITION OF events FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')" \
    "INSERT INTO events VALUES (3, '2024-02-03', 0, '5:0')" >/dev/null
is "$(guard_census events_feb)" "4 4 4" "partitioned: a partition created later has both guards on every shard"
out=$(qerr coord "UPDATE events SET v = 1, fence = '4:0' WHERE id = 3")
like "$out" 'ERROR:  SF001: stale fence token 4:0 for table "events_feb_[0-9]+"' "partitioned: a stale write to the new partition is refused"
out=$(qerr coord "TRUNCATE events_feb")
like "$out" 'ERROR:  SF002: cannot truncate' "partitioned: TRUNCATE of a partition is refused"
sf=$(q coord "SELECT shardid FROM pg_dist_shard WHERE logicalrelid = 'events_feb'::regclass ORDER BY shardid LIMIT 1")
out=$(qerr "$(node_name_by_port "$(node_of_shard "$sf")")" "SET citus.enable_manual_changes_to_shards = on" "TRUNCATE $(q coord "SELECT shard_name('events_feb', $sf)")")
like "$out" 'ERROR:  SF002: cannot truncate' "partitioned: TRUNCATE of a partition's shard on its worker is refused"
q coord "CREATE TABLE events_mar (LIKE events)" \
    "SELECT create_distributed_table('events_mar', 'id', colocate_with => 'events')" \
    "INSERT INTO events_mar VALUES (4, '2024-03-03', 0, '5:0')" >/dev/null
out=$(q coord "SET citus.enable_unsafe_triggers = on" "ALTER TABLE events ATTACH PARTITION events_mar FOR VALUES FROM ('2024-03-01') TO ('2024-04-01')" 2>&1)
is "$out" "" "partitioned: ATTACH PARTITION of a distributed table"
is "$(guard_census events_mar)" "4 4 4" "... its shards get both guards"
out=$(qerr coord "UPDATE events SET v = 1, fence = '4:0' WHERE id = 4")
like "$out" 'ERROR:  SF001: stale fence token 4:0 for table "events_mar_[0-9]+"' "partitioned: a stale write to the attached partition is refused"
is "$(q coord "SELECT count(*) FROM events")" "4" "partitioned: 4 rows"

# --- key scope: a ledger of accounts, its fences in storage co-located with
# its shards.  The ledger belongs to a role of its own (as an application's
# would), so that Citus moves it and the extension owner's storage by two
# logical replication streams.
q coord "CREATE ROLE app LOGIN" "GRANT CREATE ON SCHEMA public TO app" >/dev/null
# psql on a node as the application's role
qa() { local node=$1; shift; q "$node" "SET ROLE app" "$@"; }
qaerr() { local node=$1; shift; qerr "$node" "SET ROLE app" "$@"; }
# a stale write in key scope, relayed from a worker
stale_key() {
    local got=$1 key=$2 name=$3
    like "$got" 'ERROR:  SF001: stale fence token' "$name: SF001"
    like "$got" "DETAIL:  The scope \"public.ledger\" key \\[\"$key\"\\] has already accepted fence token" "$name: the DETAIL names the scope and key"
    like "$got" 'HINT:  The lock that issued token .* was lost' "$name: its HINT"
}
# a token equal to the key's fence (strict), relayed from a worker
used_key() {
    local got=$1 key=$2 name=$3
    like "$got" 'ERROR:  SF001: fence token [0-9]+:[0-9]+ for table "[a-z_0-9]+" was already used' "$name: SF001"
    like "$got" "DETAIL:  The scope \"public.ledger\" key \\[\"$key\"\\] has already accepted fence token" "$name: the DETAIL names the scope and key"
    like "$got" 'HINT:  A strict table accepts a token in one transaction only' "$name: its HINT"
}
qa coord "SET citus.shard_count = 4" \
    "CREATE TABLE ledger (acct bigint NOT NULL, id bigint NOT NULL, book text NOT NULL DEFAULT 'main',
                          amount int NOT NULL DEFAULT 0, fence fencing.fence, PRIMARY KEY (acct, id))" \
    "SELECT create_distributed_table('ledger', 'acct', colocate_with => 'none')" \
    "INSERT INTO ledger (acct, id, fence) SELECT g % 20, g, ('1:' || g)::fencing.fence FROM generate_series(1, 60) g" >/dev/null
out=$(qa coord "SELECT fencing.protect('ledger', key_columns => '{book,acct}')" 2>&1)
is "$out" "" "key scope (book, acct) on a distributed table, protect() by its owner"
storage=$(q coord "SELECT storage FROM fencing.scope_storage WHERE scope_name = 'public.ledger'")
is "$(q coord "SELECT s.colocationid = l.colocationid, column_to_column_name(s.logicalrelid, s.partkey)
               FROM pg_dist_partition s, pg_dist_partition l
               WHERE s.logicalrelid = '$storage'::regclass AND l.logicalrelid = 'ledger'::regclass")" "t|key_2" \
    "its storage $storage is distributed co-located with the ledger, by key_2 (acct)"
is "$(q coord "SELECT count(*), count(*) FILTER (WHERE result = 'f') FROM run_command_on_placements('$storage',
               \$\$SELECT relreplident FROM pg_class WHERE oid = '%s'::regclass\$\$)")" "4|4" \
    "... 4 storage shards, each REPLICA IDENTITY FULL (logical replication moves them)"
is "$(q coord "SELECT count(*), fencing.max(fence) FILTER (WHERE key = fencing.scope_key('main', '7')) FROM fencing.scopes WHERE scope_name = 'public.ledger'")" \
    "20|1:47" "protect() seeded the 20 keys from the rows on the shards, each with its highest fence"
is "$(guard_census ledger)" "4 4 4" "every ledger shard has both guards"
like "$(q coord "SELECT string_agg(DISTINCT encode(tgargs, 'escape'), ' ') FROM pg_trigger WHERE tgrelid = 'ledger'::regclass AND tgname = 'zz_fencing_guard'")" \
    'key=book.*key=acct.*scope=public\.ledger.*storage=scope_' "the guard carries its key columns, scope and storage to every shard"

# routed INSERT: a new row of a key already fenced
out=$(qaerr coord "INSERT INTO ledger (acct, id, amount, fence) VALUES (7, 1001, 5, '1:46')")
stale_key "$out" 'main","7' "key scope: routed INSERT with a token older than the key's fence"
out=$(qa coord "INSERT INTO ledger (acct, id, amount, fence) VALUES (7, 1001, 5, '2:0')" 2>&1)
is "$out" "" "key scope: routed INSERT with a fresh token is accepted"
is "$(q coord "SELECT count(*) FROM ledger WHERE acct = 7")" "4" "... account 7 has 4 rows"
# routed UPDATE of another row of the same key: the key's fence, not the row's
out=$(qaerr coord "UPDATE ledger SET amount = 99, fence = '1:99' WHERE acct = 7 AND id = 7")
stale_key "$out" 'main","7' "key scope: routed UPDATE of a row whose own fence is older than the token, the key's newer"
out=$(qa coord "UPDATE ledger SET amount = 9, fence = '2:1' WHERE acct = 7 AND id = 7" 2>&1)
is "$out" "" "key scope: routed UPDATE with a fresh token is accepted"
# routed DELETE, the token in SET LOCAL
out=$(qaerr coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '2:0'" "DELETE FROM ledger WHERE acct = 7 AND id = 27" "COMMIT")
stale_key "$out" 'main","7' "key scope: routed DELETE with a stale SET LOCAL fencing.token"
out=$(qa coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '2:2'" "DELETE FROM ledger WHERE acct = 7 AND id = 27" "COMMIT" 2>&1)
is "$out" "" "key scope: routed DELETE with a fresh token is accepted"
is "$(q coord "SELECT count(*), sum(amount) FROM ledger WHERE acct = 7")" "3|14" "... account 7: 3 rows, only the accepted writes"
is "$(q coord "SELECT fence FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key = fencing.scope_key('main', '7')")" \
    "2:2" "... its fence is the last accepted token, on the worker's storage shard"

# the first write of a new key, and a stale one after it
out=$(qa coord "INSERT INTO ledger (acct, id, book, fence) VALUES (100, 1, 'new', '7:0')" 2>&1)
is "$out" "" "key scope: the first write of a new key is accepted"
out=$(qaerr coord "INSERT INTO ledger (acct, id, book, fence) VALUES (100, 2, 'new', '6:0')")
stale_key "$out" 'new","100' "key scope: a second write of the new key with an older token"
is "$(q coord "SELECT count(*) FROM ledger WHERE acct = 100")" "1" "... one row for the new key"

# multi-shard UPDATE: one key whose fence is newer refuses the whole statement
qa coord "UPDATE ledger SET fence = '30:0' WHERE acct = 3 AND id = 3" >/dev/null
out=$(qaerr coord "UPDATE ledger SET amount = amount + 1000, fence = '25:0'")
stale_key "$out" 'main","3' "key scope: multi-shard UPDATE with a token older than one key's fence"
is "$(q coord "SELECT count(*) FROM ledger WHERE amount >= 1000")" "0" "... no row of any shard changed"
out=$(qa coord "UPDATE ledger SET amount = amount + 1000, fence = '31:0'" 2>&1)
is "$out" "" "key scope: multi-shard UPDATE with a fresh token is accepted"
is "$(q coord "SELECT count(*), count(*) FILTER (WHERE amount >= 1000 AND fence::text = '31:0') FROM ledger")" "61|61" \
    "... on all 61 rows"
is "$(q coord "SELECT count(*) FILTER (WHERE fence::text = '31:0'), count(*) FROM fencing.scopes WHERE scope_name = 'public.ledger'")" \
    "21|21" "... and every key's fence, on every storage shard, is 31:0"

# INSERT ... ON CONFLICT DO UPDATE
out=$(qaerr coord "INSERT INTO ledger (acct, id, amount, fence) VALUES (5, 5, 1, '30:5') ON CONFLICT (acct, id) DO UPDATE SET amount = EXCLUDED.amount, fence = EXCLUDED.fence")
stale_key "$out" 'main","5' "key scope: INSERT ... ON CONFLICT DO UPDATE with a stale token"
out=$(qa coord "INSERT INTO ledger (acct, id, amount, fence) VALUES (5, 5, 1, '32:5') ON CONFLICT (acct, id) DO UPDATE SET amount = EXCLUDED.amount, fence = EXCLUDED.fence" 2>&1)
is "$out" "" "key scope: INSERT ... ON CONFLICT DO UPDATE with a fresh token is accepted"
is "$(q coord "SELECT amount, fence FROM ledger WHERE acct = 5 AND id = 5")" "1|32:5" "... the row took it"

# COPY
printf '9,2001,main,1,\n9,2002,main,2,\n' >"$FENCING_WORK/kcopy.csv"
chmod a+r "$FENCING_WORK/kcopy.csv"
out=$(qaerr coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '20:0'" \
    "\\copy ledger (acct, id, book, amount, fence) FROM '$FENCING_WORK/kcopy.csv' WITH (FORMAT csv)" "COMMIT")
# Citus' COPY relays the worker's message and DETAIL, not its SQLSTATE or HINT
like "$out" 'ERROR:  (SF001|XX000): stale fence token 20:0 for table "ledger_[0-9]+"' "key scope: COPY with a stale token is refused on the worker (Citus relays it as XX000)"
like "$out" 'DETAIL:  The scope "public.ledger" key \["main","9"\] has already accepted fence token 31:0' "... the DETAIL relayed"
out=$(qa coord "$COORD_TOKEN" "BEGIN" "SET LOCAL fencing.token = '40:0'" \
    "\\copy ledger (acct, id, book, amount, fence) FROM '$FENCING_WORK/kcopy.csv' WITH (FORMAT csv)" "COMMIT" 2>&1)
is "$out" "" "key scope: COPY with a fresh token is accepted"
is "$(q coord "SELECT count(*), count(*) FILTER (WHERE fence::text = '40:0') FROM ledger WHERE acct = 9")" "5|2" \
    "... account 9: 5 rows, the 2 copied ones with the token"

# a write sent to a shard directly, on its worker
k4=$(shard_of ledger 4)
nk4=$(node_name_by_port "$(node_of_shard "$k4")")
shk4=$(q coord "SELECT shard_name('ledger', $k4)")
out=$(qaerr "$nk4" "SET citus.enable_manual_changes_to_shards = on" "INSERT INTO $shk4 (acct, id, fence) VALUES (4, 3001, '31:0')")
used_key "$out" 'main","4' "key scope: INSERT sent directly to shard $shk4 on its worker, equal token (strict)"
out=$(qa "$nk4" "SET citus.enable_manual_changes_to_shards = on" "INSERT INTO $shk4 (acct, id, fence) VALUES (4, 3001, '41:0')" 2>&1)
is "$out" "" "... fresh, accepted"
is "$(q coord "SELECT count(*), fencing.max(fence) FROM ledger WHERE acct = 4")" "4|41:0" "... the coordinator sees it"
# the storage shards: the extension owner's, read-only to everyone else
sk4=$(q coord "SELECT s.shardid FROM pg_dist_shard s, pg_dist_shard l WHERE l.shardid = $k4
               AND s.logicalrelid = '$storage'::regclass AND s.shardminvalue = l.shardminvalue")
out=$(qaerr "$nk4" "SET citus.enable_manual_changes_to_shards = on" "UPDATE $(q coord "SELECT shard_name('$storage', $sk4)") SET fence = '0:0'")
like "$out" 'ERROR:  42501: permission denied for table scope_' "the co-located storage shard on the worker: the application cannot lower a fence there"
for ddl in "ALTER TABLE $shk4 RENAME COLUMN book TO b2" "ALTER TABLE $shk4 DROP COLUMN acct CASCADE" "ALTER TABLE $shk4 ALTER COLUMN book TYPE varchar(10)"; do
    out=$(qaerr "$nk4" "SET citus.enable_manual_changes_to_shards = on" "$ddl")
    like "$out" 'ERROR:  SF005: cannot .* column "(book|acct)" of protected table "ledger_[0-9]+"' "SF005 on shard $shk4: ${ddl:0:60}"
    like "$out" 'DETAIL:  Table "ledger_[0-9]+" \(a shard of distributed table "ledger"\) is protected by fencing: column "(book|acct)" is a key column of its fence scope' "... the DETAIL says why"
done

# two coordinator sessions racing on one key: the first takes it in an open
# transaction, the second blocks on it on the worker, the first commits
race_key() {
    # race_key TOKEN1 SQL1 TOKEN2 SQL2 WAITING: prints waited=N, both outputs
    local t1=$1 s1=$2 t2=$3 s2=$4 waiting=$5 dir=$FENCING_WORK/race
    rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$dir"
    mkfifo "$dir/a.in"; chown postgres: "$dir/a.in"
    (fencing_as_postgres psql -X -q -At -h 127.0.0.1 -p "${PORT[coord]}" -d postgres \
        -v VERBOSITY=verbose <"$dir/a.in" >"$dir/a.out" 2>&1) &
    local apid=$!
    exec 7>"$dir/a.in"
    printf "SET ROLE app;\n%s;\nBEGIN;\nSET LOCAL fencing.token = '%s';\n%s;\n\\\\! touch %s/a.locked\n" \
        "$COORD_TOKEN" "$t1" "$s1" "$dir" >&7
    local i
    for i in $(seq 600); do [ -e "$dir/a.locked" ] && break; sleep 0.1; done
    (qa coord "$COORD_TOKEN" '\set VERBOSITY verbose' "BEGIN" "SET LOCAL fencing.token = '$t2'" \
        "$s2" "COMMIT" >"$dir/b.out" 2>&1) &
    local bpid=$!
    local w=0
    for i in $(seq 600); do
        for node in w1 w2; do
            w=$(q $node "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '$waiting%'")
            [ "$w" -gt 0 ] && break 2
        done
        sleep 0.1
    done
    printf 'COMMIT;\n' >&7
    exec 7>&-
    wait $apid $bpid
    echo "waited=$w"
    cat "$dir/a.out" "$dir/b.out"
}
out=$(race_key 50:2 "UPDATE ledger SET amount = amount + 1 WHERE acct = 11 AND id = 11" \
               50:1 "UPDATE ledger SET amount = amount + 10 WHERE acct = 11 AND id = 31" UPDATE)
like "$out" "waited=1" "key race: the older token's UPDATE of another row of the key waited on the worker"
stale_key "$out" 'main","11' "key race: the newer token commits first, the blocked older one"
is "$(q coord "SELECT fence FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key = fencing.scope_key('main', '11')")|$(q coord "SELECT sum(amount) FROM ledger WHERE acct = 11")" \
    "50:2|3001" "key race: exactly one of the two ordered tokens won: 50:2, one write"
out=$(race_key 60:2 "INSERT INTO ledger (acct, id, book) VALUES (500, 1, 'fresh')" \
               60:1 "INSERT INTO ledger (acct, id, book) VALUES (500, 2, 'fresh')" INSERT)
like "$out" "waited=1" "key race on a brand-new key: the second insert waited for the first's on the worker"
stale_key "$out" 'fresh","500' "key race on a brand-new key: newer first, the older refused"
is "$(q coord "SELECT count(*), fencing.max(fence) FROM ledger WHERE acct = 500")|$(q coord "SELECT fence FROM fencing.scopes WHERE key = fencing.scope_key('fresh', '500')")" \
    "1|60:2|60:2" "key race on a brand-new key: one row, one fence, 60:2"
out=$(race_key 61:0 "INSERT INTO ledger (acct, id, book) VALUES (501, 1, 'fresh')" \
               61:0 "INSERT INTO ledger (acct, id, book) VALUES (501, 2, 'fresh')" INSERT)
used_key "$out" 'fresh","501' "key race on a brand-new key, the same token in two transactions: the second refused (strict)"
is "$(q coord "SELECT count(*) FROM ledger WHERE acct = 501")" "1" "... one row"

# a second table shares the scope: co-located, the distribution column at
# the same position of its key columns
qa coord "CREATE TABLE ledger_lines (line bigint, book text, acct bigint, fence fencing.fence, PRIMARY KEY (acct, line))" \
    "SELECT create_distributed_table('ledger_lines', 'acct', colocate_with => 'ledger')" >/dev/null
out=$(qa coord "SELECT fencing.protect('ledger_lines', key_columns => '{book,acct}', scope_name => 'public.ledger')" 2>&1)
is "$out" "" "a co-located table joins the scope"
out=$(qaerr coord "INSERT INTO ledger_lines VALUES (1, 'main', 11, '50:1')")
stale_key "$out" 'main","11' "shared scope: the joining table's write with a token older than the ledger's"
out=$(qa coord "INSERT INTO ledger_lines VALUES (1, 'main', 11, '70:0')" 2>&1)
is "$out" "" "shared scope: a fresh one is accepted"
out=$(qaerr coord "UPDATE ledger SET amount = 0, fence = '69:0' WHERE acct = 11 AND id = 11")
stale_key "$out" 'main","11' "shared scope: the ledger is fenced by the joining table's write"
is "$(q coord "SELECT (SELECT count(*) FROM ledger_lines), (SELECT sum(amount) FROM ledger WHERE acct = 11)")" "1|3001" "... 1 line, the ledger unchanged"

# what cannot join, each refused with 0A000 naming what works
qa coord "CREATE TABLE other_ledger (acct bigint, book text, fence fencing.fence)" \
    "SELECT create_distributed_table('other_ledger', 'acct', colocate_with => 'none')" \
    "CREATE TABLE swapped (acct bigint, book text, fence fencing.fence)" \
    "SELECT create_distributed_table('swapped', 'acct', colocate_with => 'ledger')" \
    "CREATE TABLE single (acct bigint, book text, fence fencing.fence)" \
    "SELECT create_distributed_table('single', NULL)" >/dev/null
out=$(qaerr coord "SELECT fencing.protect('other_ledger', key_columns => '{book,acct}', scope_name => 'public.ledger')")
like "$out" 'ERROR:  0A000: fencing scope "public.ledger" cannot be shared by tables' "a table not co-located with the scope's tables: 0A000"
like "$out" "HINT:  Distribute both tables co-located \\(create_distributed_table\\(..., colocate_with => 'public.ledger" "... the HINT names what works"
out=$(qaerr coord "SELECT fencing.protect('swapped', key_columns => '{acct,book}', scope_name => 'public.ledger')")
like "$out" 'ERROR:  0A000: fencing scope "public.ledger" cannot hold on distributed table "swapped"' "co-located, but the distribution column at another key position: 0A000"
like "$out" 'HINT:  List the key columns so that the distribution column "acct" comes at position 2' "... the HINT names what works"
out=$(qaerr coord "SELECT fencing.protect('single', key_columns => '{acct}')")
like "$out" 'ERROR:  0A000: key scope cannot hold on distributed table "single"' "key scope on a single-shard table: 0A000"
like "$out" 'HINT:  Use row scope \(key_columns => NULL\), or distribute the table by hash' "... the HINT names what works"
is "$(q coord "SELECT string_agg(relid::text, ',' ORDER BY relid::text) FROM fencing.protected WHERE scope_name = 'public.ledger'")" \
    "ledger,ledger_lines" "after the refusals the scope has its two tables"
# (swapped has no replica identity, which would stop the moves below)
qa coord "DROP TABLE other_ledger, swapped, single" >/dev/null

# key scope on a distributed partitioned table: the partitions' shards find
# the storage shard of their hash range; a partition created later too
qa coord "SET citus.shard_count = 4" \
    "CREATE TABLE postings (acct bigint, day date, v int, fence fencing.fence, PRIMARY KEY (acct, day)) PARTITION BY RANGE (day)" \
    "CREATE TABLE postings_jan PARTITION OF postings FOR VALUES FROM ('2024-01-01') TO ('2024-02-01')" \
    "SELECT create_distributed_table('postings', 'acct', colocate_with => 'none')" \
    "INSERT INTO postings VALUES (1, '2024-01-05', 0, '5:0'), (2, '2024-01-06', 0, '5:0')" >/dev/null
out=$(qa coord "SELECT fencing.protect('postings', key_columns => '{acct}')" 2>&1)
is "$out" "" "key scope on a distributed partitioned table"
out=$(qaerr coord "INSERT INTO postings VALUES (1, '2024-01-07', 0, '4:0')")
like "$out" 'ERROR:  SF001: stale fence token 4:0 for table "postings_jan_[0-9]+"' "partitioned key scope: a stale insert into a partition's shard"
like "$out" 'DETAIL:  The scope "public.postings" key \["1"\] has already accepted fence token 5:0' "... against the key's seeded fence"
out=$(qa coord "SET citus.enable_unsafe_triggers = on" \
    "CREATE TABLE postings_feb PARTITION OF postings FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')" \
    "INSERT INTO postings VALUES (1, '2024-02-07', 0, '6:0')" 2>&1)
is "$out" "" "partitioned key scope: a partition created later, a fresh write into it"
out=$(qaerr coord "INSERT INTO postings VALUES (1, '2024-01-08', 0, '5:9')")
like "$out" 'DETAIL:  The scope "public.postings" key \["1"\] has already accepted fence token 6:0' "... fences the key in the other partition too"
is "$(q coord "SELECT count(*) FROM postings")" "3" "partitioned key scope: 3 rows"

# --- seeding sees every committed row: protect() of a distributed table in
# key scope while a writer's open transaction, on a shard directly, holds a
# row with fence 0:50.  protect()'s trigger DDL waits on the worker for the
# writer; at READ COMMITTED the worker then reads the shard with a snapshot
# taken after that lock, so the row's fence is seeded and an older token is
# refused.  At REPEATABLE READ the worker's snapshot predates the lock:
# seeding refuses (0A000) and writes nothing.
qa coord "SET citus.shard_count = 4" \
    "CREATE TABLE deposits (acct bigint NOT NULL, id bigint NOT NULL, amount int NOT NULL DEFAULT 0, fence fencing.fence, PRIMARY KEY (acct, id))" \
    "SELECT create_distributed_table('deposits', 'acct', colocate_with => 'none')" \
    "INSERT INTO deposits (acct, id, fence) VALUES (1, 1, '0:10')" >/dev/null
seed_race() {
    # seed_race LEVEL ACCT: prints waited=N, the writer's and protect()'s output
    local level=$1 acct=$2 dir=$FENCING_WORK/seed
    local shard node
    shard=$(q coord "SELECT shard_name('deposits', get_shard_id_for_distribution_column('deposits', $acct))")
    node=$(node_name_by_port "$(node_of_shard "$(shard_of deposits "$acct")")")
    rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$dir"
    mkfifo "$dir/a.in"; chown postgres: "$dir/a.in"
    (fencing_as_postgres psql -X -q -At -h 127.0.0.1 -p "${PORT[$node]}" -d postgres \
        -v VERBOSITY=verbose <"$dir/a.in" >"$dir/a.out" 2>&1) &
    local apid=$!
    exec 7>"$dir/a.in"
    printf "SET ROLE app;\nSET citus.enable_manual_changes_to_shards = on;\nBEGIN;\nINSERT INTO %s (acct, id, fence) VALUES (%s, 1, '0:50');\n\\\\! touch %s/a.locked\n" \
        "$shard" "$acct" "$dir" >&7
    local i
    for i in $(seq 600); do [ -e "$dir/a.locked" ] && break; sleep 0.1; done
    (qa coord '\set VERBOSITY verbose' "BEGIN ISOLATION LEVEL $level" \
        "SELECT fencing.protect('deposits', key_columns => '{acct}')" "COMMIT" >"$dir/b.out" 2>&1) &
    local bpid=$!
    # wait until protect()'s trigger DDL waits for the writer on its node
    local w=0
    for i in $(seq 600); do
        w=$(q "$node" "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND backend_type = 'client backend'")
        [ "$w" -gt 0 ] && break
        sleep 0.1
    done
    printf 'COMMIT;\n' >&7
    exec 7>&-
    wait $apid $bpid
    echo "waited=$w"
    cat "$dir/a.out" "$dir/b.out"
}
out=$(seed_race "REPEATABLE READ" 5)
like "$out" "waited=1" "seeding: protect() at REPEATABLE READ waited on the worker for the shard's writer"
like "$out" 'ERROR:  0A000: cannot seed the fences of distributed scope "public.deposits" under REPEATABLE READ or SERIALIZABLE' \
    "... and refuses to seed from a snapshot older than the writer's commit"
like "$out" 'HINT:  Run it in a READ COMMITTED transaction.' "... the HINT says what works"
is "$(q coord "SELECT count(*) FROM fencing.protected WHERE relid = 'deposits'::regclass")|$(guard_census deposits)" \
    "0|4 0 0" "... and leaves nothing behind: not protected, no guard on any shard"
out=$(seed_race "READ COMMITTED" 6)
like "$out" "waited=1" "seeding: protect() at READ COMMITTED waited on the worker for the shard's writer"
is "$(q coord "SELECT count(*) FROM fencing.protected WHERE relid = 'deposits'::regclass")|$(guard_census deposits)" \
    "1|4 4 4" "... and protected the table"
is "$(q coord "SELECT string_agg(key || '=' || fence::text, ' ' ORDER BY key) FROM fencing.scopes WHERE scope_name = 'public.deposits'")" \
    '["1"]=0:10 ["5"]=0:50 ["6"]=0:50' "... seeding every committed row, the one committed while it waited too"
out=$(qaerr coord "UPDATE deposits SET amount = 1, fence = '0:20' WHERE acct = 6")
like "$out" 'ERROR:  SF001: stale fence token 0:20' "seeding: an older token than the waited-for row's is refused: SF001"
like "$out" 'DETAIL:  The scope "public.deposits" key \["6"\] has already accepted fence token 0:50' "... against the seeded fence"
out=$(qa coord "UPDATE deposits SET amount = 2, fence = '0:60' WHERE acct = 6" 2>&1)
is "$out" "" "... a newer one is accepted"
qa coord "DROP TABLE deposits" >/dev/null
q coord "SELECT fencing.reset_scope('public.deposits')" >/dev/null

# --- shards that move, split, or land on a new node
old_node=$n7
new_node=$([ "$old_node" = w1 ] && echo w2 || echo w1)
out=$(q coord "SELECT citus_move_shard_placement($s7, '127.0.0.1', ${PORT[$old_node]}, '127.0.0.1', ${PORT[$new_node]})" 2>&1)
is "$out" "" "citus_move_shard_placement of shard $s7 from $old_node to $new_node"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
is "$(node_name_by_port "$(node_of_shard "$s7")")" "$new_node" "... the shard is on $new_node"
is "$(guard_census accounts)" "4 4 4" "... the moved shard has both guards"
out=$(qerr coord "UPDATE accounts SET balance = 0, fence = '50:6' WHERE id = 7")
stale "$out" "after the move, a stale write is refused"
like "$out" "while executing command on 127.0.0.1:${PORT[$new_node]}" "... by the new node"
out=$(q coord "UPDATE accounts SET balance = 8, fence = '51:0' WHERE id = 7" 2>&1)
is "$out" "" "after the move, a fresh write is accepted"
out=$(qerr "$new_node" "SET citus.enable_manual_changes_to_shards = on" "TRUNCATE $sh7")
like "$out" 'ERROR:  SF002: cannot truncate' "after the move, TRUNCATE of the shard on its new node is refused"
out=$(qerr "$new_node" "SET citus.enable_manual_changes_to_shards = on" "ALTER TABLE $sh7 DISABLE TRIGGER $sg")
like "$out" 'ERROR:  SF005:' "after the move, disabling its guard on the new node is refused"

# split the shard of row 11 in two, one half on each worker
s11=$(shard_of accounts 11)
mid=$(q coord "SELECT (shardminvalue::bigint + shardmaxvalue::bigint) / 2 FROM pg_dist_shard WHERE shardid = $s11")
out=$(q coord "SELECT citus_split_shard_by_split_points($s11, ARRAY['$mid'], ARRAY[(SELECT nodeid FROM pg_dist_node WHERE nodeport = ${PORT[w1]}), (SELECT nodeid FROM pg_dist_node WHERE nodeport = ${PORT[w2]})])" 2>&1)
is "$out" "" "citus_split_shard_by_split_points of shard $s11"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
is "$(guard_census accounts)" "5 5 5" "... 5 shards, all guarded"
s11b=$(shard_of accounts 11)
[ "$s11b" != "$s11" ]
ok $? "... row 11 is in a new shard ($s11b)"
out=$(qerr coord "UPDATE accounts SET balance = 0, fence = '10:11' WHERE id = 11")
stale "$out" "after the split, a stale write is refused"
out=$(q coord "UPDATE accounts SET balance = 11, fence = '60:11' WHERE id = 11" 2>&1)
is "$out" "" "after the split, a fresh write is accepted"
n11=$(node_name_by_port "$(node_of_shard "$s11b")")
out=$(qerr "$n11" "SET citus.enable_manual_changes_to_shards = on" "TRUNCATE $(q coord "SELECT shard_name('accounts', $s11b)")")
like "$out" 'ERROR:  SF002: cannot truncate' "after the split, TRUNCATE of the new shard is refused"

# a new node and a rebalance
q coord "SELECT citus_add_node('127.0.0.1', ${PORT[w3]})" >/dev/null
newest=$(sed -n "s/^default_version *= *'\\(.*\\)'.*/\\1/p" "$FENCING_ROOT/fencing.control")
like "$(q w3 "SELECT extversion FROM pg_extension WHERE extname = 'fencing'")" "^$newest\$" "a node added later gets the extension"
out=$(q coord "SELECT rebalance_table_shards('accounts')" 2>&1)
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
on_w3=$(q coord "SELECT count(*) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'accounts'::regclass AND nodeport = ${PORT[w3]}")
[ "$on_w3" -gt 0 ]
ok $? "rebalance_table_shards moved $on_w3 shard(s) onto the new node"
is "$(guard_census accounts)" "5 5 5" "... every shard guarded"
id3=$(q coord "SELECT id FROM accounts WHERE get_shard_id_for_distribution_column('accounts', id) IN
        (SELECT shardid FROM pg_dist_shard_placement WHERE nodeport = ${PORT[w3]}) ORDER BY id LIMIT 1")
f3=$(q coord "SELECT fence FROM accounts WHERE id = $id3")
out=$(qerr coord "UPDATE accounts SET balance = 0, fence = '9:0' WHERE id = $id3")
stale "$out" "on the new node (row $id3, fence $f3), a stale write is refused"
like "$out" "while executing command on 127.0.0.1:${PORT[w3]}" "... by the new node"
out=$(q coord "UPDATE accounts SET balance = 3, fence = '70:0' WHERE id = $id3" 2>&1)
is "$out" "" "on the new node, a fresh write is accepted"
s3=$(shard_of accounts "$id3")
out=$(qerr w3 "SET citus.enable_manual_changes_to_shards = on" "UPDATE $(q coord "SELECT shard_name('accounts', $s3)") SET fence = '69:0' WHERE id = $id3")
stale "$out" "on the new node, a stale write sent to the shard directly is refused"
is "$(q coord "SELECT count(*), count(*) FILTER (WHERE fence IS NULL) FROM accounts")" "44|0" "44 rows, every one fenced"

# --- key scope: the fences move with their keys
# a move of the shard of account 1 while a writer adds new keys to it
k1=$(shard_of ledger 1)
from=$(node_name_by_port "$(node_of_shard "$k1")")
to=$([ "$from" = w1 ] && echo w2 || echo w1)
printf 'SET ROLE app;\n' >"$FENCING_WORK/writer.sql"
for i in $(seq 1 1500); do
    printf "INSERT INTO ledger (acct, id, book, fence) VALUES (1, %d, 'w%d', '80:%d');\n" $((10000 + i)) $((i % 50)) "$i"
done >>"$FENCING_WORK/writer.sql"
chmod a+r "$FENCING_WORK/writer.sql"
(fencing_as_postgres psql -X -q -h 127.0.0.1 -p "${PORT[coord]}" -d postgres -f "$FENCING_WORK/writer.sql" \
    >"$FENCING_WORK/writer.out" 2>&1) &
wpid=$!
for i in $(seq 100); do [ "$(q coord "SELECT count(*) FROM ledger WHERE id > 10000")" -gt 50 ] && break; sleep 0.1; done
out=$(q coord "SELECT citus_move_shard_placement($k1, '127.0.0.1', ${PORT[$from]}, '127.0.0.1', ${PORT[$to]})" 2>&1)
is "$out" "" "key scope: citus_move_shard_placement of ledger shard $k1 ($from to $to) while a writer adds keys to it"
wait $wpid
is "$(grep -c ERROR "$FENCING_WORK/writer.out")" "0" "... every write of the writer was accepted"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
is "$(node_name_by_port "$(node_of_shard "$k1")")" "$to" "... the shard is on $to"
# every ledger shard's co-located storage shard is on the same node
colocated_census() {
    q coord "SELECT count(*), count(*) FILTER (WHERE lp.groupid = sp.groupid)
             FROM pg_dist_shard l JOIN pg_dist_placement lp USING (shardid)
             JOIN pg_dist_shard s ON s.logicalrelid = '$storage'::regclass
                  AND s.shardminvalue = l.shardminvalue AND s.shardmaxvalue = l.shardmaxvalue
             JOIN pg_dist_placement sp ON sp.shardid = s.shardid
             WHERE l.logicalrelid = 'ledger'::regclass" | tr '|' ' '
}
is "$(colocated_census)" "4 4" "... every storage shard is on the node of its ledger shard"
rows1=$(q coord "SELECT count(*) || ': ' || string_agg(book || '=' || f::text, ',' ORDER BY book)
                 FROM (SELECT book, fencing.max(fence) AS f FROM ledger WHERE acct = 1 GROUP BY book) l")
like "$rows1" '^51: ' "... account 1 has 51 keys"
is "$(q coord "SELECT count(*) || ': ' || string_agg((key::json->>0) || '=' || fence::text, ',' ORDER BY key::json->>0)
               FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key::json->>1 = '1'")" "$rows1" \
    "... and after the move each one's fence is its highest accepted token"
is "$(cat "$FENCING_WORK"/citus-*/server.log | grep -c 'duplicate key value violates unique constraint "scope_')" "0" \
    "... no replication of the move failed on a storage row"
out=$(qaerr coord "INSERT INTO ledger (acct, id, book, fence) VALUES (1, 20001, 'w7', '80:6')")
stale_key "$out" 'w7","1' "after the move, a stale insert of a key that moved"
like "$out" "while executing command on 127.0.0.1:${PORT[$to]}" "... refused by the new node $to"
out=$(qa coord "INSERT INTO ledger (acct, id, book, fence) VALUES (1, 20001, 'w7', '81:0')" 2>&1)
is "$out" "" "after the move, a fresh insert is accepted"
out=$(qaerr "$to" "SET citus.enable_manual_changes_to_shards = on" "UPDATE $(q coord "SELECT shard_name('ledger', $k1)") SET fence = '30:0' WHERE acct = 1 AND id = 1")
stale_key "$out" 'main","1' "after the move, a stale write sent to the shard on $to directly"

# a split of the shard of account 2: the storage shard splits with it
k2=$(shard_of ledger 2)
mid=$(q coord "SELECT (shardminvalue::bigint + shardmaxvalue::bigint) / 2 FROM pg_dist_shard WHERE shardid = $k2")
out=$(q coord "SELECT citus_split_shard_by_split_points($k2, ARRAY['$mid'], ARRAY[(SELECT nodeid FROM pg_dist_node WHERE nodeport = ${PORT[w1]}), (SELECT nodeid FROM pg_dist_node WHERE nodeport = ${PORT[w2]})])" 2>&1)
is "$out" "" "key scope: citus_split_shard_by_split_points of ledger shard $k2"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
is "$(colocated_census)" "5 5" "... 5 ledger shards, each with its storage shard on its node"
is "$(guard_census ledger)" "5 5 5" "... all guarded"
out=$(qaerr coord "UPDATE ledger SET amount = 0, fence = '30:9' WHERE acct = 2 AND id = 2")
stale_key "$out" 'main","2' "after the split, a stale write of account 2"
out=$(qa coord "UPDATE ledger SET amount = 2, fence = '82:0' WHERE acct = 2 AND id = 2" 2>&1)
is "$out" "" "after the split, a fresh write is accepted"

# the node w3 joined above: rebalance the ledger onto it
out=$(q coord "SELECT rebalance_table_shards('ledger')" 2>&1)
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
on_w3=$(q coord "SELECT count(*) FROM pg_dist_shard_placement JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'ledger'::regclass AND nodeport = ${PORT[w3]}")
[ "$on_w3" -gt 0 ]
ok $? "key scope: rebalance_table_shards('ledger') moved $on_w3 shard(s) onto the new node"
is "$(colocated_census)" "5 5" "... with their storage shards"
acct3=$(q coord "SELECT acct FROM ledger WHERE get_shard_id_for_distribution_column('ledger', acct) IN
        (SELECT shardid FROM pg_dist_shard_placement WHERE nodeport = ${PORT[w3]}) AND book = 'main' ORDER BY acct LIMIT 1")
f3=$(q coord "SELECT fence FROM fencing.scopes WHERE scope_name = 'public.ledger' AND key = fencing.scope_key('main', '$acct3')")
out=$(qaerr coord "INSERT INTO ledger (acct, id, fence) VALUES ($acct3, 30001, '$f3')")
used_key "$out" "main\",\"$acct3" "on the new node, an insert of account $acct3 with its own fence $f3 (which moved with it)"
like "$out" "while executing command on 127.0.0.1:${PORT[w3]}" "... refused by the new node"
out=$(qa coord "INSERT INTO ledger (acct, id, fence) VALUES ($acct3, 30001, '90:0')" 2>&1)
is "$out" "" "on the new node, a fresh insert is accepted"
# --- key scope: a transfer whose stream of fences falls behind its rows'
# Citus moves and splits a table and its scope's storage by one stream per
# table owner, and counts as caught up a subscription whose apply worker is
# not running (its latest_end_lsn is NULL).  Here the storage shard on the
# new node refuses the stream of fences (a CHECK constraint on it, as a
# late or failing apply worker would) while writes fall into each phase of
# the transfer, held at Citus' own hooks for isolation tests (with
# citus.running_under_citus_test_suite, the transfer takes advisory lock
# (55152, 44000) before it copies, and (44000, 55152) after the catch-up,
# before it blocks writes); the fences are let through once the transfer
# waits for them, and must all be there after it.
tdir=$FENCING_WORK/transfer
mkdir -p "$tdir" && chown postgres: "$tdir"
mkfifo "$tdir/hooks.in" "$tdir/transfer.in" && chown postgres: "$tdir"/*.in
# a psql session on the coordinator, fed through a fifo: its fd, then SQL
declare -a tpids=()
session_open() {
    local name=$1 fd=$2
    (fencing_as_postgres psql -X -q -At -h 127.0.0.1 -p "${PORT[coord]}" -d postgres \
        -v VERBOSITY=verbose <"$tdir/$name.in" >"$tdir/$name.out" 2>&1) &
    tpids+=($!)
    eval "exec $fd>\"$tdir/$name.in\""
}
hook_waiting() {
    q coord "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1 AND objid = $2 AND objsubid = 2"
}
# backends of the nodes waiting for a scope's fences to arrive
fences_awaited() {
    local node t=0
    for node in "$@"; do
        t=$((t + $(q "$node" "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'FencingScopeStream'
                              OR (wait_event_type = 'Extension' AND wait_event = 'Extension' AND backend_type NOT LIKE 'Citus%')")))
    done
    echo $t
}
# the storage shard NAME on NODE refuses fences from TOKEN on, or again takes them
hold_fences() {
    free_fences "$1" "$2"
    q "$1" "SET citus.enable_manual_changes_to_shards = on" \
        "ALTER TABLE $2 ADD CONSTRAINT fencing_test_hold CHECK (fence OPERATOR(fencing.<) '$3') NOT VALID" >/dev/null
}
free_fences() {
    q "$1" "SET citus.enable_manual_changes_to_shards = on" "ALTER TABLE $2 DROP CONSTRAINT IF EXISTS fencing_test_hold" >/dev/null 2>&1
}
# the storage shards that a split is filling on NODE (not in Citus' metadata yet)
split_storage() {
    q "$1" "SET citus.show_shards_for_app_name_prefixes = '*'" \
        "SELECT string_agg(DISTINCT r.srrelid::regclass::text, ' ') FROM pg_subscription_rel r JOIN pg_class c ON c.oid = r.srrelid
         WHERE c.relnamespace = 'fencing'::regnamespace AND c.relname ~ '^${storage#fencing.}_[0-9]+\$'
           AND NOT EXISTS (SELECT 1 FROM pg_dist_shard s WHERE s.shardid = substring(c.relname from '[0-9]+\$')::bigint)"
}
# does a transfer block writes (Citus' exclusive lock on the metadata of a
# shard, or of a shard index of a co-location group, which only a transfer
# takes, and only when it blocks writes)?
writes_blocked() {
    q coord "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid IN (4, 8)
             AND mode = 'ExclusiveLock' AND granted"
}
# run SQL as the application, with a token propagated to the workers
qt() { qa coord "$COORD_TOKEN" "$@"; }
# account 5's key fences and the stale writes after a transfer
fences_of() {
    q coord "SELECT string_agg((key::json->>0) || '=' || fence::text, ',' ORDER BY key::json->>0) FROM fencing.scopes
             WHERE scope_name = 'public.ledger' AND key::json->>1 = '5' AND key::json->>0 LIKE '$1%'"
}
ma=5
mshard=$(shard_of ledger $ma)
mfrom=$(node_name_by_port "$(node_of_shard "$mshard")")
mto=$(for node in w1 w2 w3; do [ "$node" != "$mfrom" ] && echo $node; done | head -1)
msk=$(q coord "SELECT s.shardid FROM pg_dist_shard s, pg_dist_shard l WHERE l.shardid = $mshard
               AND s.logicalrelid = '$storage'::regclass AND s.shardminvalue = l.shardminvalue")
mstorage=$(q coord "SELECT shard_name('$storage', $msk)")
session_open hooks 8
printf 'SELECT pg_advisory_lock(55152, 44000);\nSELECT pg_advisory_lock(44000, 55152);\n\\! touch %s/hooks.held\n' "$tdir" >&8
for i in $(seq 600); do [ -e "$tdir/hooks.held" ] && break; sleep 0.1; done
session_open transfer 9
printf "SET citus.running_under_citus_test_suite = on;\nSELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s);\n\\\\! touch %s/transfer.done\n" \
    "$mshard" "${PORT[$mfrom]}" "${PORT[$mto]}" "$tdir" >&9
for i in $(seq 600); do [ "$(hook_waiting 55152 44000)" = 1 ] && break; sleep 0.1; done
# 1. the slot is made, the copy not yet: new keys, and a DELETE whose token
# only the fences carry
out=$(qt "INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 40000 + g, 'mv' || g % 3, ('95:' || g)::fencing.fence FROM generate_series(1, 6) g" \
    "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40101, 'mvd', '95:1')" \
    "BEGIN" "SET LOCAL fencing.token = '95:50'" "DELETE FROM ledger WHERE acct = $ma AND id = 40101" "COMMIT" 2>&1)
hold_fences "$mto" "$mstorage" 95:0
printf 'SELECT pg_advisory_unlock(55152, 44000);\n' >&8
# with the guard arriving on the new shard, the transfer waits for the fences
waited=
for i in $(seq 1200); do
    [ "$(hook_waiting 44000 55152)" = 1 ] && break
    [ "$(fences_awaited "$mto")" -gt 0 ] && { waited=1; free_fences "$mto" "$mstorage"; }
    sleep 0.1
done
ok "$([ -n "$waited" ] && echo 0 || echo 1)" "key scope move: the guard arrives on the new shard only after the fences of the writes replayed before it"
# 2. caught up, the guard on the new shard, writes not yet blocked: more
# writes, a key changed by an UPDATE, another DELETE with a token
hold_fences "$mto" "$mstorage" 95:0
out=$out$(qt "INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 40000 + g, 'mv' || g % 3, ('95:' || g)::fencing.fence FROM generate_series(7, 12) g" \
    "UPDATE ledger SET book = 'mv2', fence = '95:13' WHERE acct = $ma AND id = 40001" \
    "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40102, 'mve', '95:2')" \
    "BEGIN" "SET LOCAL fencing.token = '95:60'" "DELETE FROM ledger WHERE acct = $ma AND id = 40102" "COMMIT" 2>&1)
printf 'SELECT pg_advisory_unlock(44000, 55152);\n' >&8
# 3. writes blocked while the transfer catches up: it waits for the fences;
# a write sent now waits for the switch, and lands on the new node
waited=
for i in $(seq 1200); do
    [ -e "$tdir/transfer.done" ] && break
    if [ "$(fences_awaited "$mto")" -gt 0 ] && [ "$(writes_blocked)" -gt 0 ]; then
        waited=1
        (qt "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40013, 'mv0', '95:14')" >"$tdir/blocked.out" 2>&1) &
        bpid=$!
        for _ in $(seq 600); do
            [ "$(q coord "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO ledger%40013%'")" -gt 0 ] && break
            sleep 0.1
        done
        free_fences "$mto" "$mstorage"
        wait $bpid
        break
    fi
    sleep 0.1
done
ok "$([ -n "$waited" ] && echo 0 || echo 1)" "key scope move: the transfer, writes blocked, waits for the fences of the writes replayed after the guard arrived"
for i in $(seq 1200); do [ -e "$tdir/transfer.done" ] && break; sleep 0.1; done
exec 9>&-
free_fences "$mto" "$mstorage"
[ -z "$waited" ] && qt "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40013, 'mv0', '95:14')" >"$tdir/blocked.out" 2>&1
is "$(cat "$tdir/transfer.out")" "" "key scope: citus_move_shard_placement of ledger shard $mshard ($mfrom to $mto), writes in each of its phases"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
is "$out$(cat "$tdir/blocked.out")" "" "... every write accepted"
is "$(node_name_by_port "$(node_of_shard "$mshard")")" "$mto" "... the shard is on $mto"
is "$(q coord "SELECT count(*) FROM ledger WHERE acct = $ma AND id > 40000")" "13" "... with all 13 rows written during the move"
is "$(fences_of mv)" "mv0=95:14,mv1=95:13,mv2=95:13,mvd=95:50,mve=95:60" \
    "... and every key's fence is its highest accepted token, a DELETE's too"
for stale in "mvd:95:30" "mve:95:55" "mv1:95:12"; do
    out=$(qaerr coord "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 40201, '${stale%%:*}', '${stale#*:}')")
    stale_key "$out" "${stale%%:*}\",\"$ma" "after the move, a stale write of key ${stale%%:*} with ${stale#*:}"
done

# the same for a split, writes at its last catch-up, the new storage shards
# refusing the fences on both nodes
sk=$(shard_of ledger $ma)
smid=$(q coord "SELECT (shardminvalue::bigint + shardmaxvalue::bigint) / 2 FROM pg_dist_shard WHERE shardid = $sk")
rm -f "$tdir/transfer.done"
printf 'SELECT pg_advisory_lock(44000, 55152);\n\\! touch %s/hooks.held2\n' "$tdir" >&8
for i in $(seq 600); do [ -e "$tdir/hooks.held2" ] && break; sleep 0.1; done
session_open transfer 9
printf "SET citus.running_under_citus_test_suite = on;\nSELECT citus_split_shard_by_split_points(%s, ARRAY['%s'], ARRAY[(SELECT nodeid FROM pg_dist_node WHERE nodeport = %s), (SELECT nodeid FROM pg_dist_node WHERE nodeport = %s)]);\n\\\\! touch %s/transfer.done\n" \
    "$sk" "$smid" "${PORT[w1]}" "${PORT[w2]}" "$tdir" >&9
for i in $(seq 1200); do [ "$(hook_waiting 44000 55152)" = 1 ] && break; sleep 0.1; done
declare -A held=()
for node in w1 w2; do
    held[$node]=$(split_storage $node)
    for s in ${held[$node]}; do hold_fences $node "$s" 96:0; done
done
out=$(qt "INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 50000 + g, 'sp' || g % 2, ('96:' || g)::fencing.fence FROM generate_series(1, 6) g" \
    "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 50101, 'spd', '96:1')" \
    "BEGIN" "SET LOCAL fencing.token = '96:40'" "DELETE FROM ledger WHERE acct = $ma AND id = 50101" "COMMIT" 2>&1)
printf 'SELECT pg_advisory_unlock(44000, 55152);\n' >&8
waited=
for i in $(seq 1200); do
    [ -e "$tdir/transfer.done" ] && break
    if [ "$(fences_awaited w1 w2)" -gt 0 ]; then
        waited=1
        break
    fi
    sleep 0.1
done
for node in w1 w2; do for s in ${held[$node]}; do free_fences $node "$s"; done; done
for i in $(seq 1200); do [ -e "$tdir/transfer.done" ] && break; sleep 0.1; done
exec 9>&- 8>&-
wait "${tpids[@]}"
ok "$([ -n "$waited" ] && echo 0 || echo 1)" "key scope split: the split, writes blocked, waits for the fences of the writes replayed into the new shards"
is "$(cat "$tdir/transfer.out")" "" "key scope: citus_split_shard_by_split_points of ledger shard $sk, writes at its last catch-up"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
is "$out" "" "... every write accepted"
is "$(q coord "SELECT count(*) FROM ledger WHERE acct = $ma AND id > 50000")" "6" "... and all 6 rows are in the new shards"
is "$(fences_of sp)" "sp0=96:6,sp1=96:5,spd=96:40" "... with every key's fence its highest accepted token, a DELETE's too"
out=$(qaerr coord "INSERT INTO ledger (acct, id, book, fence) VALUES ($ma, 50201, 'spd', '96:20')")
stale_key "$out" "spd\",\"$ma" "after the split, a stale write of key spd"
is "$(colocated_census)" "6 6" "... 6 ledger shards, each with its storage shard on its node"

# the other way round: the new ledger shard refuses the stream of rows
# (from before the copy on, before the guard is there) while the fences of
# the same writes come; the transfer must wait for the rows, not complete
# without them
ck=$(shard_of ledger $ma)
cfrom=$(node_name_by_port "$(node_of_shard "$ck")")
cto=$(for node in w1 w2 w3; do [ "$node" != "$cfrom" ] && echo $node; done | head -1)
cledger=$(q coord "SELECT shard_name('ledger', $ck)")
rm -f "$tdir/transfer.done"
session_open hooks 8
printf 'SELECT pg_advisory_lock(55152, 44000);\n\\! touch %s/hooks.held3\n' "$tdir" >&8
for i in $(seq 600); do [ -e "$tdir/hooks.held3" ] && break; sleep 0.1; done
session_open transfer 9
printf "SET citus.running_under_citus_test_suite = on;\nSELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s);\n\\\\! touch %s/transfer.done\n" \
    "$ck" "${PORT[$cfrom]}" "${PORT[$cto]}" "$tdir" >&9
for i in $(seq 1200); do [ "$(hook_waiting 55152 44000)" = 1 ] && break; sleep 0.1; done
hold_fences "$cto" "$cledger" 97:0
out=$(qt "INSERT INTO ledger (acct, id, book, fence) SELECT $ma, 60000 + g, 'cr' || g % 3, ('97:' || g)::fencing.fence FROM generate_series(1, 6) g" 2>&1)
printf 'SELECT pg_advisory_unlock(55152, 44000);\n' >&8
waited=
for i in $(seq 1200); do
    [ -e "$tdir/transfer.done" ] && break
    if [ "$(fences_awaited "$cto")" -gt 0 ]; then
        waited=1
        break
    fi
    sleep 0.1
done
free_fences "$cto" "$cledger"
for i in $(seq 1200); do [ -e "$tdir/transfer.done" ] && break; sleep 0.1; done
exec 9>&- 8>&-
wait "${tpids[@]}"
ok "$([ -n "$waited" ] && echo 0 || echo 1)" "key scope move: the stream of fences waits for the rows of the same writes"
is "$(cat "$tdir/transfer.out")" "" "key scope: citus_move_shard_placement of ledger shard $ck ($cfrom to $cto), its rows held back on $cto"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
is "$out" "" "... every write accepted"
is "$(node_name_by_port "$(node_of_shard "$ck")")" "$cto" "... the shard is on $cto"
is "$(q coord "SELECT count(*) FROM ledger WHERE acct = $ma AND id > 60000")" "6" "... with all 6 rows written during the move"
is "$(fences_of cr)" "cr0=97:6,cr1=97:4,cr2=97:5" "... and every key's fence is its highest accepted token"

is "$(q coord "SELECT count(*) FROM ledger")" "1593" "the ledger: 1593 rows, each accepted write once"

# --- two coordinator sessions racing on one row
race() {
    # race TOKEN_FIRST TOKEN_SECOND: the first takes the row, the second
    # blocks on it on the worker, the first commits; prints the second's
    # output and the row's fence
    local first=$1 second=$2 dir=$FENCING_WORK/race
    rm -rf "$dir"; mkdir -p "$dir"; chown postgres: "$dir"
    mkfifo "$dir/a.in"; chown postgres: "$dir/a.in"
    (fencing_as_postgres psql -X -q -At -h 127.0.0.1 -p "${PORT[coord]}" -d postgres \
        -v VERBOSITY=verbose <"$dir/a.in" >"$dir/a.out" 2>&1) &
    local apid=$!
    exec 7>"$dir/a.in"
    printf "%s;\nBEGIN;\nSET LOCAL fencing.token = '%s';\nUPDATE accounts SET balance = balance + 1 WHERE id = 9;\n\\\\! touch %s/a.locked\n" "$COORD_TOKEN" "$first" "$dir" >&7
    local i
    for i in $(seq 600); do [ -e "$dir/a.locked" ] && break; sleep 0.1; done
    (q coord "$COORD_TOKEN" '\set VERBOSITY verbose' "BEGIN" "SET LOCAL fencing.token = '$second'" \
        "UPDATE accounts SET balance = balance + 10 WHERE id = 9" "COMMIT" >"$dir/b.out" 2>&1) &
    local bpid=$!
    # wait until the second waits for the first's row lock, on the worker
    local w=0
    for i in $(seq 600); do
        for node in w1 w2 w3; do
            w=$(q $node "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE%'")
            [ "$w" -gt 0 ] && break 2
        done
        sleep 0.1
    done
    printf 'COMMIT;\n' >&7
    exec 7>&-
    wait $apid $bpid
    echo "waited=$w"
    cat "$dir/a.out" "$dir/b.out"
    echo "fence=$(q coord "SELECT fence FROM accounts WHERE id = 9")"
}
q coord "UPDATE accounts SET fence = '80:0' WHERE id = 9" >/dev/null
out=$(race 90:2 90:1)
like "$out" "waited=1" "race: the older token's UPDATE waited for the newer one's row lock on the worker"
stale "$out" "race: newer token commits first, the blocked older one"
like "$out" "fence=90:2$" "race: exactly one of the two ordered tokens won: 90:2"
out=$(race 91:0 91:0)
like "$out" 'ERROR:  SF001: fence token 91:0 for table "[a-z_0-9]+" was already used' "race: the same token in two transactions, the second is refused (strict)"
like "$out" "fence=91:0$" "... one write of 91:0"
is "$(q coord "SELECT balance FROM accounts WHERE id = 9")" "1002" "... the balance shows the two accepted writes only"

# --- a reference table: row scope
q coord "CREATE TABLE rates (code text PRIMARY KEY, rate numeric, fence fencing.fence)" \
    "SELECT create_reference_table('rates')" \
    "INSERT INTO rates VALUES ('EUR', 1, '5:0'), ('USD', 2, '5:0')" >/dev/null
out=$(q coord "SELECT fencing.protect('rates')" 2>&1)
is "$out" "" "protect() on a reference table"
is "$(guard_census rates)" "4 4 4" "... every placement (coordinator and 3 workers) guarded"
out=$(qerr coord "UPDATE rates SET rate = 0, fence = '4:0' WHERE code = 'EUR'")
stale "$out" "reference table: stale write refused"
out=$(q coord "UPDATE rates SET rate = 3, fence = '6:0' WHERE code = 'EUR'" 2>&1)
is "$out" "" "reference table: fresh write accepted"
is "$(for node in w1 w2 w3; do q $node "SET citus.enable_manual_changes_to_shards = on" "SELECT rate || '/' || fence FROM $(q coord "SELECT shard_name('rates', shardid) FROM pg_dist_shard WHERE logicalrelid = 'rates'::regclass") WHERE code = 'EUR'"; done | tr '\n' ' ')" \
    "3/6:0 3/6:0 3/6:0 " "... every copy took it"
out=$(qerr coord "TRUNCATE rates")
like "$out" 'ERROR:  SF002: cannot truncate' "reference table: TRUNCATE refused"

# --- what cannot hold is refused, naming what works
out=$(qerr coord "SELECT fencing.protect('accounts', key_columns => '{}')")
like "$out" 'ERROR:  0A000: table scope cannot hold on distributed table "accounts"' "table scope on a distributed table: 0A000"
like "$out" 'HINT:  Use row scope \(key_columns => NULL\), or key scope with the distribution column "id"' "... the HINT names what works"
q coord "ALTER TABLE accounts ADD COLUMN region text" >/dev/null
out=$(qerr coord "SELECT fencing.protect('accounts', key_columns => '{region}')")
like "$out" 'ERROR:  0A000: key scope without the distribution column cannot hold' "key scope without the distribution column: 0A000"
like "$out" 'HINT:  Add the distribution column "id" to key_columns' "... the HINT names what works"
q coord "CREATE DOMAIN account_id AS bigint" \
    "CREATE TABLE by_domain (a account_id, fence fencing.fence)" \
    "SELECT create_distributed_table('by_domain', 'a')" >/dev/null
out=$(qerr coord "SELECT fencing.protect('by_domain', key_columns => '{a}')")
like "$out" 'ERROR:  0A000: key scope cannot hold on distributed table "by_domain"' "key scope by a distribution column of a domain type: 0A000"
like "$out" 'HINT:  Use row scope \(key_columns => NULL\), or distribute the table by a column of a base type' "... the HINT names what works"
out=$(qerr coord "SELECT fencing.protect('rates', key_columns => '{code}')")
like "$out" 'ERROR:  0A000: key scope cannot hold on reference table' "key scope on a reference table: 0A000"
out=$(qerr coord "SELECT fencing.protect('rates', key_columns => '{}')")
like "$out" 'ERROR:  0A000: table scope cannot hold on reference table' "table scope on a reference table: 0A000"
out=$(qerr coord "SELECT fencing.protect('accounts', lease => 'l1')")
like "$out" 'ERROR:  0A000: cannot protect distributed table "accounts" with a lease' "a lease on a distributed table: 0A000"
q coord "CREATE TABLE local_ledger (id bigint, fence fencing.fence)" \
    "SELECT fencing.protect('local_ledger', key_columns => '{id}', scope_name => 'shared')" >/dev/null
out=$(qerr coord "SELECT fencing.protect('accounts', key_columns => '{id}', scope_name => 'shared')")
like "$out" 'ERROR:  0A000: fencing scope "shared" cannot be shared by tables "local_ledger" and "accounts"' \
    "a scope_name shared with a table that is not co-located: 0A000"
like "$out" 'HINT:  Distribute both tables co-located' "... the HINT names what works"
out=$(qerr "$(node_name_by_port "$(node_of_shard "$s7")")" "SELECT fencing.protect('$sh7')")
like "$out" 'ERROR:  0A000: cannot protect ".*", a shard of distributed table "accounts"' "protect() of a shard on a worker: 0A000"
is "$(q coord "SELECT key_columns IS NULL FROM fencing.protected WHERE relid = 'accounts'::regclass")" "t" \
    "... after every refusal, accounts is still protected in row scope"
out=$(qerr coord "UPDATE accounts SET fence = '1:0' WHERE id = 1")
stale "$out" "... and still refuses stale writes"

# --- unprotect() leaves nothing behind on any node
out=$(q coord "SELECT fencing.unprotect('accounts')" "SELECT fencing.unprotect('rates')" "SELECT fencing.unprotect('events')" 2>&1)
is "$out" "" "unprotect() of the distributed, the reference and the partitioned table"
out=$(qa coord "SELECT fencing.unprotect('ledger')" "SELECT fencing.unprotect('ledger_lines')" "SELECT fencing.unprotect('postings')" 2>&1)
is "$out" "" "unprotect() of the two tables of the key scope, and of the partitioned one"
# a scope outlives its tables (its fences stop a stale writer of a table
# protected into it again), until the extension's owner resets it
storage_shards() {
    for node in coord w1 w2 w3; do
        q $node "SET citus.show_shards_for_app_name_prefixes = '*'" \
            "SELECT count(*) FROM pg_class WHERE relkind = 'r' AND relnamespace = 'fencing'::regnamespace AND relname LIKE '${storage#fencing.}\\_%'"
    done | tr '\n' ' '
}
like "$(storage_shards)" '[1-9]' "... the scope's storage shards stay, as a scope's fences do"
is "$(q coord "SELECT fencing.reset_scope('public.ledger') > 0")" "t" "reset_scope() of the distributed scope"
is "$(storage_shards)" "0 0 0 0 " "... drops its storage shards on every node"
is "$(q coord "SELECT count(*) FROM fencing.scope_storage WHERE scope_name = 'public.ledger'")|$(q coord "SELECT to_regclass('$storage') IS NULL")" \
    "0|t" "... and its registry row and table on the coordinator"
q coord "CALL citus_cleanup_orphaned_resources()" >/dev/null 2>&1
left=$(for node in coord w1 w2 w3; do
    q $node "SELECT count(*) FROM pg_trigger WHERE tgfoid IN ('fencing.guard'::regproc, 'fencing.guard_truncate'::regproc)
             AND tgrelid::regclass::text NOT LIKE 'local_ledger%'"
done | tr '\n' ' ')
is "$left" "0 0 0 0 " "no fencing trigger left on any node (shells and shards)"
is "$(q coord "SELECT count(*) FROM fencing.protected WHERE relid::text <> 'local_ledger'")" "0" "fencing.protected forgets them"
out=$(q coord "UPDATE accounts SET balance = 0, fence = '1:0' WHERE id = 1" "TRUNCATE rates" "TRUNCATE events" 2>&1)
is "$out" "" "writes with old tokens and TRUNCATE go through again"
out=$(q coord "SELECT fencing.protect('accounts')" 2>&1)
is "$(guard_census accounts)" "5 5 5" "protect() again guards every shard again"
out=$(qerr coord "UPDATE accounts SET fence = '0:1' WHERE id = 1")
stale "$out" "... and refuses stale writes again"

# --- DROP EXTENSION
out=$(qerr coord "DROP EXTENSION fencing")
like "$out" 'ERROR:  2BP01: cannot drop extension fencing because other objects depend on it' \
    "DROP EXTENSION fencing is refused while a table is protected"
is "$(for node in coord w1 w2 w3; do q $node "SELECT count(*) FROM pg_extension WHERE extname = 'fencing'"; done | tr '\n' ' ')" \
    "1 1 1 1 " "... the extension is still on every node"
out=$(qerr coord "UPDATE accounts SET fence = '0:2' WHERE id = 1")
stale "$out" "... and the guard still holds"
out=$(q coord "DROP EXTENSION fencing CASCADE" 2>&1)
like "$out" "^(NOTICE|$)" "DROP EXTENSION fencing CASCADE on the coordinator"
is "$(for node in coord w1 w2 w3; do q $node "SELECT count(*) FROM pg_extension WHERE extname = 'fencing'"; done | tr '\n' ' ')" \
    "0 0 0 0 " "... removes it from every node"
is "$(for node in coord w1 w2 w3; do q $node "SELECT count(*) FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid WHERE p.proname IN ('guard', 'guard_truncate')"; done | tr '\n' ' ')" \
    "0 0 0 0 " "... with every guard trigger on every node"
is "$(q coord "SELECT count(*) FROM accounts")" "44" "... the table keeps its 44 rows"

echo "1..$n"
[ "$failed" -eq 0 ]
