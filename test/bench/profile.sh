#!/usr/bin/env bash
# test/bench/profile.sh: CPU instructions per write of each variant, counted
# by valgrind's callgrind in a single-user backend.
#
#   sudo bash test/bench/profile.sh [variant ...]
#
# A noisy shared machine makes throughput wobble by 20 %; instruction counts
# do not.  This runs `postgres --single` under callgrind on the benchmark's
# tables (test/bench/setup.sql), once with N1 and once with N2 prepared
# writes of a variant, and prints (Ir(N2) - Ir(N1)) / (N2 - N1): the
# instructions of one write, start-up cancelled out, and its ratio to the
# plain write.  The backend's profile of the N2 run is kept in
# $FENCING_PROFILE_OUT (default /tmp/fencing-profile) for
# `callgrind_annotate --inclusive=yes FILE`.
#
# Variants: update_plain update_advance update_guard update_token
# update_plpgsql insert_plain insert_guard insert_plpgsql insert_floor, and
# idem_bare idem_helpers idem_plpgsql idem_floor idem_strict once idem_begin exists
# (default: all), and the bulk statements, one statement of BN1 and one of
# BN2 rows, per row (not in the default list): copy_plain copy_floor
# copy_guard (COPY of a ledger, key scope, one token) and bulkupd_plain
# bulkupd_floor bulkupd_guard (an UPDATE of BN rows, row scope); *_floor
# has a C BEFORE ROW trigger that does nothing (test/bench/floor), the
# floor of any row guard.  Each variant's ratio is given against its group's plain
# write and, for key scope and the idempotent request, against its floor
# (the least work the same guarantee needs: test/bench/setup.sql and
# setup_idem.sql).  The variants that insert are checked to have inserted
# one row per write, so that a floor that silently did nothing cannot pass.
# Environment: FENCING_PROFILE_N1 (300), FENCING_PROFILE_N2 (1500),
# FENCING_PROFILE_BULK_N1 (5000), FENCING_PROFILE_BULK_N2 (25000),
# FENCING_PROFILE_KEEP=1 (keep the shorter run's profile too, so that a
# function's instructions per write are its difference over the two).

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
trap fencing_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

N1=${FENCING_PROFILE_N1:-300}
N2=${FENCING_PROFILE_N2:-1500}
BN1=${FENCING_PROFILE_BULK_N1:-5000}
BN2=${FENCING_PROFILE_BULK_N2:-25000}
OUT=${FENCING_PROFILE_OUT:-/tmp/fencing-profile}
variants=${*:-update_plain update_advance update_guard update_token update_plpgsql insert_plain insert_guard insert_plpgsql insert_floor}
if grep -q 'FUNCTION @extschema@.idem_begin' "$FENCING_ROOT"/sql/fencing--*.sql && [ $# -eq 0 ]; then
    variants+=" idem_bare idem_helpers idem_plpgsql idem_floor idem_strict"
fi
command -v valgrind >/dev/null || fencing_die "valgrind is not installed (apt-get install valgrind)"

# The prepared statement of a variant; its parameters are (id, epoch, counter).
prepare_of() {
    case $1 in
    update_plain) echo "UPDATE upd_plain SET balance = balance + 1 WHERE id = \$1" ;;
    update_advance) echo "UPDATE upd_advance SET balance = balance + 1, fence = fencing.advance(fence, fencing.fence(\$2, \$3)) WHERE id = \$1" ;;
    update_guard) echo "UPDATE upd_guard SET balance = balance + 1, fence = fencing.fence(\$2, \$3) WHERE id = \$1" ;;
    update_token) echo "UPDATE upd_token SET balance = balance + 1 WHERE id = \$1" ;;
    update_plpgsql) echo "UPDATE upd_plpgsql SET balance = balance + 1, fence = \$2 * 1000000000 + \$3 WHERE id = \$1" ;;
    insert_plain) echo "INSERT INTO led_plain (account_id, amount, fence) VALUES (\$1 % 1000 + 1, 1, fencing.fence(\$2, \$3))" ;;
    insert_guard) echo "INSERT INTO led_guard (account_id, amount, fence) VALUES (\$1 % 1000 + 1, 1, fencing.fence(\$2, \$3))" ;;
    insert_plpgsql) echo "INSERT INTO led_plpgsql (account_id, amount, fence) VALUES (\$1 % 1000 + 1, 1, \$2 * 1000000000 + \$3)" ;;
    insert_floor) echo "WITH s AS (UPDATE led_floor_fences SET fence = fencing.fence(\$2, \$3) WHERE account_id = \$1 % 1000 + 1 AND fence OPERATOR(fencing.<) fencing.fence(\$2, \$3) RETURNING account_id) INSERT INTO led_floor (account_id, amount, fence) SELECT account_id, 1, fencing.fence(\$2, \$3) FROM s" ;;
    idem_bare) echo "SELECT bench_order_bare(\$2 * 1000000000 + \$3)" ;;
    idem_helpers) echo "SELECT bench_order_idem(\$2 * 1000000000 + \$3)" ;;
    idem_plpgsql) echo "SELECT bench_order_hand(\$2 * 1000000000 + \$3)" ;;
    idem_floor) echo "SELECT bench_order_floor(\$2 * 1000000000 + \$3)" ;;
    idem_strict) echo "SELECT bench_order_strict(\$2 * 1000000000 + \$3)" ;;
    copy_* | bulkupd_*) ;;
    *) fencing_die "unknown variant $1" ;;
    esac
}

# The table a variant inserts into (one row per write), or nothing.
table_of() {
    case $1 in
    insert_plain) echo led_plain ;;
    insert_guard) echo led_guard ;;
    insert_plpgsql) echo led_plpgsql ;;
    insert_floor) echo led_floor ;;
    idem_bare) echo orders_bare ;;
    idem_helpers) echo orders_idem ;;
    idem_plpgsql) echo orders_hand ;;
    idem_floor) echo orders_floor ;;
    idem_strict) echo orders_strict ;;
    copy_*) echo "ledbulk_${1#copy_}" ;;
    esac
}

# The strict floor a variant is also compared with, or nothing.
strict_of() {
    case $1 in
    idem_helpers | idem_plpgsql | idem_floor) echo idem_strict ;;
    esac
}

# The floor a variant is compared with, or nothing.
floor_of() {
    case $1 in
    insert_guard | insert_plpgsql) echo insert_floor ;;
    idem_helpers | idem_plpgsql) echo idem_floor ;;
    copy_guard) echo copy_floor ;;
    bulkupd_guard) echo bulkupd_floor ;;
    esac
}

# count(*) of a table, through a single-user backend (no valgrind).
count_rows() {
    echo "SELECT count(*) AS n FROM $1" |
        fencing_as_postgres "$FENCING_BINDIR/postgres" --single -D "$PGDATA" -F bench 2>/dev/null |
        sed -n 's/^[[:space:]]*1: n = "\([0-9]*\)".*/\1/p'
}

fencing_deps
fencing_build ""
fencing_build_bench_floor install
fencing_cluster_start profile "shared_preload_libraries = 'fencing'" "autovacuum = off" "jit = off"
fencing_as_postgres createdb bench
fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d bench -v rows=100000 -v accounts=1000 \
    -v bulk_rows="$BN2" -f "$here/setup.sql" >/dev/null || fencing_die "set-up failed"
if grep -q 'FUNCTION @extschema@.idem_begin' "$FENCING_ROOT"/sql/fencing--*.sql; then
    fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d bench -f "$here/setup_idem.sql" >/dev/null ||
        fencing_die "idempotency set-up failed"
fi
fencing_cluster_stop
mkdir -p "$OUT"
chmod 777 "$OUT"
work=$FENCING_WORK/profile
mkdir -p "$work"
chown postgres: "$work"

epoch=1
declare -A per_write
# A bulk statement of n rows (copy_*, bulkupd_*) with token epoch:1.
bulk_sql() {
    local v=$1 n=$2 e=$3
    echo "SET synchronous_commit = off"
    case $v in
    copy_*)
        awk -v n="$n" -v e="$e" 'BEGIN { for (g = 1; g <= n; g++) printf "%d,1,%d:1\n", 1 + g % 1000, e }' \
            >"$work/$v.$n.csv"
        echo "COPY ledbulk_${v#copy_} (account_id, amount, fence) FROM '$work/$v.$n.csv' (FORMAT csv)"
        ;;
    bulkupd_*)
        echo "UPDATE bulk_${v#bulkupd_} SET balance = balance + 1, fence = '$e:1' WHERE id <= $n"
        ;;
    esac
}

for v in $variants; do
    table=$(table_of "$v")
    [ -n "$table" ] && rows_before=$(count_rows "$table")
    n1=$N1 n2=$N2
    case $v in copy_* | bulkupd_*) n1=$BN1 n2=$BN2 ;; esac
    for n in $n1 $n2; do
        epoch=$((epoch + 1))
        case $v in
        copy_* | bulkupd_*)
            # the same start for every run: no dead row versions of the last
            echo "VACUUM" | fencing_as_postgres "$FENCING_BINDIR/postgres" --single -D "$PGDATA" -F bench >/dev/null 2>&1
            bulk_sql "$v" "$n" "$epoch" >"$work/$v.$n.sql"
            ;;
        *)
        {
            echo "SET synchronous_commit = off"
            echo "PREPARE p(int, bigint, bigint) AS $(prepare_of "$v")"
            # spread over the rows; every token newer than the last
            # update_token: the token set by a statement of its own first
            # (a writing statement cannot change the token it is judged by)
            awk -v n="$n" -v e="$epoch" -v tok="$([ "$v" = update_token ] && echo 1)" -v q="'" 'BEGIN {
                for (i = 1; i <= n; i++) {
                    if (tok) printf "SELECT set_config(%sfencing.token%s, %s%d:%d%s, false)\n", q, q, q, e, i, q
                    printf "EXECUTE p(%d, %d, %d)\n", (i * 7919) % 100000 + 1, e, i
                } }'
        } >"$work/$v.$n.sql"
            ;;
        esac
        fencing_as_postgres valgrind --tool=callgrind --callgrind-out-file="$OUT/$v.$n.callgrind" \
            "$FENCING_BINDIR/postgres" --single -D "$PGDATA" -F bench \
            <"$work/$v.$n.sql" >"$work/$v.$n.out" 2>"$work/$v.$n.err" ||
            { tail -20 "$work/$v.$n.err" >&2; fencing_die "$v: postgres --single failed"; }
        if grep -q 'ERROR' "$work/$v.$n.out" "$work/$v.$n.err"; then
            grep -m5 'ERROR' "$work/$v.$n.out" "$work/$v.$n.err" >&2
            fencing_die "$v: a write failed"
        fi
    done
    if [ -n "$table" ]; then
        rows_after=$(count_rows "$table")
        [ "$((rows_after - rows_before))" -eq "$((n1 + n2))" ] ||
            fencing_die "$v: $((rows_after - rows_before)) rows inserted into $table, expected $((n1 + n2))"
    fi
    ir1=$(sed -n 's/^summary: //p' "$OUT/$v.$n1.callgrind")
    ir2=$(sed -n 's/^summary: //p' "$OUT/$v.$n2.callgrind")
    per_write[$v]=$(((ir2 - ir1) / (n2 - n1)))
    [ -n "${FENCING_PROFILE_KEEP:-}" ] || rm -f "$OUT/$v.$n1.callgrind"
    fencing_log "$v: ${per_write[$v]} instructions per write"
done

echo
printf '%-16s %14s %8s %12s %10s %10s\n' variant "Ir per write" ratio "extra Ir" "vs floor" "vs strict"
for v in $variants; do
    base=${v%%_*}_plain
    [ "${v%%_*}" = idem ] && base=idem_bare
    fl=$(floor_of "$v")
    vs=
    if [ -n "$fl" ] && [ -n "${per_write[$fl]:-}" ]; then
        vs=$(awk -v a="${per_write[$v]}" -v f="${per_write[$fl]}" 'BEGIN { printf "%.3f", f / a }')
    fi
    st=$(strict_of "$v")
    vst=
    if [ -n "$st" ] && [ -n "${per_write[$st]:-}" ]; then
        vst=$(awk -v a="${per_write[$v]}" -v f="${per_write[$st]}" 'BEGIN { printf "%.3f", f / a }')
    fi
    if [ -n "${per_write[$base]:-}" ]; then
        awk -v v="$v" -v a="${per_write[$v]}" -v b="${per_write[$base]}" -v vs="$vs" -v vst="$vst" \
            'BEGIN { printf "%-16s %14d %8.3f %12d %10s %10s\n", v, a, b / a, a - b, vs, vst }'
    else
        printf '%-16s %14d %8s %12s %10s %10s\n' "$v" "${per_write[$v]}" "" "" "$vs" "$vst"
    fi
done
echo "(ratio: the plain write's instructions / this one's, the throughput ratio if the CPU were all;"
echo " vs floor: the floor's instructions / this one's, for key scope and the idempotent request;"
echo " vs strict: the same against the idempotent request's strict floor, a key table of key, hash and result)"
echo "profiles: $OUT/<variant>.$N2.callgrind (bulk variants: .$BN2.)"
