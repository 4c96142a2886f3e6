#!/usr/bin/env bash
# test/suites/monitoring.sh: the monitoring folder with the real tools.
#
# Debian's prometheus-postgres-exporter runs against a throwaway cluster
# (fencing preloaded) with monitoring/postgres-exporter-queries.yaml, on a
# free port of 127.0.0.1.  A scrape; then a stale write, a lease renewal
# that fails and an idempotency key found in progress (SF004); a second
# scrape, in which exactly those three counters moved, by exactly one, and
# no other fencing counter.  Then a guard that stops being intact shows as
# fencing_guard_intact 0.  Then promtool: check rules, test rules (the
# alerts' unit tests) and check metrics (the names of the scraped fencing
# metrics).
#
# Run by test/check.sh (FENCING_SUITES=monitoring), which sets FENCING_ROOT,
# FENCING_WORK, FENCING_BINDIR and PG_CONFIG.  Prints TAP.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/exporter.sh
. "$FENCING_ROOT/test/lib/exporter.sh"

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $*"; }
# check DESCRIPTION COMMAND...: ok when the command succeeds
check() {
    local what=$1; shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}
finish() {
    fencing_exporter_stop
    [ -n "${PGDATA:-}" ] && fencing_cluster_stop "$PGDATA"
    echo "1..$n"
}
trap finish EXIT

if ! fencing_exporter_install; then
    not_ok "install prometheus-postgres-exporter, prometheus (promtool) and curl"
    exit 1
fi
ok "prometheus-postgres-exporter $(prometheus-postgres-exporter --version 2>&1 | sed -n 's/.*version \([^ ]*\).*/\1/p' | head -1) and $(promtool --version 2>&1 | head -1 | cut -d' ' -f1-3) are installed"

fencing_cluster_start monitoring "shared_preload_libraries = 'fencing'"
psql_shop() { fencing_as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -d shop; }
fencing_as_postgres psql -X -q -d postgres -c 'CREATE DATABASE shop'
if psql_shop >/dev/null <<'SQL'
CREATE EXTENSION fencing;
CREATE TABLE ledger (id bigserial PRIMARY KEY, account text NOT NULL,
                     amount int NOT NULL, fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account}');
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-1', 'pending', NULL);
SELECT fencing.protect('refunds');
-- some history before the first scrape
BEGIN;
SET LOCAL fencing.token = '1:5';
INSERT INTO ledger (account, amount) VALUES ('acct-1', 100);
UPDATE refunds SET state = 'paid' WHERE id = 'r-1';
COMMIT;
SELECT fencing.lease_acquire('payouts', 'worker-a', '1 hour') IS NOT NULL;
SELECT state FROM fencing.idem_begin('refund:r-2', '{"amount": 40}', lease => '1 hour');
SQL
then
    ok "a shop with two protected tables, a lease and a running idempotency key"
else
    not_ok "a shop with two protected tables, a lease and a running idempotency key"
fi

if fencing_exporter_start shop; then
    ok "the exporter serves $FENCING_EXPORTER_URL"
else
    not_ok "the exporter serves $FENCING_EXPORTER_URL"
    exit 1
fi

# "name{labels} value" lines of the fencing metrics, without comments
fencing_series() {
    fencing_exporter_fencing | grep -v '^#' | sort
}
before=$(fencing_series)
fencing_diag_prefix "before: " <<<"$before"

# every counter of the views is exported as a Prometheus counter
for m in accepted rejected_stale rejected_missing bypassed \
         idempotency_started idempotency_replayed idempotency_resumed \
         idempotency_reused_rejected idempotency_in_progress_rejected \
         lease_acquired lease_acquire_refused lease_renewed lease_renew_failed \
         lease_released lease_release_failed lease_expired lease_rejected \
         lease_holds lease_hold_seconds; do
    check "fencing_${m}_total is exported as a counter" \
        grep -qx "# TYPE fencing_${m}_total counter" <<<"$(fencing_exporter_fencing)"
done
check "fencing_rejected_stale_total has the table as a label" \
    grep -q '^fencing_rejected_stale_total{.*table="public.ledger"' <<<"$before"
check "fencing_lease_remaining_seconds is a gauge of the live lease" \
    grep -qx '# TYPE fencing_lease_remaining_seconds gauge' <<<"$(fencing_exporter_fencing)"
remaining=$(sed -n 's/^fencing_lease_remaining_seconds{.*lease="payouts".*} \(.*\)$/\1/p' <<<"$before")
check "the live lease has 0 < remaining <= 3600 s (got ${remaining:-none})" \
    awk -v r="${remaining:-0}" 'BEGIN { exit !(r > 0 && r <= 3600) }'
check "fencing_guard_intact is 1 for both tables" \
    [ "$(grep -c '^fencing_guard_intact{.*} 1$' <<<"$before")" = 2 ]

# the incident: a stale write, a renewal that fails, a key in progress
fencing_as_postgres psql -X -q -d shop >/dev/null 2>&1 <<'SQL'
BEGIN;
SET LOCAL fencing.token = '1:3';
INSERT INTO ledger (account, amount) VALUES ('acct-1', 666);
COMMIT;
SELECT fencing.lease_renew('payouts', '0:1', '1 hour');
SELECT * FROM fencing.idem_begin('refund:r-2', '{"amount": 40}', wait => false);
SQL
after=$(fencing_series)
fencing_diag_prefix "after: " <<<"$after"

# compare the counters (the *_total series) of the two scrapes
moved=$(join -a1 -a2 -e MISSING -o 0,1.2,2.2 \
            <(grep '_total{\|_total ' <<<"$before" | sed 's/ \([^ ]*\)$/\t\1/' | sort -t$'\t' -k1,1) \
            <(grep '_total{\|_total ' <<<"$after" | sed 's/ \([^ ]*\)$/\t\1/' | sort -t$'\t' -k1,1) \
            -t$'\t' | awk -F'\t' '$2 != $3 { printf "%s %s -> %s\n", $1, $2, $3 }')
fencing_diag_prefix "moved: " <<<"$moved"
check "fencing_rejected_stale_total of public.ledger moved by exactly 1" \
    grep -q '^fencing_rejected_stale_total{.*table="public.ledger".*} 0 -> 1$' <<<"$moved"
check "fencing_lease_renew_failed_total moved by exactly 1" \
    grep -q '^fencing_lease_renew_failed_total{.*} 0 -> 1$' <<<"$moved"
check "fencing_idempotency_in_progress_rejected_total moved by exactly 1" \
    grep -q '^fencing_idempotency_in_progress_rejected_total{\?.*}\? 0 -> 1$' <<<"$moved"
check "no other fencing counter moved (3 moved)" [ "$(grep -c . <<<"$moved")" = 3 ]

# the guard's health: an event trigger of the DDL guard not ENABLE ALWAYS
fencing_as_postgres psql -X -q -d shop -c 'ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE REPLICA' >/dev/null
check "a guard that is not intact shows as fencing_guard_intact 0" \
    [ "$(fencing_series | grep -c '^fencing_guard_intact{.*} 0$')" = 2 ]
fencing_as_postgres psql -X -q -d shop -c 'ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE ALWAYS' >/dev/null

# promtool
rules=$FENCING_ROOT/monitoring/fencing-alerts.yml
out=$(promtool check rules "$rules" 2>&1); st=$?
fencing_diag <<<"$out"
check "promtool check rules monitoring/fencing-alerts.yml" [ $st -eq 0 ]
out=$(cd "$FENCING_ROOT/monitoring" && promtool test rules fencing-alerts.test.yml 2>&1); st=$?
fencing_diag <<<"$out"
check "promtool test rules monitoring/fencing-alerts.test.yml" [ $st -eq 0 ]
out=$(fencing_exporter_fencing | promtool check metrics 2>&1); st=$?
[ -n "$out" ] && fencing_diag <<<"$out"
check "promtool check metrics finds nothing to say about the fencing metrics" \
    test "$st" -eq 0 -a -z "$out"

# the suite leaves no exporter behind: stopped by its pid, nothing left
# listening on its port, no exporter of this run's directory alive
pid=$FENCING_EXPORTER_PID
fencing_exporter_stop
check "the exporter (pid ${pid:-unknown}) is stopped and gone" \
    test -n "$pid" -a ! -e "/proc/${pid:-0}"
# shellcheck disable=SC2016  # the sh -c script expands its own argument
check "nothing answers on its port any more" \
    sh -c '! curl -sf -o /dev/null "$1"' sh "$FENCING_EXPORTER_URL"
# (a function, not sh -c: pgrep would find the shell holding the pattern)
no_exporter_left() { ! pgrep -f -- "extend.query-path=$FENCING_WORK/exporter/" >/dev/null; }
check "no exporter of this run is left" no_exporter_left
