#!/usr/bin/env bash
# test/suites/pg_isolation.sh: PostgreSQL's own isolation specs for ALTER
# TABLE, triggers and partitions, run against a server where the fencing
# extension is created in the test database, must produce PostgreSQL's
# expected output: the DDL guard changes no lock level for tables nobody
# protected.
#
# The specs come from Debian's source package of the server version under
# test (apt-get source, with a deb-src entry of its own that is removed
# afterwards) and are cached under /var/cache/fencing/, keyed by the source
# version.  Prints TAP: one line per spec, and one that the extension was
# really there.
#
# Environment (from test/check.sh): FENCING_ROOT FENCING_WORK FENCING_BINDIR
# PG_CONFIG FENCING_PGVER.

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"

# The specs: the two that 1.0 changed, then every other spec of the
# schedule about ALTER TABLE, triggers, partitions and their locks.
SPECS="partition-concurrent-attach detach-partition-concurrently-1
detach-partition-concurrently-2 detach-partition-concurrently-3
detach-partition-concurrently-4 alter-table-1 alter-table-2 alter-table-3
alter-table-4 create-trigger partition-drop-index-locking
partition-key-update-1 partition-key-update-2 partition-key-update-3
partition-key-update-4 fk-partitioned-1 fk-partitioned-2 tuplelock-partition"

cache_root=/var/cache/fencing
srcpkg=postgresql-$FENCING_PGVER
list=/etc/apt/sources.list.d/fencing-$srcpkg-src.sources

# Download the source package once and keep its isolation specs.
fetch_specs() {
    local tmp version orig
    [ "$(id -u)" -eq 0 ] || return 1
    tmp=$(mktemp -d)
    # only the deb entries of the machine's own Debian sources, as deb-src
    cat >"$list" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    # shellcheck disable=SC2119  # no apt options of its own here
    fencing_apt_update >/dev/null 2>&1
    (cd "$tmp" && apt-get source --download-only -qq "$srcpkg" >/dev/null 2>&1)
    rm -f "$list"
    # shellcheck disable=SC2119  # no apt options of its own here
    fencing_apt_update >/dev/null 2>&1
    orig=$(compgen -G "$tmp/${srcpkg}_*.orig.tar.*" | sort | head -1)
    [ -n "$orig" ] || { rm -rf "$tmp"; return 1; }
    version=$(basename "$orig" | sed -E "s/^${srcpkg}_([^.]+\.[^.]+)\.orig.*/\1/")
    mkdir -p "$cache_root/$srcpkg-isolation-$version"
    tar -xf "$orig" -C "$tmp" --wildcards '*/src/test/isolation/specs/*' \
        '*/src/test/isolation/expected/*' '*/src/test/isolation/isolation_schedule' \
        || { rm -rf "$tmp"; return 1; }
    cp -a "$tmp"/postgresql-*/src/test/isolation/specs "$tmp"/postgresql-*/src/test/isolation/expected \
        "$tmp"/postgresql-*/src/test/isolation/isolation_schedule \
        "$cache_root/$srcpkg-isolation-$version/"
    rm -rf "$tmp"
}

cached=$(compgen -G "$cache_root/$srcpkg-isolation-*" | sort -V | tail -1)
if [ -z "$cached" ]; then
    fetch_specs
    cached=$(compgen -G "$cache_root/$srcpkg-isolation-*" | sort -V | tail -1)
fi
if [ -z "$cached" ] || [ ! -d "$cached/specs" ]; then
    echo "1..0 # SKIP could not fetch the $srcpkg source package (apt-get source)"
    exit 0
fi
fencing_log "PostgreSQL's isolation specs from $cached"

# the inputs where the postgres OS user can read them
input=$FENCING_WORK/pg-isolation-input
out=$FENCING_WORK/pg-isolation
rm -rf "$input"
mkdir -p "$input"
cp -a "$cached/specs" "$cached/expected" "$input/"
chown -R postgres: "$input"

# (fencing preloaded, as where it is used; installcheck checks that)
fencing_cluster_start pgiso "max_prepared_transactions = 10" "shared_preload_libraries = 'fencing'"
read -r -d '' -a specs <<<"$SPECS"
ntests=${#specs[@]}
echo "1..$((ntests + 1))"

# the tree's installcheck with PostgreSQL's specs in place of ours
fencing_regress isolation "$out" ISOLATION="${specs[*]}" \
    ISOLATION_OPTS="--inputdir=$input --load-extension=fencing --dbname=isolation_regression" \
    >"$FENCING_WORK/pg-isolation.tap"
sed 's/^/# /' "$out.log"

n=0
for spec in $SPECS; do
    n=$((n + 1))
    if grep -qE "^ok [0-9]+ - isolation/$spec\$" "$FENCING_WORK/pg-isolation.tap"; then
        echo "ok $n - $spec produces PostgreSQL's expected output with fencing created"
    else
        echo "not ok $n - $spec differs from PostgreSQL's expected output with fencing created"
    fi
done

# the extension and its event triggers were there all along
ext=$(fencing_as_postgres psql -X -At -d isolation_regression -c \
    "SELECT (SELECT extversion FROM pg_extension WHERE extname = 'fencing') || ' ' ||
            (SELECT count(*) FROM pg_event_trigger
              WHERE evtname LIKE 'fencing_ddl_guard_%' AND evtenabled = 'A')" 2>&1)
n=$((n + 1))
case $ext in
*" 3") echo "ok $n - fencing $ext event triggers in the test database" ;;
*) echo "not ok $n - fencing was not in the test database: $ext" ;;
esac
if [ -f "$out/regression.diffs" ]; then
    head -150 "$out/regression.diffs" | sed 's/^/# /'
fi
fencing_cluster_stop "$PGDATA"
