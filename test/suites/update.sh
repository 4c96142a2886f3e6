#!/usr/bin/env bash
# test/suites/update.sh: ALTER EXTENSION fencing UPDATE, from every released
# version to the newest, on a filled database, while writers write.
#
# For each released version V (every version of sql/fencing--*.sql but the
# newest, that has a tag vV):
#   1. V exactly as released (git archive vV: its library and scripts) is
#      built into a private copy of the server, a cluster started on it
#      (no shared_preload_libraries, so each backend loads the library
#      file it finds when it first needs it) and CREATE EXTENSION fencing
#      gives V; test/upgrade/fill.sql fills it (row, key and table scopes,
#      a partitioned table, a shared scope name, idempotency keys in every
#      state, leases live and expired, planner statistics).
#   2. Writers start (test/upgrade/writers.sql): two fresh writers and a
#      stale one in long-lived sessions (they keep V's library to the end),
#      and a watcher of the fences.
#   3. The new build's files are installed over V's, as a package upgrade
#      does; a third writer then comes back in a new session every second
#      (each loads the new library, at first on V's objects).
#   4. ALTER EXTENSION fencing UPDATE runs while all of them write; a
#      fourth writer starts after it.
#   5. Checks: no stale write accepted before, during or after (every
#      attempt refused with SF001), no fresh write failed, no fence lowered
#      (the watcher's record), every acknowledged write kept and every
#      protection, fence, key and lease as it was (test/upgrade/verify.sql).
#   6. The updated extension equals a fresh CREATE EXTENSION fencing VERSION
#      newest in another database: fencing_ext_dump (test/lib/upgrade.sh)
#      of both is identical.
#   7. The whole pg_regress suite runs against the updated database
#      (pg_regress --use-existing, after a restart with the library
#      preloaded, and with the application's data removed: the expected
#      outputs assume an empty extension).
# Then the path walk: from every version, along every path of update
# scripts to the newest (ALTER EXTENSION ... UPDATE TO each step), on a
# filled database; each end state must equal the fresh one and pass
# verify.sql; and pg_extension_update_paths() must know a path from every
# version.  The next release only adds its script.
#
# On a server that a released version does not build on (1.0 predates
# PostgreSQL 18: pg_attribute_noreturn, index_beginscan), such a database
# can only come from pg_upgrade with the new library installed, so the
# released scripts run with the new library from the start; the suite says
# so on a line of its own.
#
# Environment (from test/check.sh): FENCING_ROOT FENCING_WORK FENCING_BINDIR
# PG_CONFIG FENCING_PGVER.

set -u
. "$FENCING_ROOT/test/lib/common.sh"
. "$FENCING_ROOT/test/lib/upgrade.sh"
fencing_set_pgver "$FENCING_PGVER"

new_bindir=$FENCING_BINDIR             # check.sh's build of this tree
new_inst=${new_bindir%/bin}
[ "$FENCING_PGVER" = 15 ] && new_inst=${new_bindir%/usr/lib/postgresql/15/bin}
FENCING_WORK=$FENCING_WORK/update
mkdir -p "$FENCING_WORK" && chmod 755 "$FENCING_WORK"
up=$FENCING_ROOT/test/upgrade
cp "$up"/*.sql "$FENCING_WORK/" && chmod a+r "$FENCING_WORK"/*.sql
stop_all() {
    local d
    for d in "${FENCING_CLUSTERS[@]}"; do fencing_cluster_stop "$d"; done
    jobs -p | xargs -r kill 2>/dev/null
}
trap stop_all EXIT

newest=$(fencing_newest_version)
versions=$(fencing_versions)
released=
for v in $versions; do
    [ "$v" = "$newest" ] && continue
    git -C "$FENCING_ROOT" rev-parse -q --verify "refs/tags/v$v" >/dev/null && released="$released $v"
done
echo "# PostgreSQL $FENCING_PGVER; versions: $(echo $versions); newest: $newest; released: $(echo $released)"
if [ -z "$released" ]; then
    echo "1..0 # SKIP no released version (no tag v<version> for the scripts in sql/)"
    exit 0
fi

psql_bg() {     # db sql logfile: a background session
    fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$1" -c "$2" >"$3" 2>&1 &
}

# The reference: a fresh CREATE EXTENSION of the newest version.
reference_dump() {
    fencing_sql postgres "DROP DATABASE IF EXISTS fresh" "CREATE DATABASE fresh"
    fencing_sql fresh "CREATE EXTENSION fencing VERSION '$newest'"
    fencing_ext_dump fresh "$FENCING_WORK/fresh.dump"
}

# Compare the extension in $1 with the reference; $2 names it.
compare_with_fresh() {
    local db=$1 what=$2
    fencing_ext_dump "$db" "$FENCING_WORK/$db.dump"
    if diff -u "$FENCING_WORK/fresh.dump" "$FENCING_WORK/$db.dump" >"$FENCING_WORK/$db.diff"; then
        tap_ok 0 "$what: the same objects, definitions, owners, ACLs, comments, config-dump marks and members as a fresh CREATE EXTENSION fencing VERSION '$newest' ($(grep -c '^ALTER EXTENSION fencing ADD' "$FENCING_WORK/$db.dump") members)"
    else
        tap_ok 1 "$what: differs from a fresh CREATE EXTENSION fencing VERSION '$newest'"
        tap_diag "$(head -80 "$FENCING_WORK/$db.diff")"
    fi
}

# Run app.verify() in db; one TAP line per check, prefixed.
run_verify() {
    local db=$1 prefix=$2 line ok desc
    fencing_sql "$db" "SELECT CASE WHEN ok THEN 't' ELSE 'f' END || '|' || description FROM app.verify()" \
        >"$FENCING_WORK/verify.out" 2>&1 || { tap_ok 1 "$prefix: app.verify() failed"; tap_diag "$(cat "$FENCING_WORK/verify.out")"; return; }
    while IFS='|' read -r ok desc; do
        tap_ok "$ok" "$prefix: $desc"
    done <"$FENCING_WORK/verify.out"
}

update_with_writers() {
    local v=$1 inst=$FENCING_WORK/inst-$v own_lib=yes
    local db=fencing_regress st
    FENCING_BINDIR=$(fencing_pg_copy "$inst")
    if ! fencing_build_release "$v" "$inst"; then
        if [ "$FENCING_PGVER" = 15 ]; then
            tap_ok 1 "release $v builds on PostgreSQL $FENCING_PGVER"
            tap_diag "$(tail -20 "$FENCING_WORK/build.log")"
            return
        fi
        own_lib=no
        echo "# release $v does not build on PostgreSQL $FENCING_PGVER (it predates it): its scripts run with the new library from the start, as after pg_upgrade"
        tap_diag "$(grep -m3 -E 'error' "$FENCING_WORK/build.log")"
        fencing_install_files "$new_inst" "$inst"
        # the released scripts and control file, over the new ones
        local ext
        ext=$(fencing_inst_dir "$inst" sharedir)/extension
        rm -f "$ext"/fencing*
        cp "$FENCING_WORK/release-$v"/fencing.control "$ext/"
        for f in "$FENCING_WORK/release-$v"/sql/fencing--*.sql; do cp "$f" "$ext/"; done
        chmod -R a+r "$ext"
    fi
    export FENCING_BINDIR
    fencing_cluster_start "update-$v"
    fencing_sql postgres "CREATE DATABASE $db"
    fencing_sql "$db" "CREATE EXTENSION fencing"
    tap_ok "$([ "$(fencing_sql "$db" "SELECT extversion FROM pg_extension WHERE extname = 'fencing'")" = "$v" ]; echo $?)" \
        "release $v installed (library: $([ $own_lib = yes ] && echo "$v's own" || echo new))"
    fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" \
        -f "$FENCING_WORK/fill.sql" -f "$FENCING_WORK/writers.sql" -f "$FENCING_WORK/verify.sql" \
        >"$FENCING_WORK/fill.log" 2>&1
    st=$?
    tap_ok $st "filled at $v: row, key, table and partitioned scopes, a shared scope, keys in every state, leases"
    if [ $st -ne 0 ]; then
        tap_diag "$(grep -E 'ERROR|DETAIL' "$FENCING_WORK/fill.log" | head -5)"
        fencing_cluster_stop "$PGDATA"
        return
    fi
    # the state of the extension's own tables, to compare after the update
    local before
    before=$(fencing_sql "$db" "SELECT count(*) FROM fencing.protected" "SELECT count(*) FROM fencing.scopes" \
                 "SELECT count(*) FROM fencing.idempotency_keys" "SELECT count(*) FROM fencing.leases" | tr '\n' ' ')

    # 2. writers on v's library
    local wlog=$FENCING_WORK/writers
    mkdir -p "$wlog" && chown postgres: "$wlog"
    psql_bg "$db" "CALL app.watcher(120)" "$wlog/watcher.log"
    psql_bg "$db" "CALL app.fresh(1, 120)" "$wlog/fresh1.log"
    psql_bg "$db" "CALL app.fresh(2, 120)" "$wlog/fresh2.log"
    psql_bg "$db" "CALL app.stale(120)" "$wlog/stale.log"
    sleep 3

    # 3. the package upgrade: the new files over the old ones
    fencing_sql "$db" "INSERT INTO app.watch (what) VALUES ('files replaced')"
    fencing_install_files "$new_inst" "$inst"
    # writer 3 comes back in a new session (the new library) every second
    ( for _ in $(seq 1 40); do
          fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -d "$db" -c "CALL app.fresh(3, 1)" >>"$wlog/fresh3.log" 2>&1
          [ "$(fencing_sql "$db" "SELECT stop FROM app.control")" = t ] && break
      done ) &
    sleep 3

    # 4. the update, while they write (a deadlock with a writer is retried)
    local t0 t1 tries=0 st
    t0=$(fencing_sql "$db" "SELECT clock_timestamp()")
    while :; do
        tries=$((tries + 1))
        fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" \
            -c "ALTER EXTENSION fencing UPDATE" >"$FENCING_WORK/alter.log" 2>&1
        st=$?
        [ $st -eq 0 ] && break
        grep -q 'deadlock detected' "$FENCING_WORK/alter.log" && [ $tries -lt 5 ] && continue
        break
    done
    t1=$(fencing_sql "$db" "SELECT clock_timestamp()")
    tap_ok $st "ALTER EXTENSION fencing UPDATE from $v while the writers write (attempts: $tries)"
    [ $st -ne 0 ] && tap_diag "$(cat "$FENCING_WORK/alter.log")"
    tap_ok "$([ "$(fencing_sql "$db" "SELECT extversion FROM pg_extension WHERE extname = 'fencing'")" = "$newest" ]; echo $?)" \
        "the extension is at $newest"
    psql_bg "$db" "CALL app.fresh(4, 120)" "$wlog/fresh4.log"
    sleep 4
    fencing_sql "$db" "UPDATE app.control SET stop = true"
    wait
    for f in "$wlog"/*.log; do
        [ -s "$f" ] && tap_diag "$(basename "$f"): $(head -5 "$f")"
    done

    # 5. the checks
    local q
    q="SELECT count(*) FILTER (WHERE at < '$t0'), count(*) FILTER (WHERE at BETWEEN '$t0' AND '$t1'),
              count(*) FILTER (WHERE at > '$t1'),
              count(*) FILTER (WHERE sqlstate = 'accepted'),
              count(*) FILTER (WHERE sqlstate NOT IN ('SF001', 'accepted'))
         FROM app.stale"
    local b d a acc other
    IFS='|' read -r b d a acc other <<<"$(fencing_sql "$db" "$q")"
    tap_ok "$([ "$acc" -eq 0 ] && [ "$b" -gt 0 ] && [ "$a" -gt 0 ]; echo $?)" \
        "no stale write accepted: $b attempts before the update, $d during, $a after; $acc accepted"
    tap_ok "$([ "$other" -eq 0 ]; echo $?)" "every stale attempt refused with SF001 ($other with another error)"
    [ "$other" -ne 0 ] && tap_diag "$(fencing_sql "$db" "SELECT what, sqlstate, message, count(*) FROM app.stale WHERE sqlstate <> 'SF001' GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10")"
    q="SELECT count(*) FROM app.failed"
    local nfail
    nfail=$(fencing_sql "$db" "$q")
    tap_ok "$([ "$nfail" -eq 0 ]; echo $?)" "no fresh write failed ($nfail failed)"
    [ "$nfail" -ne 0 ] && tap_diag "$(fencing_sql "$db" "SELECT writer, sqlstate, message, count(*) FROM app.failed GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10")"
    q="SELECT w.writer, count(*) FILTER (WHERE at < '$t0'), count(*) FILTER (WHERE at BETWEEN '$t0' AND '$t1'),
              count(*) FILTER (WHERE at > '$t1')
         FROM (VALUES (1), (2), (3), (4)) w(writer) LEFT JOIN app.acked a USING (writer)
        GROUP BY 1 ORDER BY 1"
    local w wb wd wa libs
    while IFS='|' read -r w wb wd wa; do
        case $w in
        1|2) libs="a session of the old library" ;;
        3) libs="new sessions, the new library" ;;
        4) libs="a session started after the update" ;;
        esac
        if [ "$w" = 4 ]; then
            tap_ok "$([ "$wa" -gt 0 ]; echo $?)" "writer $w ($libs) wrote: $wa acknowledged writes"
        elif [ "$w" = 3 ]; then
            tap_ok "$([ "$((wb + wd + wa))" -gt 0 ] && [ "$wa" -gt 0 ]; echo $?)" "writer $w ($libs) wrote before, during and after the update: $wb, $wd, $wa"
        else
            tap_ok "$([ "$wb" -gt 0 ] && [ "$wa" -gt 0 ]; echo $?)" "writer $w ($libs) wrote before, during and after the update: $wb, $wd, $wa"
        fi
    done < <(fencing_sql "$db" "$q")
    q="SELECT count(*) FROM (
         SELECT what, fence, n, lag(fence) OVER w AS prev_fence, lag(n) OVER w AS prev_n
           FROM app.watch WHERE fence IS NOT NULL WINDOW w AS (PARTITION BY what ORDER BY at)) s
        WHERE fence OPERATOR(fencing.<) prev_fence OR n < prev_n"
    local lowered samples
    lowered=$(fencing_sql "$db" "$q")
    samples=$(fencing_sql "$db" "SELECT count(DISTINCT at) FROM app.watch")
    tap_ok "$([ "$lowered" -eq 0 ] && [ "$samples" -gt 10 ]; echo $?)" \
        "no fence lowered and no scope row lost at any of $samples looks during the run ($lowered lowered)"
    local after
    after=$(fencing_sql "$db" "SELECT count(*) FROM fencing.protected" \
                "SELECT count(*) FROM fencing.idempotency_keys" "SELECT count(*) FROM fencing.leases" | tr '\n' ' ')
    tap_ok "$([ "$(echo "$before" | awk '{print $1, $3, $4}')" = "$(echo $after)" ]; echo $?)" \
        "protected tables, idempotency keys and leases all kept (before: $before; after: $after)"
    run_verify "$db" "after the update from $v"

    # 6. the same extension as a fresh one
    reference_dump
    compare_with_fresh "$db" "updated from $v"

    # 7. the regression suite against the updated database
    fencing_sql "$db" "SELECT fencing.unprotect(relid) FROM fencing.protected" "DROP SCHEMA app CASCADE" >/dev/null
    # empty every configuration table of the extension, restart its sequences
    fencing_sql "$db" "DO \$\$ DECLARE c regclass; BEGIN
        FOR c IN SELECT unnest(extconfig) FROM pg_extension WHERE extname = 'fencing' LOOP
            IF (SELECT relkind FROM pg_class WHERE oid = c) = 'S' THEN
                EXECUTE format('ALTER SEQUENCE %s RESTART', c);
            ELSE
                EXECUTE format('DELETE FROM %s', c);
            END IF;
        END LOOP; END \$\$"
    echo "shared_preload_libraries = 'fencing'" >>"$PGDATA/postgresql.conf"
    fencing_as_postgres "$FENCING_BINDIR/pg_ctl" -D "$PGDATA" -m fast -w restart -l "$PGHOST/server.log" >/dev/null
    local pgxs_dir src=$FENCING_WORK/regress-src
    pgxs_dir=$(dirname "$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")")
    rm -rf "$src" && mkdir -p "$src/out" && cp -a "$FENCING_ROOT/sql" "$FENCING_ROOT/expected" "$src/" && chown -R postgres: "$src"
    fencing_as_postgres "$pgxs_dir/src/test/regress/pg_regress" \
        --bindir="$FENCING_BINDIR" --inputdir="$src" --outputdir="$src/out" \
        --host="$PGHOST" --port="$PGPORT" --user=postgres --use-existing \
        --dbname="$db" --load-extension=fencing \
        $(make -s -C "$FENCING_ROOT" print-regress PG_CONFIG="$PG_CONFIG") >"$FENCING_WORK/regress.log" 2>&1
    st=$?
    local nok nbad
    nok=$(grep -cE '^(test| ) .* \.\.\. ok|^ok [0-9]+' "$FENCING_WORK/regress.log")
    nbad=$(grep -cE '\.\.\. FAILED|\.\.\. failed|^not ok [0-9]+' "$FENCING_WORK/regress.log")
    tap_ok "$([ $st -eq 0 ] && [ "$nbad" -eq 0 ] && [ "$nok" -gt 0 ]; echo $?)" \
        "the pg_regress suite against the database updated from $v: $nok passed, $nbad failed"
    if [ $st -ne 0 ]; then
        tap_diag "$(grep -E 'FAILED|failed|not ok' "$FENCING_WORK/regress.log")"
        [ -f "$src/out/regression.diffs" ] && tap_diag "$(head -60 "$src/out/regression.diffs")"
    fi
    fencing_cluster_stop "$PGDATA"
}

# Every path from every version to the newest, on a filled database.
walk_paths() {
    local inst=$FENCING_WORK/inst-walk
    FENCING_BINDIR=$(fencing_pg_copy "$inst")
    fencing_install_files "$new_inst" "$inst"
    export FENCING_BINDIR
    fencing_cluster_start walk "shared_preload_libraries = 'fencing'"
    reference_dump
    local v path i=0 db step known
    known=$(fencing_sql postgres "CREATE EXTENSION IF NOT EXISTS fencing" \
        "SELECT source || ' ' || target FROM pg_extension_update_paths('fencing') WHERE path IS NOT NULL AND target = '$newest'" 2>&1)
    for v in $versions; do
        [ "$v" = "$newest" ] && continue
        case $'\n'"$known"$'\n' in
        *$'\n'"$v $newest"$'\n'*) tap_ok 0 "pg_extension_update_paths: $v reaches $newest" ;;
        *) tap_ok 1 "pg_extension_update_paths: $v reaches $newest" ;;
        esac
        while read -r path; do
            [ -n "$path" ] || continue
            i=$((i + 1))
            db=walk$i
            fencing_sql postgres "CREATE DATABASE $db"
            fencing_sql "$db" "CREATE EXTENSION fencing VERSION '$v'" >/dev/null 2>"$FENCING_WORK/walk.err" \
                || { tap_ok 1 "path $path: CREATE EXTENSION fencing VERSION '$v'"; tap_diag "$(cat "$FENCING_WORK/walk.err")"; continue; }
            fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" \
                -f "$FENCING_WORK/fill.sql" -f "$FENCING_WORK/verify.sql" >"$FENCING_WORK/walk.err" 2>&1 \
                || { tap_ok 1 "path $path: fill at $v"; tap_diag "$(grep -E 'ERROR|DETAIL' "$FENCING_WORK/walk.err" | head -5)"; continue; }
            local ok=0
            for step in ${path#* }; do
                fencing_sql "$db" "ALTER EXTENSION fencing UPDATE TO '$step'" >"$FENCING_WORK/walk.err" 2>&1 \
                    || { ok=1; tap_diag "$(cat "$FENCING_WORK/walk.err")"; break; }
            done
            tap_ok $ok "path ${path// / -> }: every step of ALTER EXTENSION fencing UPDATE TO runs on a filled database"
            [ $ok -eq 0 ] || continue
            compare_with_fresh "$db" "path ${path// / -> }"
            run_verify "$db" "path ${path// / -> }"
        done < <(fencing_update_paths "$v" "$newest")
    done
    fencing_cluster_stop "$PGDATA"
}

for v in $released; do
    update_with_writers "$v"
done
walk_paths
tap_done
[ "$tap_failed" -eq 0 ]
