#!/usr/bin/env bash
# test/check.sh: the whole test suite on a throwaway cluster.
#
#   sudo bash test/check.sh          (or: make test)
#
# Installs what is missing, builds with -Wall -Wextra -Werror and assertions,
# installs into a private copy of PostgreSQL, starts a cluster as the
# postgres OS user and runs every suite: pg_regress, isolation, pgTAP and the
# Perl TAP tests.  The last line is "N passed, M failed"; the exit status is
# non-zero when anything failed.
#
# Environment: FENCING_SUITES="regress isolation pgtap tap" picks suites;
# FENCING_KEEP=1 keeps the scratch directory (logs, diffs) for a post-mortem.

set -u
. "$(dirname "$0")/lib/common.sh"
trap fencing_cleanup EXIT
trap 'exit 130' INT TERM

suites=${FENCING_SUITES:-regress isolation pgtap tap}
total_pass=0
total_fail=0
report=()
failures=()

# Record a suite's result: name, passed, failed.
record() {
    total_pass=$((total_pass + $2))
    total_fail=$((total_fail + $3))
    report+=("$(printf '%-10s %5d passed, %d failed' "$1" "$2" "$3")")
}

fencing_deps
fencing_build "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING"
[ -n "${FENCING_KEEP:-}" ] && fencing_log "scratch directory (kept): $FENCING_WORK"

# The inputs, where the postgres OS user can read them.
src=$FENCING_WORK/src
mkdir -p "$src"
cp -a "$FENCING_ROOT/sql" "$FENCING_ROOT/expected" "$FENCING_ROOT/test" "$src/"
chown -R postgres: "$src"

fencing_cluster_start main "shared_preload_libraries = 'fencing'"
fencing_log "cluster up on port $PGPORT"

regress_list=$(make -s -C "$FENCING_ROOT" print-regress PG_CONFIG="$PG_CONFIG")
isolation_list=$(make -s -C "$FENCING_ROOT" print-isolation PG_CONFIG="$PG_CONFIG")
pgxs_dir=$(dirname "$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")")

# pg_regress output lines end in "ok" or "FAILED"; count them.
count_regress() {
    local log=$1 name=$2 status=$3
    local ok bad
    ok=$(grep -cE '^(test| ) .* \.\.\. ok' "$log")
    bad=$(grep -cE '\.\.\. FAILED|\.\.\. failed' "$log")
    grep -E '\.\.\. (FAILED|failed)' "$log" | sed "s/^/$name: /" >>"$FENCING_WORK/failures"
    if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
        bad=1
        echo "$name: runner exited $status without a failing test (see $log)" >>"$FENCING_WORK/failures"
    fi
    record "$name" "$ok" "$bad"
}

# TAP output (verbose): count "ok N" and "not ok N" lines.
count_tap() {
    local log=$1 name=$2 status=$3
    local ok bad
    ok=$(grep -cE '^\s*ok [0-9]+' "$log")
    bad=$(grep -cE '^\s*not ok [0-9]+' "$log")
    grep -E '^\s*not ok [0-9]+' "$log" | sed "s/^/$name: /" >>"$FENCING_WORK/failures"
    # a script that died without a failing assertion still fails
    if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
        bad=1
        echo "$name: exited $status without a failing assertion (see $log)" >>"$FENCING_WORK/failures"
    fi
    record "$name" "$ok" "$bad"
}

: >"$FENCING_WORK/failures"
for suite in $suites; do
    case $suite in
    regress)
        fencing_log "pg_regress: $regress_list"
        mkdir -p "$FENCING_WORK/regress" && chown postgres: "$FENCING_WORK/regress"
        fencing_as_postgres "$pgxs_dir/src/test/regress/pg_regress" \
            --bindir="$FENCING_BINDIR" --inputdir="$src" --outputdir="$FENCING_WORK/regress" \
            --host="$PGHOST" --port="$PGPORT" --user=postgres \
            --dbname=fencing_regress --load-extension=fencing \
            $regress_list >"$FENCING_WORK/regress.log" 2>&1
        st=$?
        cat "$FENCING_WORK/regress.log"
        [ -f "$FENCING_WORK/regress/regression.diffs" ] && head -200 "$FENCING_WORK/regress/regression.diffs"
        count_regress "$FENCING_WORK/regress.log" regress $st
        ;;
    isolation)
        fencing_log "isolation: $isolation_list"
        mkdir -p "$FENCING_WORK/isolation" && chown postgres: "$FENCING_WORK/isolation"
        fencing_as_postgres "$pgxs_dir/src/test/isolation/pg_isolation_regress" \
            --bindir="$FENCING_BINDIR" --inputdir="$src/test/isolation" \
            --outputdir="$FENCING_WORK/isolation" \
            --host="$PGHOST" --port="$PGPORT" --user=postgres \
            --dbname=fencing_isolation --load-extension=fencing \
            $isolation_list >"$FENCING_WORK/isolation.log" 2>&1
        st=$?
        cat "$FENCING_WORK/isolation.log"
        [ -f "$FENCING_WORK/isolation/regression.diffs" ] && head -200 "$FENCING_WORK/isolation/regression.diffs"
        count_regress "$FENCING_WORK/isolation.log" isolation $st
        ;;
    pgtap)
        fencing_log "pgTAP"
        fencing_as_postgres psql -q -X -v ON_ERROR_STOP=1 -d postgres \
            -c 'CREATE DATABASE fencing_pgtap' >/dev/null
        fencing_as_postgres psql -q -X -v ON_ERROR_STOP=1 -d fencing_pgtap \
            -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION fencing' >/dev/null
        fencing_as_postgres pg_prove -v -d fencing_pgtap -h "$PGHOST" -p "$PGPORT" -U postgres \
            "$src"/test/pgtap/*.sql >"$FENCING_WORK/pgtap.log" 2>&1
        st=$?
        grep -vE '^\s*ok [0-9]+' "$FENCING_WORK/pgtap.log"
        count_tap "$FENCING_WORK/pgtap.log" pgtap $st
        ;;
    tap)
        fencing_log "Perl TAP"
        mkdir -p "$FENCING_WORK/tap" && chown postgres: "$FENCING_WORK/tap"
        (cd "$src" && fencing_as_postgres env \
            PERL5LIB="$pgxs_dir/src/test/perl:$src/test/perl" \
            PG_REGRESS="$pgxs_dir/src/test/regress/pg_regress" \
            TESTDIR="$FENCING_WORK/tap" PGHOST= PGPORT= \
            prove -v test/t/*.pl) >"$FENCING_WORK/tap.log" 2>&1
        st=$?
        grep -vE '^\s*ok [0-9]+' "$FENCING_WORK/tap.log"
        count_tap "$FENCING_WORK/tap.log" tap $st
        ;;
    *)
        fencing_die "unknown suite $suite"
        ;;
    esac
done

echo
echo "Summary"
printf '  %s\n' "${report[@]}"
if [ -s "$FENCING_WORK/failures" ]; then
    echo "Failures:"
    sed 's/^/  /' "$FENCING_WORK/failures"
fi
echo
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
