#!/usr/bin/env bash
# test/suites/pg_isolation.sh: PostgreSQL's own isolation specs for ALTER
# TABLE, triggers and partitions give PostgreSQL's expected output with
# fencing preloaded and created: the DDL guard changes no lock level.  The
# specs: the server's source, Debian's source package (fencing_source,
# test/lib/deps.sh, downloaded before any suite starts) or, for 18,
# FENCING_PG18_SRC; its src/test/isolation kept in $FENCING_CACHE.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"

# the two 1.0 changed, then every other on ALTER TABLE, triggers, partitions
specs=(partition-concurrent-attach detach-partition-concurrently-{1,2,3,4}
    alter-table-{1,2,3,4} create-trigger partition-drop-index-locking
    partition-key-update-{1,2,3,4} fk-partitioned-{1,2} tuplelock-partition)
cache=$FENCING_CACHE srcpkg=postgresql-$FENCING_PGVER
cached() { compgen -G "$cache/$srcpkg-isolation-*" | sort -V | tail -1; }

# (under the cache's lock) once: the isolation files of the source
# tarball, moved into place whole
unpack_specs() {
    local tmp orig=$1
    [ -n "$(cached)" ] && return 0
    tmp=$(mktemp -d "$cache/.src.XXXXXX")
    tar -xf "$orig" -C "$tmp" --wildcards '*/src/test/isolation/*' &&
        mv "$tmp"/postgresql-*/src/test/isolation \
            "$cache/$srcpkg-isolation-$(basename "$orig" | sed -E "s/^${srcpkg}_([^.]+\.[^.]+)\.orig.*/\1/")"
    rm -rf "$tmp"
}
if [ -z "$(cached)" ]; then
    if [ "$FENCING_PGVER" = 18 ] && [ -n "${FENCING_PG18_SRC:-}" ]; then
        orig=$FENCING_PG18_SRC
    else
        orig=$(fencing_source "$srcpkg")
    fi
    [ -n "$orig" ] && mkdir -p "$cache" && fencing_with_lock "$cache/$srcpkg-isolation.lock" unpack_specs "$orig"
fi
spec_dir=$(cached)
[ -d "$spec_dir/specs" ] || { echo "not ok 1 - PostgreSQL's isolation specs from the $srcpkg source (fencing_source $srcpkg, test/lib/deps.sh)"; exit 1; }
fencing_log "PostgreSQL's isolation specs from $spec_dir"

# the inputs where the postgres OS user can read them
input=$FENCING_WORK/pg-isolation-input out=$FENCING_WORK/pg-isolation
rm -rf "$input" && mkdir -p "$input" && cp -a "$spec_dir/specs" "$spec_dir/expected" "$input/"
chown -R postgres: "$input"
fencing_cluster_start pgiso "max_prepared_transactions = 10" "shared_preload_libraries = 'fencing'"
# the tree's installcheck with PostgreSQL's specs in place of ours
fencing_regress isolation "$out" ISOLATION="${specs[*]}" \
    ISOLATION_OPTS="--inputdir=$input --load-extension=fencing --dbname=isolation_regression" >"$out.tap"
fencing_diag <"$out.log"
for spec in "${specs[@]}"; do
    grep -qE "^ok [0-9]+ - isolation/$spec\$" "$out.tap"
    tap_ok $? "$spec produces PostgreSQL's expected output with fencing created"
done
# the extension and its event triggers were there all along
ext=$(fencing_as_postgres psql -X -At -d isolation_regression -c "SELECT (SELECT extversion FROM pg_extension
    WHERE extname = 'fencing') || ' ' || (SELECT count(*) FROM pg_event_trigger
    WHERE evtname LIKE 'fencing_ddl_guard_%' AND evtenabled = 'A')" 2>&1)
[[ $ext == *" 3" ]]
tap_ok $? "fencing $ext event triggers in the test database"
[ -f "$out/regression.diffs" ] && head -150 "$out/regression.diffs" | fencing_diag
fencing_cluster_stop "$PGDATA"
tap_done
