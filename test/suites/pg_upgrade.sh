#!/usr/bin/env bash
# test/suites/pg_upgrade.sh: pg_upgrade from a filled PostgreSQL 15 cluster
# with the extension, into PostgreSQL 18 (runs in the 18 pass of
# test/check.sh; the 15 pass skips it).
#
# The extension is built and installed into private copies of both servers;
# a 15 cluster (fencing preloaded) is filled by test/upgrade/fill.sql (row,
# key and table scopes, a partitioned table, a shared scope name,
# idempotency keys in every state, leases live and expired, statistics) and
# stopped, and a pristine copy of it kept.  Each way of upgrading starts
# from that copy, runs pg_upgrade --check and then pg_upgrade (--copy, then
# --link), starts the new cluster and runs test/upgrade/verify.sql: every
# table still protected with its guard intact (fencing.protected_tables),
# every row fence and scope fence unchanged (a write with exactly that
# token refused with SF001, the next one accepted), a token-less write
# refused, idempotency keys replaying their results, and the first lease
# granted afterwards beating every token granted before; here also its
# epoch above the epoch of every token granted before.
#
# Baseline first: pg_upgrade from 15 to 18 of a one-table database without
# the extension.  Debian's 15.20 stores a column option (pg_attver) that
# 18.6 does not know, so that fails in PostgreSQL itself, whatever the
# extension does.  While it fails, the suite reports it on its own line as
# a known failure of PostgreSQL (TAP "not ok ... # TODO": shown in the
# summary as known, not counted as a failure of ours), and proves the same
# things through the two ways that work: pg_upgrade from 15 to 15 (a fresh
# cluster; --copy and --link) and pg_dump of the filled 15 database
# restored into 18.  Once the baseline passes (a newer 18, for example a
# newer tarball in shared/vendor), it upgrades 15 -> 18 itself, with nothing
# to change here.  A baseline failing for any other reason is a failure.

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/upgrade.sh
. "$FENCING_ROOT/test/lib/upgrade.sh"

if [ "$FENCING_PGVER" != 18 ]; then
    echo "1..0 # SKIP pg_upgrade goes from 15 into 18: it runs in the PostgreSQL 18 pass"
    exit 0
fi

W=$FENCING_WORK/pg_upgrade
mkdir -p "$W" && chmod 755 "$W" && chown postgres: "$W"
cp "$FENCING_ROOT"/test/upgrade/*.sql "$W/" && chmod a+r "$W"/*.sql
bin18=$FENCING_BINDIR
started=()
stop_all() {
    local d
    for d in "${started[@]}"; do
        [ -f "$d/postmaster.pid" ] && fencing_as_postgres "$(cat "$d/.bindir")/pg_ctl" -D "$d" -m fast -w stop >/dev/null 2>&1
    done
}
trap stop_all EXIT

# PostgreSQL 15 with the extension, in a private copy
fencing_set_pgver 15
fencing_deps >/dev/null
inst15=$W/inst15
bin15=$(fencing_pg_copy "$inst15")
fencing_workdir
FENCING_WORK=$W fencing_make_install "$FENCING_ROOT" "$inst15" "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING"
fencing_set_pgver 18
v15=$("$bin15/postgres" -V | awk '{print $3}')
v18=$("$bin18/postgres" -V | awk '{print $3}')
echo "# from PostgreSQL $v15 ($bin15) into $v18 ($bin18)"

# initdb a cluster NAME with BINDIR (not started); prints its data directory
make_cluster() {
    local name=$1 bindir=$2 dir=$W/$1 opts=()
    rm -rf "$dir" && mkdir -p "$dir" && chown postgres: "$dir"
    # 18's initdb enables data checksums by default; 15's cluster has none,
    # and pg_upgrade needs both alike
    case $("$bindir/initdb" --help) in *--no-data-checksums*) opts+=(--no-data-checksums) ;; esac
    FENCING_BINDIR=$bindir fencing_as_postgres "$bindir/initdb" -D "$dir/data" -A trust -U postgres \
        --no-sync "${opts[@]}" >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; return 1; }
    {
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$dir'"
        echo "port = $(fencing_free_port)"
        echo "fsync = off"
        echo "shared_preload_libraries = 'fencing'"
    } >>"$dir/data/postgresql.conf"
    echo "$bindir" >"$dir/data/.bindir"
    echo "$dir/data"
}

# start / stop the cluster of data directory $1; psql into it
start_cluster() {
    local data=$1 bindir
    bindir=$(cat "$data/.bindir")
    FENCING_BINDIR=$bindir fencing_as_postgres "$bindir/pg_ctl" -D "$data" -l "$data/../server.log" -w start >/dev/null \
        || { tail -20 "$data/../server.log" >&2; return 1; }
    started+=("$data")
}
stop_cluster() {
    FENCING_BINDIR=$(cat "$1/.bindir") fencing_as_postgres "$(cat "$1/.bindir")/pg_ctl" -D "$1" -m fast -w stop >/dev/null
}
cluster_psql() {   # data db [psql args...]
    local data=$1 db=$2; shift 2
    local bindir port
    bindir=$(cat "$data/.bindir")
    port=$(sed -n 's/^port = //p' "$data/postgresql.conf" | tail -1)
    FENCING_BINDIR=$bindir fencing_as_postgres "$bindir/psql" -X -At -q -v ON_ERROR_STOP=1 \
        -h "$(dirname "$data")" -p "$port" -d "$db" "$@"
}

# pg_upgrade from old data $1 to new data $2, extra options after; the log
# in $W/upgrade.log
run_pg_upgrade() {
    local old=$1 new=$2; shift 2
    local bnew
    bnew=$(cat "$new/.bindir")
    (cd "$(dirname "$new")" && FENCING_BINDIR=$bnew fencing_as_postgres "$bnew/pg_upgrade" \
        -b "$(cat "$old/.bindir")" -B "$bnew" -d "$old" -D "$new" \
        -p "$(fencing_free_port)" -P "$(fencing_free_port)" -s "$(dirname "$new")" -U postgres "$@") \
        >"$W/upgrade.log" 2>&1
    local st=$?
    # pg_upgrade keeps its logs in the new cluster's pg_upgrade_output.d on failure
    find "$new" -path '*pg_upgrade_output.d*' -name '*.log' -exec cat {} + >>"$W/upgrade.log" 2>/dev/null
    return $st
}

# 1. the baseline: one table, no extension
base_old=$(make_cluster base15 "$bin15")
sed -i '/^shared_preload_libraries/d' "$base_old/postgresql.conf"
start_cluster "$base_old"
cluster_psql "$base_old" postgres -c "CREATE TABLE t (id int PRIMARY KEY, v text)" \
    -c "INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 100) i"
stop_cluster "$base_old"
base_new=$(make_cluster base18 "$bin18")
sed -i '/^shared_preload_libraries/d' "$base_new/postgresql.conf"
direct=no
if run_pg_upgrade "$base_old" "$base_new"; then
    direct=yes
    tap_ok 0 "baseline: pg_upgrade $v15 -> $v18 of a one-table database without the extension"
elif grep -q 'pg_attver' "$W/upgrade.log"; then
    echo "not ok $((tap_n + 1)) - baseline: pg_upgrade $v15 -> $v18 of a one-table database without the extension # TODO known failure of PostgreSQL itself: $(grep -m1 -o 'unrecognized parameter "pg_attver"' "$W/upgrade.log" || echo 'pg_attver'); 15 -> 15 and pg_dump into $v18 instead"
    tap_n=$((tap_n + 1))
    tap_diag "$(grep -m3 -B1 'pg_attver' "$W/upgrade.log")"
else
    tap_ok 1 "baseline: pg_upgrade $v15 -> $v18 of a one-table database without the extension"
    tap_diag "$(tail -30 "$W/upgrade.log")"
fi
rm -rf "$W/base15" "$W/base18"

# 2. the filled 15 cluster, and a pristine copy of it
old=$(make_cluster old15 "$bin15")
start_cluster "$old"
cluster_psql "$old" postgres -c "CREATE DATABASE app"
cluster_psql "$old" app -c "CREATE EXTENSION fencing" -f "$W/fill.sql" -f "$W/verify.sql" >"$W/fill.log" 2>&1
tap_ok $? "PostgreSQL $v15: fencing $(cluster_psql "$old" app -c "SELECT extversion FROM pg_extension WHERE extname = 'fencing'") installed and filled"
max_epoch=$(cluster_psql "$old" app -c "SELECT max(fencing.epoch(token)) FROM app.expect_tokens")
before=$(cluster_psql "$old" app -c "SELECT relid::text || ' ' || guard_intact FROM fencing.protected_tables ORDER BY 1")
stop_cluster "$old"
cp -a "$W/old15" "$W/old15.pristine"

# Check the upgraded or restored cluster $1; $2 names the way.
check_new() {
    local data=$1 how=$2 ok desc
    start_cluster "$data" || { tap_ok 1 "$how: the new cluster starts"; return; }
    tap_ok "$([ "$(cluster_psql "$data" app -c "SELECT relid::text || ' ' || guard_intact FROM fencing.protected_tables ORDER BY 1")" = "$before" ]; echo $?)" \
        "$how: fencing.protected_tables lists the same tables, every guard intact"
    cluster_psql "$data" app -c "SELECT CASE WHEN ok THEN 't' ELSE 'f' END || '|' || description FROM app.verify(new_epoch => true)" \
        >"$W/verify.out" 2>&1 || { tap_ok 1 "$how: app.verify() runs"; tap_diag "$(cat "$W/verify.out")"; }
    while IFS='|' read -r ok desc; do
        tap_ok "$ok" "$how: $desc"
    done <"$W/verify.out"
    local e
    e=$(cluster_psql "$data" app -c "SELECT fencing.epoch(fencing.lease_acquire('lease-epoch', 'w', '1 hour'))")
    tap_ok "$([ -n "$e" ] && [ "$e" -gt "$max_epoch" ]; echo $?)" \
        "$how: the epoch of the first lease granted afterwards ($e) is above the epoch of every token granted before ($max_epoch)"
    stop_cluster "$data"
}

# 3. pg_upgrade, --copy then --link (which leaves the old cluster unusable)
upgrade_way() {
    local target_bin=$1 label=$2 mode
    for mode in copy link; do
        rm -rf "$W/old15" && cp -a "$W/old15.pristine" "$W/old15"
        local new
        new=$(make_cluster "new-$label-$mode" "$target_bin")
        if run_pg_upgrade "$old" "$new" --check; then
            tap_ok 0 "pg_upgrade --check $label"
        else
            tap_ok 1 "pg_upgrade --check $label"
            tap_diag "$(tail -30 "$W/upgrade.log")"
        fi
        # --copy is the default mode (15's pg_upgrade has no option for it)
        local opt=--$mode
        case $("$target_bin/pg_upgrade" --help) in *--copy*) ;; *) [ "$mode" = copy ] && opt= ;; esac
        if run_pg_upgrade "$old" "$new" $opt; then
            tap_ok 0 "pg_upgrade --$mode $label"
            check_new "$new" "pg_upgrade --$mode $label"
        else
            tap_ok 1 "pg_upgrade --$mode $label"
            tap_diag "$(tail -30 "$W/upgrade.log")"
        fi
        rm -rf "$W/new-$label-$mode"
    done
}

if [ "$direct" = yes ]; then
    upgrade_way "$bin18" "$v15 -> $v18"
else
    upgrade_way "$bin15" "$v15 -> $v15"
fi

# 3b. A database still at the last release (test/releases: built from its
# commit), with that release's own library on 15, upgraded into a server
# that has only the new library (as after installing the new package
# there): pg_upgrade, then ALTER EXTENSION fencing UPDATE on the new server.
release_upgrade() {
    local target_bin=$1 label=$2 rel inst data new ver st
    rel=$(fencing_releases | awk -v n="$(fencing_newest_version)" '$1 != n { v = $1 } END { print v }')
    if [ -z "$rel" ]; then
        tap_ok 1 "a released version to upgrade from (test/releases lists none older than $(fencing_newest_version))"
        return
    fi
    fencing_set_pgver 15
    inst=$W/inst15-$rel
    fencing_pg_copy "$inst" >/dev/null
    FENCING_WORK=$W fencing_build_release "$rel" "$inst" 2>"$W/source.err"
    st=$?
    if [ $st -ne 0 ]; then
        fencing_set_pgver 18
        tap_ok 1 "release $rel (test/releases) builds on PostgreSQL $v15"
        tap_diag "$(cat "$W/source.err")" "$(tail -20 "$W/build.log" 2>/dev/null)"
        return
    fi
    fencing_set_pgver 18
    data=$(make_cluster "old15-$rel" "$inst/usr/lib/postgresql/15/bin")
    start_cluster "$data"
    cluster_psql "$data" postgres -c "CREATE DATABASE app"
    cluster_psql "$data" app -c "CREATE EXTENSION fencing" -f "$W/fill.sql" -f "$W/verify.sql" >"$W/fill-$rel.log" 2>&1
    tap_ok $? "PostgreSQL $v15: release $rel with its own library, filled"
    stop_cluster "$data"
    new=$(make_cluster "new-$rel" "$target_bin")
    if run_pg_upgrade "$data" "$new"; then
        tap_ok 0 "pg_upgrade $label of a database at $rel into a server with only the new library"
    else
        tap_ok 1 "pg_upgrade $label of a database at $rel into a server with only the new library"
        tap_diag "$(tail -30 "$W/upgrade.log")"
        return
    fi
    start_cluster "$new"
    ver=$(cluster_psql "$new" app -c "SELECT extversion FROM pg_extension WHERE extname = 'fencing'")
    cluster_psql "$new" app -c "ALTER EXTENSION fencing UPDATE" >"$W/alter-$rel.log" 2>&1
    tap_ok $? "after pg_upgrade $label: ALTER EXTENSION fencing UPDATE from $ver to $(cluster_psql "$new" app -c "SELECT extversion FROM pg_extension WHERE extname = 'fencing'")"
    [ -s "$W/alter-$rel.log" ] && tap_diag "$(cat "$W/alter-$rel.log")"
    stop_cluster "$new"
    check_new "$new" "pg_upgrade $label from $rel, then updated"
    rm -rf "$W/old15-$rel" "$W/new-$rel"
}
if [ "$direct" = yes ]; then
    release_upgrade "$bin18" "$v15 -> $v18"
else
    release_upgrade "$bin15" "$v15 -> $v15"
fi

# 4. pg_dump of the filled 15 database restored into a new 18 cluster:
# first with 18's pg_dump, as the documentation advises for any upgrade by
# dump; should that fail in PostgreSQL itself (pg_attver, as above), with
# 15's own pg_dump, which leaves the option out.
dump_restore() {    # pg_dump bindir; label
    local dumpbin=$1 label=$2 new port_old port_new st
    rm -rf "$W/old15" && cp -a "$W/old15.pristine" "$W/old15"
    start_cluster "$old"
    port_old=$(sed -n 's/^port = //p' "$old/postgresql.conf" | tail -1)
    FENCING_BINDIR=$dumpbin fencing_as_postgres "$dumpbin/pg_dump" -Fc -h "$W/old15" -p "$port_old" -d app -f "$W/app.dump" 2>"$W/dump.log"
    st=$?
    stop_cluster "$old"
    tap_ok $st "pg_dump ($label) of the filled $v15 database"
    [ $st -eq 0 ] || { tap_diag "$(cat "$W/dump.log")"; return 1; }
    new=$(make_cluster "dump18" "$bin18")
    start_cluster "$new"
    cluster_psql "$new" postgres -c "CREATE DATABASE app"
    port_new=$(sed -n 's/^port = //p' "$new/postgresql.conf" | tail -1)
    fencing_as_postgres "$bin18/pg_restore" --exit-on-error -h "$W/dump18" -p "$port_new" -d app "$W/app.dump" >"$W/restore.log" 2>&1
    st=$?
    stop_cluster "$new"
    if [ $st -eq 0 ] && [ ! -s "$W/restore.log" ]; then
        tap_ok 0 "pg_restore into $v18 of pg_dump ($label) without an error"
        check_new "$new" "pg_dump ($label) $v15 | pg_restore $v18"
        return 0
    fi
    if [ "$label" = "$v18" ] && grep -q 'pg_attver' "$W/restore.log"; then
        echo "not ok $((tap_n + 1)) - pg_restore into $v18 of pg_dump ($v18) of a $v15 database # TODO known failure of PostgreSQL itself: $v18's pg_dump copies $v15's column option pg_attver, which $v18 refuses"
        tap_n=$((tap_n + 1))
    else
        tap_ok 1 "pg_restore into $v18 of pg_dump ($label) without an error"
    fi
    tap_diag "$(head -8 "$W/restore.log")"
    return 1
}
dump_restore "$bin18" "$v18" || dump_restore "$bin15" "$v15"

tap_done
[ "$tap_failed" -eq 0 ]
