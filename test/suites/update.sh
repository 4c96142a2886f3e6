#!/usr/bin/env bash
# test/suites/update.sh: ALTER EXTENSION fencing UPDATE, from every released
# version to the newest, on a filled database, while writers write.
#
# For each released version V (test/releases: the version and the commit
# that released it; every version of sql/fencing--*.sql but the newest
# must be there):
#   1. V exactly as released (git archive of its commit: its library and
#      scripts) is built into a private copy of the server, a cluster
#      started on it (no shared_preload_libraries, so each backend loads
#      the library file it finds when it first needs it) and CREATE
#      EXTENSION fencing gives V; test/upgrade/fill.sql fills it (row,
#      key and table scopes, a partitioned table, a shared scope name,
#      idempotency keys in every state, leases live and expired, planner
#      statistics).
#   2. Writers start (test/upgrade/writers.sql): two fresh writers and a
#      stale one in long-lived sessions (they keep V's library to the end),
#      and a watcher of the fences.
#   3. The new build's files are installed over V's, as a package upgrade
#      does; a third writer then comes back in a new session every second
#      (each loads the new library, at first on V's objects).
#   4. ALTER EXTENSION fencing UPDATE runs while all of them write; a
#      fourth writer starts after it.  Each step waits until the writers
#      have written what the checks below count (wait_until: the database
#      is asked, never a fixed sleep), so a slow machine cannot fail them.
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
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/upgrade.sh
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
versions=$(fencing_versions | tr '\n' ' ')
versions=${versions% }
released=
for v in $(fencing_releases | awk '{ print $1 }'); do
    [ "$v" = "$newest" ] || released="$released $v"
done
echo "# PostgreSQL $FENCING_PGVER; versions: $versions; newest: $newest; released (test/releases): ${released# }"

# The record of releases first: every version older than the newest is a
# release whose commit this clone has, and every release has its scripts
# here.  Nothing to update from is a failure, never a skip: the suite has
# something to test as soon as sql/ holds an older version.
for v in $versions; do
    [ "$v" = "$newest" ] && continue
    case " $released " in
    *" $v "*) ;;
    *) tap_ok 1 "version $v (sql/fencing--$v*.sql) is recorded in test/releases" ;;
    esac
done
for v in $released; do
    case " $versions " in
    *" $v "*) ;;
    *) tap_ok 1 "release $v (test/releases) still has its scripts in sql/" ;;
    esac
    fencing_release_source "$v" "$FENCING_WORK/release-$v" 2>"$FENCING_WORK/source.err"
    tap_ok $? "release $v: commit $(fencing_release_commit "$v" | cut -c1-12) is in this clone and its fencing.control says $v"
    [ -s "$FENCING_WORK/source.err" ] && tap_diag "$(cat "$FENCING_WORK/source.err")"
done
if [ -z "$released" ]; then
    tap_ok 1 "a released version to update from (test/releases lists none older than $newest)"
    tap_done
    exit 1
fi

# Wait until the boolean SQL expression $2 holds in database $1: it is
# asked every 0.2 s, for at most FENCING_UPDATE_WAIT seconds (600), so a
# slow machine only makes the suite slower.  $3 describes the condition: a
# TAP line says whether it came.  Every later check that counts what the
# writers did at a given moment is made true by such a wait, never by a
# fixed sleep.
wait_until() {
    local db=$1 cond=$2 what=$3 i t0=$SECONDS
    for i in $(seq 1 $((${FENCING_UPDATE_WAIT:-600} * 5))); do
        if [ "$(fencing_sql "$db" "SELECT ($cond)" 2>/dev/null)" = t ]; then
            tap_ok 0 "$what ($((SECONDS - t0)) s)"
            return 0
        fi
        sleep 0.2
    done
    tap_ok 1 "$what (not within ${FENCING_UPDATE_WAIT:-600} s)"
    return 1
}

psql_bg() {     # db sql logfile: a background session
    fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$1" -c "$2" >"$3" 2>&1 &
}

# The reference: a fresh CREATE EXTENSION of the newest version, filled by
# the same script (what the extension creates per protected table or scope
# must be the same too, member or not).
# $1: filled or empty (the database compared with it was filled or not).
reference_dump() {
    local kind=$1
    fencing_sql postgres "DROP DATABASE IF EXISTS fresh_$kind" "CREATE DATABASE fresh_$kind"
    fencing_sql "fresh_$kind" "CREATE EXTENSION fencing VERSION '$newest'"
    if [ "$kind" = filled ]; then
        fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "fresh_$kind" \
            -f "$FENCING_WORK/fill.sql" >"$FENCING_WORK/fresh-fill.log" 2>&1 \
            || { tap_diag "the reference's fill failed:" "$(grep -E 'ERROR|DETAIL' "$FENCING_WORK/fresh-fill.log")"; }
    fi
    fencing_ext_dump "fresh_$kind" "$FENCING_WORK/fresh_$kind.dump"
}

# Compare the extension in $1 with the reference $3 (filled or empty); $2
# names it.
compare_with_fresh() {
    local db=$1 what=$2 kind=${3:-filled}
    [ -f "$FENCING_WORK/fresh_$kind.dump" ] || reference_dump "$kind"
    fencing_ext_dump "$db" "$FENCING_WORK/$db.dump"
    if diff -u "$FENCING_WORK/fresh_$kind.dump" "$FENCING_WORK/$db.dump" >"$FENCING_WORK/$db.diff"; then
        tap_ok 0 "$what: the same objects, definitions, owners, ACLs, comments, config-dump marks and members as a fresh CREATE EXTENSION fencing VERSION '$newest' ($kind alike; $(grep -c '^ALTER EXTENSION fencing ADD' "$FENCING_WORK/$db.dump") members)"
    else
        tap_ok 1 "$what: differs from a fresh CREATE EXTENSION fencing VERSION '$newest' ($kind alike)"
        tap_diag "$(grep -E '^[-+]' "$FENCING_WORK/$db.diff" | grep -vE '^[-+]\s*$|^[-+]--' | head -60)"
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
    local v=$1
    local inst=$FENCING_WORK/inst-$v own_lib=yes
    local db=fencing_regress st
    FENCING_BINDIR=$(fencing_pg_copy "$inst")
    fencing_build_release "$v" "$inst" 2>"$FENCING_WORK/source.err"
    st=$?
    if [ $st -eq 2 ]; then
        tap_ok 1 "release $v's source (test/releases)"
        tap_diag "$(cat "$FENCING_WORK/source.err")"
        return
    fi
    if [ $st -ne 0 ]; then
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
    if [ $st -ne 0 ] && [ $own_lib = no ] && grep -q 'older than its library' "$FENCING_WORK/fill.log"; then
        # allowed: the new library may refuse work that needs the new
        # objects (55000, HINT: ALTER EXTENSION fencing UPDATE)
        tap_ok 0 "release $v's objects with the new library refuse to be filled until the update, with a clear error: $(grep -m1 -o 'ERROR: .*' "$FENCING_WORK/fill.log")"
        echo "# so the writers' update from $v is tested where $v's own library builds (PostgreSQL 15); here only the walk below runs"
        fencing_cluster_stop "$PGDATA"
        return
    fi
    tap_ok $st "filled at $v: row, key, table and partitioned scopes, a shared scope, keys in every state, leases"
    if [ $st -ne 0 ]; then
        tap_diag "$(grep -E 'ERROR|DETAIL' "$FENCING_WORK/fill.log" | head -5)"
        fencing_cluster_stop "$PGDATA"
        return
    fi
    # what the waits below count: a writer's writes, acknowledged or
    # failed (a failure is for the checks to report, not to wait for)
    fencing_sql "$db" "CREATE FUNCTION app.tries(w int, since timestamptz DEFAULT '-infinity') RETURNS bigint
        LANGUAGE sql AS \$\$ SELECT (SELECT count(*) FROM app.acked WHERE writer = w AND at > since)
                             + (SELECT count(*) FROM app.failed WHERE writer = w AND at > since) \$\$"
    # the state of the extension's own tables, to compare after the update
    local before
    before=$(fencing_sql "$db" "SELECT count(*) FROM fencing.protected" "SELECT count(*) FROM fencing.scopes" \
                 "SELECT count(*) FROM fencing.idempotency_keys" "SELECT count(*) FROM fencing.leases" | tr '\n' ' ')

    # 2. writers on v's library
    local wlog=$FENCING_WORK/writers
    mkdir -p "$wlog" && chown postgres: "$wlog"
    # (each runs until app.control.stop; the hour is only a backstop)
    psql_bg "$db" "CALL app.watcher(3600)" "$wlog/watcher.log"
    psql_bg "$db" "CALL app.fresh(1, 3600)" "$wlog/fresh1.log"
    psql_bg "$db" "CALL app.fresh(2, 3600)" "$wlog/fresh2.log"
    psql_bg "$db" "CALL app.stale(3600)" "$wlog/stale.log"
    wait_until "$db" "app.tries(1) >= 20 AND app.tries(2) >= 20
                  AND (SELECT count(*) FROM app.stale WHERE writer = 0 AND what LIKE '% equal') >= 2
                  AND (SELECT count(DISTINCT at) FROM app.watch) >= 5" \
        "writers 1 and 2 and stale writer 0 write on $v's library (20 writes each, 2 stale attempts on their tokens), the watcher looks" \
        || { fencing_sql "$db" "UPDATE app.control SET stop = true"; wait; fencing_cluster_stop "$PGDATA"; return; }

    # 3. the package upgrade: the new files over the old ones
    fencing_sql "$db" "INSERT INTO app.watch (what) VALUES ('files replaced')"
    fencing_install_files "$new_inst" "$inst"
    # writer 3 and stale writer 1 come back in a new session (the new
    # library) every second
    ( while :; do
          fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -d "$db" -c "CALL app.fresh(3, 1)" >>"$wlog/fresh3.log" 2>&1
          [ "$(fencing_sql "$db" "SELECT stop FROM app.control")" = t ] && break
      done ) &
    ( while :; do
          fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -d "$db" -c "CALL app.stale(1, 1)" >>"$wlog/stale1.log" 2>&1
          [ "$(fencing_sql "$db" "SELECT stop FROM app.control")" = t ] && break
      done ) &
    wait_until "$db" "app.tries(3) >= 5 AND (SELECT count(*) FROM app.stale WHERE writer = 1) >= 1" \
        "writer 3 and stale writer 1 try in new sessions (the new library) before the update" \
        || { fencing_sql "$db" "UPDATE app.control SET stop = true"; wait; fencing_cluster_stop "$PGDATA"; return; }

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
    # a watcher in a new session: the old library's (step 2) may fail
    # closed once the updated objects call functions it does not have
    psql_bg "$db" "CALL app.watcher(3600)" "$wlog/watcher2.log"
    psql_bg "$db" "CALL app.fresh(4, 3600)" "$wlog/fresh4.log"
    wait_until "$db" "app.tries(4) >= 20 AND app.tries(3, '$t1') >= 5
                  AND (SELECT count(*) FROM app.stale WHERE writer = 1 AND at > '$t1') >= 1
                  AND (SELECT count(DISTINCT at) FROM app.watch WHERE at > '$t1') >= 6" \
        "after the update: writers 3 and 4 write (5 and 20 writes), stale writer 1 tries, the watcher looks"
    fencing_sql "$db" "UPDATE app.control SET stop = true"
    wait
    for f in "$wlog"/*.log; do
        [ -s "$f" ] && tap_diag "$(basename "$f"): $(head -5 "$f")"
    done

    # 5. the checks.  Sessions of the old library (writers 1 and 2, stale
    # writer 0) run code that knows only the old objects: after the update
    # they may fail (closed: an error), never accept a stale write.
    # Sessions of the new library (writers 3 and 4, stale writer 1) must go
    # on as if nothing happened.
    local q b d a acc
    q="SELECT count(*) FILTER (WHERE at < '$t0'), count(*) FILTER (WHERE at BETWEEN '$t0' AND '$t1'),
              count(*) FILTER (WHERE at > '$t1'), count(*) FILTER (WHERE sqlstate = 'accepted')
         FROM app.stale"
    IFS='|' read -r b d a acc <<<"$(fencing_sql "$db" "$q")"
    tap_ok "$([ "$acc" -eq 0 ] && [ "$b" -gt 0 ] && [ "$a" -gt 0 ]; echo $?)" \
        "no stale write accepted: $b attempts before the update, $d during, $a after; $acc accepted"
    local bad_new bad_old_before closed_old n_new
    n_new=$(fencing_sql "$db" "SELECT count(*) FROM app.stale WHERE writer = 1")
    bad_new=$(fencing_sql "$db" "SELECT count(*) FROM app.stale WHERE writer = 1 AND sqlstate <> 'SF001'")
    tap_ok "$([ "$bad_new" -eq 0 ] && [ "$n_new" -gt 0 ]; echo $?)" \
        "new library: all $n_new stale attempts refused with SF001, before, during and after the update ($bad_new otherwise)"
    [ "$bad_new" -ne 0 ] && tap_diag "$(fencing_sql "$db" "SELECT what, sqlstate, message, count(*) FROM app.stale WHERE writer = 1 AND sqlstate <> 'SF001' GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10")"
    bad_old_before=$(fencing_sql "$db" "SELECT count(*) FROM app.stale WHERE writer = 0 AND sqlstate <> 'SF001' AND at < '$t0'")
    closed_old=$(fencing_sql "$db" "SELECT count(*) FROM app.stale WHERE writer = 0 AND sqlstate NOT IN ('SF001', 'accepted') AND at >= '$t0'")
    tap_ok "$([ "$bad_old_before" -eq 0 ]; echo $?)" \
        "old library: every stale attempt before the update refused with SF001 ($bad_old_before otherwise); after it $closed_old failed closed with another error"
    [ "$closed_old" -ne 0 ] && tap_diag "old library after the update (fails closed): $(fencing_sql "$db" "SELECT string_agg(DISTINCT sqlstate || ' ' || message, '; ') FROM app.stale WHERE writer = 0 AND sqlstate NOT IN ('SF001', 'accepted') AND at >= '$t0'")"
    local nfail nfail_old
    nfail=$(fencing_sql "$db" "SELECT count(*) FROM app.failed WHERE writer IN (3, 4) OR at < '$t0'")
    nfail_old=$(fencing_sql "$db" "SELECT count(*) FROM app.failed WHERE writer IN (1, 2) AND at >= '$t0'")
    tap_ok "$([ "$nfail" -eq 0 ]; echo $?)" \
        "no fresh write failed in a session of the new library, nor before the update ($nfail failed); old library after the update: $nfail_old failed closed"
    [ "$nfail" -ne 0 ] && tap_diag "$(fencing_sql "$db" "SELECT writer, sqlstate, message, count(*) FROM app.failed WHERE writer IN (3, 4) OR at < '$t0' GROUP BY 1, 2, 3 ORDER BY 4 DESC LIMIT 10")"
    [ "$nfail_old" -ne 0 ] && tap_diag "old library after the update (fails closed): $(fencing_sql "$db" "SELECT string_agg(DISTINCT sqlstate || ' ' || message, '; ') FROM app.failed WHERE writer IN (1, 2) AND at >= '$t0'")"
    q="SELECT w.writer, count(a.n) FILTER (WHERE at < '$t0'), count(a.n) FILTER (WHERE at BETWEEN '$t0' AND '$t1'),
              count(a.n) FILTER (WHERE at > '$t1')
         FROM (VALUES (1), (2), (3), (4)) w(writer) LEFT JOIN app.acked a USING (writer)
        GROUP BY 1 ORDER BY 1"
    local w wb wd wa
    while IFS='|' read -r w wb wd wa; do
        case $w in
        1|2) tap_ok "$([ "$wb" -gt 0 ]; echo $?)" "writer $w (a session of the old library) wrote before the update: $wb; during: $wd; after: $wa" ;;
        3) tap_ok "$([ "$wa" -gt 0 ]; echo $?)" "writer $w (new sessions, the new library) wrote before, during and after the update: $wb, $wd, $wa" ;;
        4) tap_ok "$([ "$wa" -gt 0 ]; echo $?)" "writer $w (a session started after the update) wrote: $wa acknowledged writes" ;;
        esac
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
    [ "$lowered" -ne 0 ] && tap_diag "$(fencing_sql "$db" "SELECT at, what, prev_fence || ' -> ' || fence, prev_n || ' -> ' || n FROM (
         SELECT at, what, fence, n, lag(fence) OVER w AS prev_fence, lag(n) OVER w AS prev_n
           FROM app.watch WHERE fence IS NOT NULL WINDOW w AS (PARTITION BY what ORDER BY at)) s
        WHERE fence OPERATOR(fencing.<) prev_fence OR n < prev_n ORDER BY at LIMIT 10")"
    local after
    after=$(fencing_sql "$db" "SELECT count(*) FROM fencing.protected" \
                "SELECT count(*) FROM fencing.idempotency_keys" "SELECT count(*) FROM fencing.leases" | tr '\n' ' ')
    tap_ok "$([ "$(echo "$before" | awk '{print $1, $3, $4}')" = "${after% }" ]; echo $?)" \
        "protected tables, idempotency keys and leases all kept (before: $before; after: $after)"
    run_verify "$db" "after the update from $v"

    # 6. the same extension as a fresh one
    compare_with_fresh "$db" "updated from $v" filled

    # 7. the regression suite against the updated database
    fencing_sql "$db" "SELECT fencing.unprotect(relid) FROM fencing.protected" "DROP SCHEMA app CASCADE" >/dev/null
    # drop what the extension made for the application's data (relations of
    # its schema that a fresh CREATE EXTENSION does not have, members or not)
    fencing_sql postgres "DROP DATABASE IF EXISTS pristine" "CREATE DATABASE pristine"
    local keep
    keep=$(fencing_sql pristine "CREATE EXTENSION fencing VERSION '$newest'" \
        "SELECT string_agg(quote_literal(relname), ',') FROM pg_class WHERE relnamespace = 'fencing'::regnamespace")
    fencing_sql "$db" "DO \$\$ DECLARE c record; BEGIN
        FOR c IN SELECT oid::regclass AS rel, relkind FROM pg_class
                  WHERE relnamespace = 'fencing'::regnamespace AND relkind IN ('r', 'p', 'S', 'v')
                    AND relname NOT IN ($keep) LOOP
            IF EXISTS (SELECT FROM pg_depend WHERE classid = 'pg_class'::regclass AND objid = c.rel
                          AND refclassid = 'pg_extension'::regclass AND deptype = 'e') THEN
                EXECUTE format('ALTER EXTENSION fencing DROP %s %s',
                               CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END, c.rel);
            END IF;
            EXECUTE format('DROP %s IF EXISTS %s CASCADE',
                           CASE c.relkind WHEN 'S' THEN 'SEQUENCE' WHEN 'v' THEN 'VIEW' ELSE 'TABLE' END, c.rel);
        END LOOP; END \$\$" >"$FENCING_WORK/cleanup.log" 2>&1 \
        || tap_diag "cleaning the application's data out failed:" "$(cat "$FENCING_WORK/cleanup.log")"
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
    local nok nbad
    fencing_regress regress "$FENCING_WORK/regress-$v" CONTRIB_TESTDB="$db" \
        EXTRA_REGRESS_OPTS=--use-existing >"$FENCING_WORK/regress-$v.tap"
    st=$?
    nok=$(grep -c '^ok ' "$FENCING_WORK/regress-$v.tap")
    nbad=$(grep -c '^not ok ' "$FENCING_WORK/regress-$v.tap")
    tap_ok "$([ $st -eq 0 ] && [ "$nbad" -eq 0 ] && [ "$nok" -gt 0 ]; echo $?)" \
        "the pg_regress suite against the database updated from $v: $nok passed, $nbad failed"
    [ $st -ne 0 ] && tap_diag "$(grep -v '^ok ' "$FENCING_WORK/regress-$v.tap" | sed 's/^# //' | head -80)"
    fencing_cluster_stop "$PGDATA"
}

# Every path from every version to the newest, on a filled database.
walk_paths() {
    local inst=$FENCING_WORK/inst-walk
    FENCING_BINDIR=$(fencing_pg_copy "$inst")
    fencing_install_files "$new_inst" "$inst"
    export FENCING_BINDIR
    fencing_cluster_start walk "shared_preload_libraries = 'fencing'"
    rm -f "$FENCING_WORK"/fresh_*.dump
    local v path i=0 db step known kind
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
            kind=filled
            if ! fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$db" -1 \
                    -f "$FENCING_WORK/fill.sql" -f "$FENCING_WORK/verify.sql" >"$FENCING_WORK/walk.err" 2>&1; then
                if grep -q 'older than its library' "$FENCING_WORK/walk.err"; then
                    # the new library refuses to fill the old objects, with
                    # a clear error: walk the path on an empty database
                    kind=empty
                    echo "# path ${path// / -> }: $v's objects cannot be filled with the new library ($(grep -m1 -o 'ERROR: .*' "$FENCING_WORK/walk.err")): walked on an empty database"
                else
                    tap_ok 1 "path $path: fill at $v"
                    tap_diag "$(grep -E 'ERROR|DETAIL' "$FENCING_WORK/walk.err" | head -5)"
                    continue
                fi
            fi
            local ok=0
            for step in ${path#* }; do
                fencing_sql "$db" "ALTER EXTENSION fencing UPDATE TO '$step'" >"$FENCING_WORK/walk.err" 2>&1 \
                    || { ok=1; tap_diag "$(cat "$FENCING_WORK/walk.err")"; break; }
            done
            tap_ok $ok "path ${path// / -> }: every step of ALTER EXTENSION fencing UPDATE TO runs on a $kind database"
            [ $ok -eq 0 ] || continue
            compare_with_fresh "$db" "path ${path// / -> }" $kind
            [ $kind = filled ] && run_verify "$db" "path ${path// / -> }"
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
