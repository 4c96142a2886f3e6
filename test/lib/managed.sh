# shellcheck shell=bash
# test/lib/managed.sh: the managed edition (managed/, fencing_sql) for its
# suites: a server with pg_tle, databases where a role that is not a
# superuser installs the edition, and the behaviour tests run against it.
# Source after common.sh (and pgtle.sh).
#
#   fencing_managed_cluster NAME [ROUTE]  a cluster of its own (for the pgtle
#                                       route: pg_tle preloaded, installed into
#                                       FENCING_BINDIR's installation first);
#                                       sets PGHOST PGPORT PGDATA
#   fencing_managed_pgtle               pg_tle installed (below)
#   fencing_client_prove DIR TEST ...   the client suites' TAP test, once per
#                                       edition (below)
#   fencing_managed_db DB ROUTE ROLE    database DB with the edition installed
#                                       by ROLE: ROUTE pgtle (pgtle.install_extension,
#                                       CREATE EXTENSION fencing_sql) or script
#                                       (psql -f managed/fencing_sql.sql).  ROLE is
#                                       made as RDS makes its admin role: not a
#                                       superuser, CREATE on the database, and
#                                       (pgtle) a member of pgtle_admin; or ROLE
#                                       postgres: the superuser installs it (and
#                                       the DDL guard with it)
#   fencing_managed_regress OUT DB TEST...  the regression files TEST against DB:
#                                       managed/sql/TEST.sql when there is one,
#                                       else the shared sql/TEST.sql transcribed
#                                       (below); expected output
#                                       managed/expected/TEST.out (and _1.out)
#                                       when there is one, else expected/TEST.out;
#                                       prints TAP, one line per file
#
# The transcription.  The shared files spell fence literals E:C, the C
# type's text form.  The edition's fence is a composite, whose literal is
# (E,C) (PostgreSQL reads a quoted literal for a fence column with the
# composite's own input, which no SQL can replace); every quoted 'E:C' is
# spelled '(E,C)' for the edition, except the tokens of SET fencing.token,
# set_config('fencing.token', ...) and set_token(), which the edition reads
# in the C edition's form; a bare counter 'C' (epoch 0) written into a fence
# column is spelled '(0,C)' where the statement shows it is one (after
# "fence =" or "f =", and as the last value of a VALUES row); and E:C in
# COPY data written inline (FROM stdin) is (E,C), quoted in CSV, and a
# bare counter in its last column when the column list ends with fence.  Nothing
# else changes: the same statements, the same contract.  And psql shows no CONTEXT lines (\set SHOW_CONTEXT
# never): the edition raises its errors from PL/pgSQL, whose call stack is
# no part of the contract (the C edition's errors carry none).
fencing_managed_transcribe() {
    echo '\set SHOW_CONTEXT never'
    perl -ne '
        if ($copy) {
            $copy = 0 if /^\\\.$/;
            s/\b(\d+):(\d+)\b/$csv ? "\"($1,$2)\"" : "($1,$2)"/ge if $copy;
            s/(^|\t)(\d+)$/$1(0,$2)/ if $copy && $lastfence && !$csv;
            print; next;
        }
        if (/^COPY .* FROM stdin/i) { $copy = 1; $csv = /csv/i; $lastfence = /, fence\) FROM/; }
        s/(?<!fencing\.token = )(?<!fencing\.token TO )(?<!set_token\()(?<!\x27fencing\.token\x27, )\x27(\d+):(\d+)\x27/\x27($1,$2)\x27/g;
        s/\b(fence|f) = \x27(\d+)\x27/$1 = \x27(0,$2)\x27/g;
        s/(\((?:[^()\x27]|\x27[^\x27]*\x27)*, )\x27(\d+)\x27(?=\))/$1\x27(0,$2)\x27/g if /VALUES/;
        print;' "$1"
}

fencing_managed_cluster() {
    if [ "${2:-}" = script ]; then
        fencing_cluster_start "$1"
        return
    fi
    fencing_managed_pgtle || fencing_die "cannot install pg_tle from $(fencing_pgtle_tarball)"
    fencing_cluster_start "$1" "shared_preload_libraries = 'pg_tle'"
}

#   fencing_managed_pgtle               pg_tle installed into FENCING_BINDIR's
#                                       installation (once per run, under a
#                                       lock: the managed suites and the
#                                       examples share it)
fencing_managed_pgtle() {
    local t root
    t=$(fencing_pgtle_tarball)
    [ -n "$t" ] || fencing_die "no pg_tle source: set FENCING_PGTLE_SRC (pg_tle-*.tar.gz)"
    if [ "$FENCING_PGVER" = 15 ]; then root=${FENCING_BINDIR%/usr/lib/postgresql/*}; else root=${FENCING_BINDIR%/bin}; fi
    fencing_with_lock "$FENCING_WORK/pgtle-install.lock" fencing_managed_pgtle_once "$t" "$root"
}
fencing_managed_pgtle_once() {
    [ -f "$2/.pg_tle-installed" ] && return 0
    fencing_pgtle_install "$1" "$2" && touch "$2/.pg_tle-installed"
}

fencing_managed_psql() {
    fencing_as_postgres "$FENCING_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$@"
}

fencing_managed_db() {
    local db=$1 route=$2 role=$3 m=$FENCING_SRC/managed
    fencing_managed_psql -d postgres -c "CREATE DATABASE $db" || return 1
    if [ "$role" != postgres ]; then
        fencing_managed_psql -d postgres \
            -c "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$role') THEN CREATE ROLE $role LOGIN NOSUPERUSER; END IF; END \$\$" \
            -c "GRANT CREATE ON DATABASE $db TO $role" || return 1
    fi
    case $route in
    pgtle)
        fencing_managed_psql -d "$db" -c 'CREATE EXTENSION pg_tle' || return 1
        [ "$role" != postgres ] && { fencing_managed_psql -d "$db" -c "GRANT pgtle_admin TO $role" || return 1; }
        fencing_managed_psql -U "$role" -d "$db" -f "$m/fencing_sql_pgtle.sql" >/dev/null &&
            fencing_managed_psql -U "$role" -d "$db" -c 'CREATE EXTENSION fencing_sql' ;;
    script)
        fencing_managed_psql -U "$role" -d "$db" -f "$m/fencing_sql.sql" ;;
    *) fencing_die "fencing_managed_db: unknown route $route (pgtle or script)" ;;
    esac
}

fencing_managed_regress() {
    fencing_managed_run regress "$@"
}

#   fencing_managed_isolation OUT DB SPEC...  the isolation specs SPEC against
#                                       DB: test/isolation/specs/SPEC.spec
#                                       transcribed; expected output
#                                       managed/isolation/expected/SPEC*.out when
#                                       there is one, else test/isolation/expected/
fencing_managed_isolation() {
    fencing_managed_run isolation "$@"
}

fencing_managed_run() {
    local kind=$1 out=$2 db=$3 t stage st n bad runner src exp mexp ext
    shift 3
    stage=$out/stage
    case $kind in
    regress) src=$FENCING_SRC/sql ext=sql exp=$FENCING_SRC/expected mexp=$FENCING_SRC/managed/expected
             runner=$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/regress/pg_regress ;;
    isolation) src=$FENCING_SRC/test/isolation/specs ext=spec exp=$FENCING_SRC/test/isolation/expected
               mexp=$FENCING_SRC/managed/isolation/expected
               runner=$("$PG_CONFIG" --pkglibdir)/pgxs/src/test/isolation/pg_isolation_regress ;;
    esac
    rm -rf "$out" && mkdir -p "$stage/$ext" "$stage/expected" "$out/results"
    [ "$kind" = isolation ] && mv "$stage/$ext" "$stage/specs"
    for t in "$@"; do
        if [ "$kind" = regress ] && [ -f "$FENCING_SRC/managed/sql/$t.sql" ]; then
            cp "$FENCING_SRC/managed/sql/$t.sql" "$stage/sql/"
        elif [ "$kind" = regress ]; then
            fencing_managed_transcribe "$src/$t.sql" >"$stage/sql/$t.sql"
        else
            # (psql's \set means nothing to isolationtester)
            fencing_managed_transcribe "$src/$t.spec" | sed 1d >"$stage/specs/$t.spec"
        fi
        if compgen -G "$mexp/$t.out" >/dev/null; then
            cp "$mexp/$t.out" "$stage/expected/"
            cp "$mexp/$t"_[0-9].out "$stage/expected/" 2>/dev/null
        else
            cp "$exp/$t.out" "$stage/expected/"
            cp "$exp/$t"_[0-9].out "$stage/expected/" 2>/dev/null
        fi
    done
    chown -R postgres: "$out"
    (cd "$out" && fencing_as_postgres "$runner" --inputdir="$stage" --outputdir="$out" \
        --use-existing --dbname="$db" --bindir="$FENCING_BINDIR" "$@") >"$out.log" 2>&1
    st=$?
    sed -nE -e 's/^(test)? +([^ ]+) +\.\.\. +ok( .*)?$/ok - \2/p' \
        -e 's/^(test)? +([^ ]+) +\.\.\. +(FAILED|failed|ignored).*$/not ok - \2/p' \
        -e 's/^ok [0-9]+ +- +([^ ]+).*$/ok - \1/p' \
        -e 's/^not ok [0-9]+ +- +([^ ]+).*$/not ok - \1/p' "$out.log" \
        | awk '{ sub(/ - /, " " NR " - managed '"$kind"'/"); print }' >"$out/tests.tap"
    n=$(wc -l <"$out/tests.tap")
    bad=$(grep -c '^not ok' "$out/tests.tap")
    cat "$out/tests.tap"
    if [ "$st" -ne 0 ] && [ "$bad" -eq 0 ]; then
        echo "not ok $((n + 1)) - managed $kind: exited $st without a failing test (see $out.log)"
        tail -20 "$out.log" | sed 's/^/# /'
    fi
    [ -f "$out/regression.diffs" ] && head -300 "$out/regression.diffs" | sed 's/^/# /'
    [ "$st" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$n" -gt 0 ]
}

# The body of the managed suites (test/suites/managed.sh, pgtle;
# managed_script.sh, script): the install files up to date; the edition
# installed by a role that is not a superuser and holds only what RDS's
# admin role holds; the regression files of managed/regress.list and the
# isolation specs of managed/isolation.list against it; installed by a
# superuser, the DDL guard.  One cluster of its own.  Prints TAP.
fencing_managed_suite() {
    local route=$1 list st out=$FENCING_WORK/managed-$1
    if [ "$route" = pgtle ] && [ -z "$(fencing_pgtle_tarball)" ]; then
        echo "1..0 # SKIP no pg_tle source (FENCING_PGTLE_SRC, or pg_tle-*.tar.gz in ../shared/vendor)"
        return 0
    fi
    mkdir -p "$out" && chown postgres: "$out"
    bash "$FENCING_SRC/managed/build.sh" --check >"$out/build.log" 2>&1
    tap_ok $? "managed: the install files are built from managed/src (bash managed/build.sh)"
    [ "$tap_failed" -eq 0 ] || sed 's/^/# /' "$out/build.log"
    fencing_managed_cluster "managed-$route" "$route" >"$out/cluster.log" 2>&1 || { cat "$out/cluster.log"; fencing_die "cluster"; }

    fencing_managed_db regression "$route" regress_rds_admin >"$out/install.log" 2>&1
    tap_ok $? "managed ($route): installed by regress_rds_admin, not a superuser (CREATE on the database${route/script/}${route/pgtle/ and pgtle_admin})"
    [ "${PIPESTATUS[0]}" = 0 ] || sed 's/^/# /' "$out/install.log"
    grep -q 'the DDL guard is not installed' "$out/install.log"
    tap_ok $? "managed ($route): the install says that the DDL guard is not installed (no event triggers for that role)"

    list=$(sed 's/#.*//' "$FENCING_SRC/managed/regress.list" | xargs)
    # shellcheck disable=SC2086
    fencing_managed_regress "$out/regress" regression $list | awk -v n="$tap_n" '{ if ($1 == "ok") { sub(/^ok [0-9]+/, "ok " ++n) } else if ($1 == "not") { sub(/^not ok [0-9]+/, "not ok " ++n) } print }' >"$out/regress.tap"
    cat "$out/regress.tap"
    tap_n=$((tap_n + $(grep -cE '^(not )?ok [0-9]+' "$out/regress.tap")))
    tap_failed=$((tap_failed + $(grep -c '^not ok' "$out/regress.tap")))

    # pg_dump keeps protections, fences, keys and leases: a database of its
    # own filled (dump_fill), dumped with pg_dump, restored with pg_restore
    # into a new database by the superuser, and checked there (dump_check)
    fencing_managed_db dumpsrc "$route" regress_rds_admin >"$out/install_dump.log" 2>&1 \
        || { sed 's/^/# /' "$out/install_dump.log"; fencing_die "cannot install the edition for the dump"; }
    fencing_managed_regress "$out/dump_fill" dumpsrc dump_fill | awk -v n="$tap_n" '{ if ($1 == "ok") { sub(/^ok [0-9]+/, "ok " ++n) } else if ($1 == "not") { sub(/^not ok [0-9]+/, "not ok " ++n) } print }' >"$out/dump_fill.tap"
    cat "$out/dump_fill.tap"
    tap_n=$((tap_n + $(grep -cE '^(not )?ok [0-9]+' "$out/dump_fill.tap")))
    tap_failed=$((tap_failed + $(grep -c '^not ok' "$out/dump_fill.tap")))
    {
        fencing_as_postgres "$FENCING_BINDIR/pg_dump" -Fc -f "$out/dumpsrc.pgdump" dumpsrc &&
            fencing_managed_psql -d postgres -c "CREATE DATABASE dumpdst" &&
            fencing_as_postgres "$FENCING_BINDIR/pg_restore" --exit-on-error -d dumpdst "$out/dumpsrc.pgdump"
    } >"$out/dump.log" 2>&1
    st=$?
    tap_ok $st "managed ($route): pg_dump of a database with the edition, restored by pg_restore into another"
    [ "$st" = 0 ] || sed 's/^/# /' "$out/dump.log"
    fencing_managed_regress "$out/dump_check" dumpdst dump_check | awk -v n="$tap_n" '{ if ($1 == "ok") { sub(/^ok [0-9]+/, "ok " ++n) } else if ($1 == "not") { sub(/^not ok [0-9]+/, "not ok " ++n) } print }' >"$out/dump_check.tap"
    cat "$out/dump_check.tap"
    tap_n=$((tap_n + $(grep -cE '^(not )?ok [0-9]+' "$out/dump_check.tap")))
    tap_failed=$((tap_failed + $(grep -c '^not ok' "$out/dump_check.tap")))

    fencing_managed_move "$route" "$out/move"

    # the isolation specs once (the two routes install the same code): in
    # the pgtle suite, in a database of its own, as make installcheck
    # gives them
    if [ "$route" = pgtle ]; then
    fencing_managed_db isolation "$route" regress_rds_admin >"$out/install_iso.log" 2>&1 \
        || { sed 's/^/# /' "$out/install_iso.log"; fencing_die "cannot install the edition for the isolation specs"; }
    list=$(sed 's/#.*//' "$FENCING_SRC/managed/isolation.list" | xargs)
    # shellcheck disable=SC2086
    fencing_managed_isolation "$out/isolation" isolation $list | awk -v n="$tap_n" '{ if ($1 == "ok") { sub(/^ok [0-9]+/, "ok " ++n) } else if ($1 == "not") { sub(/^not ok [0-9]+/, "not ok " ++n) } print }' >"$out/isolation.tap"
    cat "$out/isolation.tap"
    tap_n=$((tap_n + $(grep -cE '^(not )?ok [0-9]+' "$out/isolation.tap")))
    tap_failed=$((tap_failed + $(grep -c '^not ok' "$out/isolation.tap")))
    fi

    fencing_managed_db regression_su "$route" postgres >"$out/install_su.log" 2>&1
    tap_ok $? "managed ($route): installed by a superuser, with the DDL guard"
    fencing_managed_regress "$out/regress_su" regression_su ddl_guard_managed | awk -v n="$tap_n" '{ if ($1 == "ok") { sub(/^ok [0-9]+/, "ok " ++n) } else if ($1 == "not") { sub(/^not ok [0-9]+/, "not ok " ++n) } print }' >"$out/regress_su.tap"
    cat "$out/regress_su.tap"
    tap_n=$((tap_n + $(grep -cE '^(not )?ok [0-9]+' "$out/regress_su.tap")))
    tap_failed=$((tap_failed + $(grep -c '^not ok' "$out/regress_su.tap")))
    tap_done
    [ "$tap_failed" -eq 0 ]
}

# A regression file against DB, its TAP lines numbered on from tap_n.
fencing_managed_regress_tap() {
    local out=$1
    fencing_managed_regress "$@" | awk -v n="$tap_n" '{ if ($1 == "ok") { sub(/^ok [0-9]+/, "ok " ++n) } else if ($1 == "not") { sub(/^not ok [0-9]+/, "not ok " ++n) } print }' >"$out.tap"
    cat "$out.tap"
    tap_n=$((tap_n + $(grep -cE '^(not )?ok [0-9]+' "$out.tap")))
    tap_failed=$((tap_failed + $(grep -c '^not ok' "$out.tap")))
}

# What a database filled by move_fill holds (managed/sql/move_snapshot.sql,
# read by the superuser), and which edition it has, into FILE.
fencing_managed_move_snapshot() {
    {
        fencing_managed_psql -d "$1" -f "$FENCING_SRC/managed/sql/move_snapshot.sql" &&
            fencing_managed_psql -d "$1" -At -c "SELECT 'extensions: ' || coalesce(string_agg(extname || ' ' || extversion, ', ' ORDER BY extname), '(none)') || '; fencing.edition(): ' || (to_regprocedure('fencing.edition()') IS NOT NULL) FROM pg_extension WHERE extname LIKE 'fencing%'"
    } >"$2" 2>&1
}

# managed/move_to_c.sql as ROLE against DB, psql's output (SQLSTATEs shown)
# into FILE; its exit status.
fencing_managed_move_run() {
    fencing_as_postgres "$FENCING_BINDIR/psql" -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -U "$2" -d "$1" \
        -f "$FENCING_SRC/managed/move_to_c.sql" >"$3" 2>&1
}

# The move to the C edition (managed/move_to_c.sql; the C edition is
# installed in the suites' installation, not preloaded): a database filled
# by move_fill, dumped with pg_dump and restored into another; moves that
# must fail, each leaving the database as it was (not a superuser; another
# session connected; a view that depends on the edition; CREATE EXTENSION
# failing after the edition was dropped, in the same transaction); the
# move in place and in the restored copy, each leaving the same
# protections, fences, leases and keys (move_snapshot) and passing
# move_check.
fencing_managed_move() {
    local route=$1 out=$2 st db bg i
    mkdir -p "$out" && chown postgres: "$out"
    fencing_managed_db movesrc "$route" regress_rds_admin >"$out/install.log" 2>&1 \
        || { sed 's/^/# /' "$out/install.log"; fencing_die "cannot install the edition for the move"; }
    fencing_managed_regress_tap "$out/move_fill" movesrc move_fill
    fencing_managed_move_snapshot movesrc "$out/before.txt"
    tap_ok $? "managed ($route) move: what the filled database holds, read"
    {
        fencing_as_postgres "$FENCING_BINDIR/pg_dump" -Fc -f "$out/movesrc.pgdump" movesrc &&
            fencing_managed_psql -d postgres -c "CREATE DATABASE movedump" &&
            fencing_as_postgres "$FENCING_BINDIR/pg_restore" --exit-on-error -d movedump "$out/movesrc.pgdump"
    } >"$out/dump.log" 2>&1
    st=$?
    tap_ok $st "managed ($route) move: the filled database dumped with pg_dump, restored with pg_restore into another"
    [ "$st" = 0 ] || sed 's/^/# /' "$out/dump.log"

    # moves that fail, each leaving the database as it was
    fencing_managed_move_refused() {
        local what=$1 code=$2 role=$3
        fencing_managed_move_run movesrc "$role" "$out/refused.log"
        st=$?
        fencing_managed_move_snapshot movesrc "$out/after_refused.txt"
        [ "$st" != 0 ] && grep -q "ERROR:  $code:" "$out/refused.log" && cmp -s "$out/before.txt" "$out/after_refused.txt"
        st=$?
        tap_ok $st "managed ($route) move refused ($code): $what; the database left as it was"
        if [ "$st" != 0 ]; then
            sed 's/^/# /' "$out/refused.log" | head -20
            diff "$out/before.txt" "$out/after_refused.txt" | head -20 | sed 's/^/# /'
        fi
    }
    fencing_managed_move_refused "run by a role that is not a superuser" 42501 regress_rds_admin
    # another session on the database (a writer still running)
    fencing_as_postgres env PGAPPNAME=move_test_writer "$FENCING_BINDIR/psql" -X -d movesrc -c "SELECT pg_sleep(300)" >/dev/null 2>&1 &
    bg=$!
    for i in $(seq 1 100); do
        [ "$(fencing_managed_psql -d postgres -At -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'move_test_writer'")" = 1 ] && break
        sleep 0.1
    done
    fencing_managed_move_refused "another session is connected to the database" 55006 postgres
    fencing_managed_psql -d postgres -At -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'move_test_writer'" >/dev/null
    wait "$bg" 2>/dev/null
    for i in $(seq 1 100); do
        [ "$(fencing_managed_psql -d postgres -At -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'move_test_writer'")" = 0 ] && break
        sleep 0.1
    done
    fencing_managed_psql -U regress_rds_admin -d movesrc -c "CREATE VIEW moved.account_fences AS SELECT id, fencing.fence_text(fence) AS fence FROM moved.accounts" >/dev/null
    fencing_managed_move_refused "a view outside the edition depends on it" 2BP01 postgres
    fencing_managed_psql -U regress_rds_admin -d movesrc -c "DROP VIEW moved.account_fences" >/dev/null
    # a failure after the edition was dropped: an event trigger of one of
    # the C edition's names makes CREATE EXTENSION fencing fail
    fencing_managed_psql -d movesrc -c "CREATE FUNCTION public.move_test_et() RETURNS event_trigger LANGUAGE plpgsql AS \$\$ BEGIN END \$\$" \
        -c "CREATE EVENT TRIGGER fencing_indirect_ddl_start ON ddl_command_start EXECUTE FUNCTION public.move_test_et()" >/dev/null
    fencing_managed_move_refused "CREATE EXTENSION fencing fails after the edition was dropped, in the same transaction" 42710 postgres
    fencing_managed_psql -d movesrc -c "DROP EVENT TRIGGER fencing_indirect_ddl_start" -c "DROP FUNCTION public.move_test_et()" >/dev/null

    # the moves: in place, and in the restored copy
    for db in movesrc movedump; do
        if [ "$db" = movesrc ]; then
            fencing_managed_move_late_writer "$route" "$out" "$db"
            st=$?
        else
            fencing_managed_move_run "$db" postgres "$out/move_$db.log"
            st=$?
        fi
        grep -q 'NOTICE:  00000: moved to the C edition, fencing 1.4: 7 protected table(s), 10 key fence(s) in 5 scope(s), 2 lease(s), 4 idempotency key(s), 10 fence column(s)' "$out/move_$db.log"
        tap_ok $((st + $?)) "managed ($route) move: managed/move_to_c.sql moved $db to the C edition (7 tables, 10 key fences, 2 leases, 4 keys, 10 fence columns)"
        [ "$tap_failed" -gt 0 ] && [ "$st" != 0 ] && sed 's/^/# /' "$out/move_$db.log" | head -30
        fencing_managed_move_snapshot "$db" "$out/after_$db.txt"
        diff <(sed '$d' "$out/before.txt") <(sed '$d' "$out/after_$db.txt") >"$out/after_$db.diff" &&
            [[ $(tail -n 1 "$out/before.txt") = *"; fencing.edition(): true" ]] &&
            [ "$(tail -n 1 "$out/after_$db.txt")" = "extensions: fencing 1.4; fencing.edition(): false" ]
        st=$?
        tap_ok $st "managed ($route) move: $db has the same protections, scopes, fences, leases, keys and rows as before, under the C edition"
        [ "$st" = 0 ] || { head -40 "$out/after_$db.diff" | sed 's/^/# /'; tail -n 1 "$out/before.txt" "$out/after_$db.txt" | sed 's/^/# /'; }
        fencing_managed_regress_tap "$out/move_check_$db" "$db" move_check
        if [ "$route" = pgtle ]; then
            fencing_managed_psql -d "$db" -At -c "SELECT pgtle.uninstall_extension('fencing_sql')" \
                -c "SELECT count(*) FROM pgtle.available_extensions() WHERE name = 'fencing_sql'" >"$out/uninstall_$db.log" 2>&1
            [ "$(tail -n 1 "$out/uninstall_$db.log")" = 0 ]
            tap_ok $? "managed ($route) move: pg_tle's registration of fencing_sql removed from $db afterwards (pgtle.uninstall_extension)"
        fi
    done
}

# The move of DB with a writer that connects after the script's check of
# other sessions: the script is fed to psql through a pipe, up to its
# locks; the writer, a stale token set, then waits for the lock of the
# table it writes; the rest of the script follows.  The writer's write
# must not get in (after the move the C edition judges it: its token was
# set before the library was loaded in its session, 55000, or stale,
# SF001).  The move's output into OUT/move_DB.log; its exit status.
fencing_managed_move_late_writer() {
    local route=$1 out=$2 db=$3 fifo mv wr i st script=$FENCING_SRC/managed/move_to_c.sql
    fifo=$out/move.fifo
    rm -f "$fifo" && mkfifo "$fifo" && chown postgres: "$fifo"
    fencing_as_postgres env PGAPPNAME=move_test_move "$FENCING_BINDIR/psql" -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
        -d "$db" -f "$fifo" >"$out/move_$db.log" 2>&1 &
    mv=$!
    exec 7>"$fifo"
    # (the line that ends the script's lock block: $lock$;)
    # shellcheck disable=SC2016
    sed -n '1,/^\$lock\$;$/p' "$script" >&7
    for i in $(seq 1 100); do
        [ "$(fencing_managed_psql -d postgres -At -c "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE a.application_name = 'move_test_move' AND l.relation = 'moved.ledger'::regclass AND l.mode = 'AccessExclusiveLock' AND l.granted" -d "$db")" = 1 ] && break
        sleep 0.1
    done
    fencing_as_postgres env PGAPPNAME=move_test_late_writer "$FENCING_BINDIR/psql" -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose \
        -U regress_rds_admin -d "$db" >"$out/late_writer.log" 2>&1 <<'SQL' &
BEGIN;
SELECT fencing.set_token('0:11');
INSERT INTO moved.ledger VALUES ('x', 1000);
COMMIT;
SQL
    wr=$!
    for i in $(seq 1 100); do
        [ "$(fencing_managed_psql -d postgres -At -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'move_test_late_writer' AND wait_event_type = 'Lock'")" = 1 ] && break
        sleep 0.1
    done
    [ "$i" -lt 100 ]
    tap_ok $? "managed ($route) move: a writer that connected after the check of other sessions waits for the lock of the table it writes"
    sed -n '/^\$lock\$;$/,$p' "$script" | sed 1d >&7
    exec 7>&-
    wait "$mv"
    st=$?
    wait "$wr"
    grep -qE 'ERROR:  (55000|SF001):' "$out/late_writer.log" && ! grep -q '^COMMIT' "$out/late_writer.log"
    tap_ok $? "managed ($route) move: that writer's stale write, let go after the move, is refused by the C edition"
    [ "$tap_failed" -gt 0 ] && sed 's/^/# /' "$out/late_writer.log" | head -10
    rm -f "$fifo"
    return "$st"
}

# The client suites (test/suites/client_*.sh): their TAP test TEST once per
# edition of FENCING_CLIENT_EDITIONS, each in a directory of its own under
# DIR (DIR/c, DIR/managed; DIR holds what they share and is the postgres OS
# user's): c, the C edition preloaded; managed, the edition for managed
# PostgreSQL, each database installed by a role that is not a superuser
# through pg_tle (test/perl/FencingClients.pm, FENCING_CLIENT_EDITION), the
# storms left out unless FENCING_CLIENT_STORM says otherwise.  By default
# c, and on PostgreSQL 18 managed too (where pg_tle's source is given).
#   fencing_client_prove DIR TEST [VAR=value...]
fencing_client_prove() {
    local dir=$1 t=$2 e st=0 editions=${FENCING_CLIENT_EDITIONS:-}
    shift 2
    if [ -z "$editions" ]; then
        editions=c
        if [ "$FENCING_PGVER" = 18 ] && [ -n "$(fencing_pgtle_tarball)" ]; then
            editions="c managed"
        elif [ "$FENCING_PGVER" = 18 ]; then
            echo "# the managed edition's pass is left out: no pg_tle source (FENCING_PGTLE_SRC)"
        fi
    fi
    chown -R postgres: "$dir" || return 1
    for e in $editions; do
        echo "# $t against the $([ "$e" = c ] && echo C || echo managed) edition (FENCING_CLIENT_EDITION=$e)"
        case $e in
        c) fencing_prove "$dir/c" "$t" "$@" FENCING_CLIENT_EDITION=c || st=1 ;;
        managed)
            fencing_managed_pgtle >"$dir/pgtle.log" 2>&1 ||
                { echo "not ok 1 - pg_tle installed for the managed edition's pass"; sed 's/^/# /' "$dir/pgtle.log"; st=1; continue; }
            fencing_prove "$dir/managed" "$t" "$@" FENCING_CLIENT_EDITION=managed \
                FENCING_CLIENT_STORM="${FENCING_CLIENT_STORM:-0}" || st=1 ;;
        *) fencing_die "FENCING_CLIENT_EDITIONS: $e is neither c nor managed" ;;
        esac
    done
    return $st
}
