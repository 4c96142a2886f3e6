#!/usr/bin/env bash
# test/suites/package.sh: the Debian package, built, installed, used and
# removed on this machine.  Runs as root; prints TAP.
#
#   sudo FENCING_SUITES=package bash test/check.sh     (as a suite)
#   sudo bash test/suites/package.sh                   (alone)
#   sudo bash test/suites/package.sh --cleanup         (undo interrupted runs)
#
# From a clean export of the tree (the `make dist` archive of HEAD, never
# the working tree): build postgresql-15-fencing with dpkg-buildpackage and
# lint it; install it with `apt-get install ./...deb` into the system's
# PostgreSQL 15; create a cluster with pg_createcluster on a free port with
# shared_preload_libraries = 'fencing' and start it with pg_ctlcluster;
# CREATE EXTENSION, a stale write rejected with SF001, `make installcheck`
# against that cluster, the package's autopkgtest; purge the package and
# prove that no file it installed is left; the PGXN client on the same
# archive (pgxn install, load, uninstall); drop the cluster, and
# prove that the system is as it was found.  Last, this run again (given the package
# built here) killed while its installcheck runs, with SIGTERM (its trap
# cleans up) and with SIGKILL (the cleanup step that every run starts with
# finds what it left and removes it).
#
# What it changes, and how it undoes it: before it installs the package or
# creates a cluster it writes that down in a journal,
# /var/tmp/fencing-package.<pid>.journal; its EXIT trap undoes what the
# journal lists (cluster dropped, package purged, scratch removed) and
# deletes the journal, and the next run (or --cleanup) undoes the journal
# of a run that died without its trap.  Steps that must not be cut in half
# (apt-get, pg_createcluster, pg_dropcluster) run in a session of their own,
# out of reach of a Ctrl-C, and the trap runs once they are done.  The build
# dependencies it installs (debhelper, postgresql-server-dev-all at the
# version of the installed postgresql-common, lintian, pgxnclient) are the test
# command's tools, kept like gcc; the system's postgresql-15 is never
# upgraded or changed.  One run at a time: it holds a lock (flock) on
# /usr/lib/postgresql/15/lib, the directory it installs into.
#
# Other engineers' runs copy /usr/lib/postgresql/15 into private
# installations while this one may have the package installed; they install
# their own build over the same file names, so the copy is theirs all the
# same.

set -u
FENCING_ROOT=${FENCING_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
set +o pipefail
# the clusters of the test command are not ours: every connection below
# names its own
unset PGHOST PGPORT PGDATA PGDATABASE PGUSER PGSERVICE PGSYSCONFDIR

SELF=$FENCING_ROOT/test/suites/package.sh
V=15                                  # the system's PostgreSQL
PKG=postgresql-$V-fencing
SYSBIN=/usr/lib/postgresql/$V/bin
JOURNAL_DIR=/var/tmp
JOURNAL=$JOURNAL_DIR/fencing-package.$$.journal
MODE=${1:-run}
export DEBIAN_FRONTEND=noninteractive
APT=(apt-get -q -y -o DPkg::Lock::Timeout=900 -o APT::Lock::Timeout=900)

n=0
failed=0
tap() {     # tap STATUS DESCRIPTION
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
say() { sed 's/^/# /'; }
pkg_state() { dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null | tr -d ' '; }
pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null; }
as_postgres() { runuser -u postgres -- "$@"; }
# psql against the suite's cluster, as the postgres OS user
psql_c() { as_postgres "$SYSBIN/psql" -X -q -h /var/run/postgresql -p "$PORT" "$@"; }

# --- the journal: what this run changed, undone by the trap or a later run ---

journal() { echo "$*" >>"$JOURNAL"; sync "$JOURNAL" 2>/dev/null || true; }
unjournal() { [ -f "$JOURNAL" ] && sed -i "\\|^$*\$|d" "$JOURNAL"; }

drop_cluster() {    # drop_cluster VERSION NAME: whatever state it is in
    local v=$1 c=$2
    if [ -d "/etc/postgresql/$v/$c" ]; then
        setsid -w pg_ctlcluster --skip-systemctl-redirect "$v" "$c" stop -m immediate >/dev/null 2>&1
        setsid -w pg_dropcluster "$v" "$c" 2>&1
    fi
    # a pg_createcluster cut short may leave parts that pg_dropcluster
    # does not know
    rm -rf "/var/lib/postgresql/$v/$c" "/etc/postgresql/$v/$c" "/var/log/postgresql/postgresql-$v-$c.log"
    echo "dropped cluster $v/$c"
}

purge_package() {   # purge_package NAME: apt-get purge, dpkg --purge if apt cannot
    local p=$1
    [ -z "$(pkg_state "$p")" ] && return 0
    setsid -w "${APT[@]}" purge "$p" >/dev/null 2>&1 \
        || setsid -w dpkg --purge "$p" >/dev/null 2>&1
    [ -z "$(pkg_state "$p")" ] && echo "purged $p"
}

pgxn_uninstall() {  # pgxn_uninstall ZIP: what `pgxn install ZIP` put in place
    # (make uninstall; or, without the archive, the files by name, which no
    # package owns then)
    pgxn uninstall --pg_config "$SYSBIN/pg_config" --make make "$1" >/dev/null 2>&1 \
        || { [ -z "$(pkg_state "$PKG")" ] && rm -rf "/usr/lib/postgresql/$V/lib/fencing.so" \
                 "/usr/lib/postgresql/$V/lib/bitcode/fencing" "/usr/lib/postgresql/$V/lib/bitcode/fencing.index.bc" \
                 "/usr/share/postgresql/$V/extension"/fencing.control "/usr/share/postgresql/$V/extension"/fencing--*.sql; }
    echo "uninstalled the PGXN build"
}

remove_dir() {      # remove_dir DIR: stop any server running from it, then rm
    local d=$1 pid
    [ -d "$d" ] || return 0
    while IFS= read -r -u 3 pid; do
        as_postgres "$SYSBIN/pg_ctl" -D "$(dirname "$pid")" -m immediate stop >/dev/null 2>&1 \
            || kill -9 "$(head -1 "$pid")" 2>/dev/null
    done 3< <(find "$d" -name postmaster.pid 2>/dev/null)
    rm -rf "$d"
}

undo_journal() {    # undo_journal FILE: clusters, then the package, then files
    local j=$1 kind a b
    [ -f "$j" ] || return 0
    while read -r kind a b; do [ "$kind" = cluster ] && drop_cluster "$a" "$b"; done <"$j"
    while read -r kind a b; do [ "$kind" = package ] && purge_package "$a"; done <"$j"
    while read -r kind a b; do [ "$kind" = pgxn ] && pgxn_uninstall "$a"; done <"$j"
    while read -r kind a b; do [ "$kind" = dir ] && remove_dir "$a"; done <"$j"
    rm -f "$j"
}

# The journals of runs that are not running any more.
reap() {
    local j pid
    for j in "$JOURNAL_DIR"/fencing-package.*.journal; do
        [ -f "$j" ] || continue
        pid=${j##*/fencing-package.}
        pid=${pid%.journal}
        [ "$pid" = "$$" ] && continue
        if [ -d "/proc/$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'package\.sh'; then
            continue
        fi
        echo "journal of run $pid: $(tr '\n' ';' <"$j")"
        undo_journal "$j"
    done
}

cleanup() {
    trap '' INT TERM HUP
    # a run of steps 26-29 still going (in a session of its own, out of
    # reach of a Ctrl-C) is stopped first: its own trap cleans up after it
    local pid
    pid=$(cat "${work:-/nonexistent}/nested.pid" 2>/dev/null)
    if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'package\.sh'; then
        kill -TERM -- "-$pid" 2>/dev/null
        for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    fi
    undo_journal "$JOURNAL" >/dev/null 2>&1
}

# One run at a time: a lock (flock) on the directory the package installs
# into, held on file descriptor 8 until this shell is gone, its cleanup
# included.  Servers started here must not inherit it (8<&-), or a server
# left by a killed run would keep the next run waiting.
lock() {
    [ -n "${FENCING_PACKAGE_LOCKED:-}" ] && return 0
    exec 8<"/usr/lib/postgresql/$V/lib"
    flock -w 3600 8 || fencing_die "another package suite has held the lock for an hour"
    export FENCING_PACKAGE_LOCKED=1
}

# --- what "the system as it was found" means ---

snapshot() {        # snapshot DIR
    local d=$1 f
    mkdir -p "$d"
    dpkg-query -W -f='${binary:Package} ${Version} ${db:Status-Abbrev}\n' | sort >"$d/packages"
    pg_lsclusters -h 2>/dev/null | awk '{ print $1, $2, $3, $6 }' | sort >"$d/clusters"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/* /etc/apt/preferences \
        /etc/apt/preferences.d/* /etc/apt/apt.conf.d/* /etc/apt/trusted.gpg \
        /etc/apt/trusted.gpg.d/* /etc/apt/keyrings/*; do
        [ -e "$f" ] && sha256sum "$f"
    done >"$d/apt"
    find "/usr/lib/postgresql/$V" "/usr/share/postgresql/$V" /etc/postgresql /etc/postgresql-common \
        /var/lib/postgresql /var/log/postgresql -printf '%y %m %u %p\n' 2>/dev/null | sort >"$d/files"
    { compgen -G "/var/lib/dpkg/info/*$PKG*"
      compgen -G "/usr/share/doc/*$PKG*"
      grep -A2 -x "Package: $PKG" /var/lib/apt/extended_states
      compgen -G "$JOURNAL_DIR/fencing-package.*"
      ls -d /tmp/fencing-package.*; } >"$d/traces" 2>/dev/null
}

# Differences between two snapshots that this suite could have caused.
# Packages changed meanwhile by someone else's apt run are only noted.
compare() {         # compare BEFORE AFTER
    local a=$1 b=$2 bad=0 what out ours='^(postgresql|libpq|'"$PKG"')'
    out=$(diff "$a/packages" "$b/packages" | grep '^[<>]')
    if [ -n "$out" ]; then
        if echo "$out" | awk '{ print $2 }' | grep -qE "$ours"; then
            echo "packages changed:"; echo "$out"; bad=1
        else
            echo "note: packages changed meanwhile, not by this suite:"; echo "$out"
        fi
    fi
    for what in clusters apt files traces; do
        out=$(diff "$a/$what" "$b/$what" | grep '^[<>]')
        [ -n "$out" ] && { echo "$what changed:"; echo "$out" | head -40; bad=1; }
    done
    return $bad
}

case $MODE in
--cleanup)
    [ "$(id -u)" -eq 0 ] || fencing_die "--cleanup needs root"
    lock
    reap
    exit 0
    ;;
run) ;;
*)
    fencing_die "usage: package.sh [--cleanup]"
    ;;
esac

# --- the run ---

if [ "${FENCING_PGVER:-15}" != "$V" ]; then
    echo "1..0 # SKIP the package is built for the system's PostgreSQL $V, not $FENCING_PGVER"
    exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "1..0 # SKIP needs root (apt-get, pg_createcluster)"; exit 0; }
if ! grep -q '^12\.' /etc/debian_version 2>/dev/null || [ ! -x "$SYSBIN/postgres" ]; then
    echo "1..0 # SKIP needs Debian 12 with its postgresql-$V"
    exit 0
fi

START=$SECONDS
lock
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
trap 'exit 129' HUP

# A run to be killed midway (steps 26-29) is this script again, given the
# package built here (FENCING_PACKAGE_DEB, FENCING_PACKAGE_ZIP): it skips the
# build and the lint, and says when its installcheck starts
# (FENCING_PACKAGE_READY); all else, journal and trap included, is the same.
NESTED=${FENCING_PACKAGE_DEB:+1}

# 1. what an interrupted earlier run left behind goes first
if [ -z "$NESTED" ]; then
    reaped=$(reap 2>&1)
    st=0
    ls "$JOURNAL_DIR"/fencing-package.*.journal >/dev/null 2>&1 && st=1
    if [ "$st" -eq 0 ] && [ -n "$(pkg_state "$PKG")" ]; then
        echo "# $PKG is installed on this system, and not by this suite: left alone"
        echo "1..0 # SKIP $PKG is installed here already (not by this suite)"
        exit 0
    fi
    # fencing installed by other means (make install, a copy by hand): the
    # package would go over those files and its purge remove them, under a
    # server that may have the library loaded.  Left alone, as a package.
    if [ "$st" -eq 0 ]; then
        own=$(for f in "/usr/lib/postgresql/$V/lib/fencing.so" "/usr/lib/postgresql/$V/lib/bitcode/fencing" \
            "/usr/share/postgresql/$V/extension/fencing.control" "/usr/share/postgresql/$V/extension/fencing--"*.sql; do
                [ -e "$f" ] || continue
                dpkg -S "$f" >/dev/null 2>&1 || echo "$f"
            done)
        if [ -n "$own" ]; then
            fencing_diag_prefix "not installed by a package, left alone: " <<<"$own"
            echo "1..0 # SKIP fencing is installed here already, not by a package ($(echo "$own" | head -1) ...): the package would replace and then remove it"
            exit 0
        fi
    fi
    [ -n "$reaped" ] && echo "$reaped" | say
    tap $st "no journal of an earlier run left (undone if there was one)"
fi

work=$(mktemp -d /tmp/fencing-package.XXXXXX)
chmod 755 "$work"
# (FENCING_KEEP=1 keeps it for a post-mortem, but never a nested run's:
# those are killed on purpose, and what they leave must go)
: >>"$JOURNAL"
if [ -n "${FENCING_KEEP:-}" ] && [ -z "$NESTED" ]; then
    echo "# scratch directory (kept): $work"
else
    journal "dir $work"
fi

# 2. the build's tools
if [ -z "$NESTED" ]; then
common_ver=$(pkg_version postgresql-common)
want=()
for p in debhelper lintian postgresql-server-dev-all pgxnclient; do
    [ "$(pkg_state "$p")" = ii ] || want+=("$p")
done
if [ ${#want[@]} -gt 0 ]; then
    # postgresql-server-dev-all at the installed postgresql-common's version,
    # so that installing it upgrades nothing of the system's PostgreSQL
    if apt-cache madison postgresql-server-dev-all 2>/dev/null | grep -qF "| $common_ver |"; then
        want=("${want[@]/#postgresql-server-dev-all/postgresql-server-dev-all=$common_ver}")
    fi
    echo "# installing the build's tools: ${want[*]}"
    fencing_apt_install "${want[@]}" 2>&1 | say
fi
st=0
for p in debhelper lintian postgresql-server-dev-all pgxnclient; do
    [ "$(pkg_state "$p")" = ii ] || { echo "# $p is not installed"; st=1; }
done
tap $st "the tools installed: debhelper $(pkg_version debhelper), postgresql-server-dev-all $(pkg_version postgresql-server-dev-all), lintian $(pkg_version lintian), pgxnclient $(pkg_version pgxnclient)"
fi

pg_before=$(pkg_version "postgresql-$V")
snapshot "$work/before"

# 3. the clean export: make dist (git archive of HEAD), unpacked
version=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$FENCING_ROOT/META.json")
upstream=$(sed -n "s/^default_version *= *'\(.*\)'/\1/p" "$FENCING_ROOT/fencing.control")
zip=${FENCING_PACKAGE_ZIP:-$work/fencing-$version.zip}
st=0
[ -z "$NESTED" ] && { make -s -C "$FENCING_ROOT" dist DISTDIR="$work" >"$work/dist.log" 2>&1; st=$?; }
unzip_to() {        # unzip_to DIR: the archive's tree as DIR
    rm -rf "$1" "$work/unzip" && python3 - "$zip" "$work/unzip" <<'EOF' && mv "$work/unzip/fencing-$version" "$1"
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        path = z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode and not info.is_dir():
            os.chmod(path, mode)
EOF
}
src=$work/build/fencing-$upstream
mkdir -p "$work/build"
[ "$st" -eq 0 ] && unzip_to "$src" || st=1
[ "$st" -ne 0 ] && say <"$work/dist.log"
[ -z "$NESTED" ] && tap $st "make dist: fencing-$version.zip of HEAD, unpacked as the clean export fencing-$upstream/"
[ "$st" -eq 0 ] || { echo "1..$n"; exit 1; }
debver=$(cd "$src" && dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
deb=${FENCING_PACKAGE_DEB:-$work/build/${PKG}_${debver}_${arch}.deb}

if [ -z "$NESTED" ]; then

# 4. debian/control is generated from debian/control.in
out=$(cd "$src" && pg_buildext checkcontrol 2>&1)
st=$?
echo "$out" | grep -q 'Updating' && st=1
[ "$st" -ne 0 ] && echo "$out" | say
tap $st "debian/control is what pg_buildext updatecontrol makes of debian/control.in (pgversions: $(grep -v '^#' "$src/debian/pgversions" | tr '\n' ' '))"

# 5. the source package (orig tarball: the export without debian/)
(cd "$work/build" && tar --exclude="fencing-$upstream/debian" -czf "fencing_$upstream.orig.tar.gz" "fencing-$upstream" \
    && dpkg-source -b "fencing-$upstream") >"$work/source.log" 2>&1
st=$?
[ "$st" -ne 0 ] && say <"$work/source.log"
tap $st "dpkg-source -b builds the source package fencing_$debver.dsc (3.0 (quilt))"

# 6. the binary package
t0=$SECONDS
(cd "$src" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1
st=$?
[ -f "$deb" ] || st=1
[ "$st" -ne 0 ] && tail -n 40 "$work/build.log" | say
tap $st "dpkg-buildpackage -us -uc -b builds $(basename "$deb") ($((SECONDS - t0)) s)"
[ "$st" -eq 0 ] || { echo "1..$n"; exit 1; }
dpkg -c "$deb" | awk '{ print $1, $3, $6 }' | say

# 7. lintian: no error; the warnings kept are these, for these reasons:
#   initial-upload-closes-no-bugs: the first Debian revision of a package
#     that is not uploaded to Debian: there is no ITP bug to close.
lintian_ok="initial-upload-closes-no-bugs"
mkdir -p "$work/lintian" && chmod 777 "$work/lintian"
runuser -u nobody -- env HOME="$work/lintian" TMPDIR="$work/lintian" lintian --info --display-info --pedantic \
    "$work/build/fencing_${debver}_${arch}.changes" "$work/build/fencing_$debver.dsc" >"$work/lintian.log" 2>&1
lst=$?
grep -E '^[EWIPX]: ' "$work/lintian.log" | say
errors=$(grep -c '^E: ' "$work/lintian.log")
warnings=$(grep -c '^W: ' "$work/lintian.log")
unexplained=$(grep '^W: ' "$work/lintian.log" | awk '{ print $3 }' | grep -vxE "$lintian_ok" | sort -u | tr '\n' ' ')
st=0
{ [ "$errors" -eq 0 ] && [ -z "$unexplained" ] && [ "$lst" -eq 0 ]; } || st=1
[ -n "$unexplained" ] && echo "# warnings not explained in test/suites/package.sh: $unexplained"
tap $st "lintian (binary and source): $errors errors, $warnings warnings, each explained ($lintian_ok)"

fi     # the build and the lint

# 8. apt would install the package alone
sim=$(cd "$(dirname "$deb")" && "${APT[@]}" -s install "./$(basename "$deb")" 2>&1)
planned=$(echo "$sim" | grep -E '^(Inst|Remv|Conf|Purg) ' | grep -v "^Conf $PKG ")
echo "$planned" | say
st=0
[ "$(echo "$planned" | grep -c .)" -eq 1 ] && echo "$planned" | grep -q "^Inst $PKG " || st=1
tap $st "apt-get -s plans $PKG alone: nothing else installed, upgraded or removed"

# 9. install it as a DBA would (noting first which of its paths exist)
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed -e 's|^\./|/|' -e 's|/$||' | grep -v '^$' |
    while read -r f; do [ -e "$f" ] && echo "$f"; done >"$work/preexisting"
journal "package $PKG"
(cd "$(dirname "$deb")" && setsid -w "${APT[@]}" install "./$(basename "$deb")") >"$work/install.log" 2>&1
st=$?
[ "$(pkg_state "$PKG")" = ii ] && [ "$(pkg_version "$PKG")" = "$debver" ] || st=1
[ "$(pkg_version "postgresql-$V")" = "$pg_before" ] || st=1
[ "$st" -ne 0 ] && tail -n 20 "$work/install.log" | say
tap $st "apt-get install ./$(basename "$deb"): $PKG $debver installed, postgresql-$V still $pg_before"

# 10. what it installed
dpkg -L "$PKG" | sort >"$work/installed"
files=$(while read -r f; do [ -f "$f" ] && echo "$f"; done <"$work/installed")
st=0
for f in "/usr/lib/postgresql/$V/lib/fencing.so" "/usr/share/postgresql/$V/extension/fencing.control" \
    "/usr/share/postgresql/$V/extension/fencing--1.0.sql" "/usr/share/postgresql/$V/extension/fencing--1.0--1.1.sql"; do
    echo "$files" | grep -qxF "$f" || { echo "# not installed: $f"; st=1; }
done
cmp -s "/usr/share/postgresql/$V/extension/fencing.control" "$src/fencing.control" || { echo "# fencing.control differs from the export's"; st=1; }
dpkg --verify "$PKG" >"$work/verify.log" 2>&1 || st=1
[ -s "$work/verify.log" ] && { say <"$work/verify.log"; st=1; }
tap $st "dpkg -L: $(echo "$files" | grep -c .) files, the library, control file and scripts among them; dpkg --verify finds them as packaged"

# 11-12. a cluster of the system's own, as a DBA makes one
CLUSTER=fencing_pkg_$$
PORT=$(fencing_free_port)
journal "cluster $V $CLUSTER"
setsid -w pg_createcluster --start-conf=manual -p "$PORT" -o "shared_preload_libraries=fencing" \
    -o fsync=off "$V" "$CLUSTER" >"$work/createcluster.log" 2>&1
st=$?
[ "$(pg_conftool -s "$V" "$CLUSTER" show shared_preload_libraries 2>&1)" = fencing ] || st=1
[ "$st" -ne 0 ] && say <"$work/createcluster.log"
tap $st "pg_createcluster $V $CLUSTER on free port $PORT with shared_preload_libraries = 'fencing'"

setsid -w pg_ctlcluster --skip-systemctl-redirect "$V" "$CLUSTER" start >"$work/start.log" 2>&1 8<&-
st=$?
pl=$(psql_c -A -t -d postgres -c 'SHOW shared_preload_libraries' 2>&1)
[ "$pl" = fencing ] || st=1
[ "$st" -ne 0 ] && { say <"$work/start.log"; echo "$pl" | say; tail -n 20 "/var/log/postgresql/postgresql-$V-$CLUSTER.log" | say; }
tap $st "pg_ctlcluster $V $CLUSTER start: the server runs and preloads fencing"

# 13. CREATE EXTENSION, from the package's files
out=$(psql_c -A -t -d postgres -v ON_ERROR_STOP=1 \
    -c 'CREATE DATABASE fencing_pkg' 2>&1 && psql_c -A -t -d fencing_pkg -v ON_ERROR_STOP=1 \
    -c 'CREATE EXTENSION fencing' \
    -c "SELECT extversion FROM pg_extension WHERE extname = 'fencing'" \
    -c "SELECT pg_read_file('/proc/self/maps') ~ '/usr/lib/postgresql/$V/lib/fencing\\.so'" 2>&1)
echo "$out" | say
st=0
[ "$(echo "$out" | tail -n 2 | tr '\n' ' ')" = "$upstream t " ] || st=1
tap $st "CREATE EXTENSION fencing: version $upstream, running /usr/lib/postgresql/$V/lib/fencing.so from the package"

# 14. a stale write is rejected
cat >"$work/stale.sql" <<'EOF'
\set VERBOSITY verbose
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-1', 'pending', NULL);
SELECT fencing.protect('refunds');
BEGIN;
SET LOCAL fencing.token = '3:42';
UPDATE refunds SET state = 'paid' WHERE id = 'r-1';
COMMIT;
BEGIN;
SET LOCAL fencing.token = '3:41';
UPDATE refunds SET state = 'paid twice' WHERE id = 'r-1';
COMMIT;
SELECT 'row: ' || state || ' ' || fence::text FROM refunds;
SELECT 'stats: ' || accepted || ' accepted, ' || rejected_stale || ' rejected as stale'
  FROM fencing.stats WHERE relid = 'refunds'::regclass;
EOF
chmod 644 "$work/stale.sql"
out=$(psql_c -A -t -d fencing_pkg -f "$work/stale.sql" 2>&1)
echo "$out" | say
st=0
echo "$out" | grep -q 'ERROR:  SF001: stale fence token 3:41' || st=1
echo "$out" | grep -qx 'row: paid 3:42' || st=1
echo "$out" | grep -qx 'stats: 1 accepted, 1 rejected as stale' || st=1
tap $st "a protected table: the write with token 3:42 commits, the stale one with 3:41 fails with SF001, nothing of it written, fencing.stats counts it"

# 15. the regression and isolation suites against this cluster
check=$work/check
unzip_to "$check" && chown -R postgres: "$check"
t0=$SECONDS
[ -n "${FENCING_PACKAGE_READY:-}" ] && echo "$$" >"$FENCING_PACKAGE_READY"
as_postgres env PGHOST=/var/run/postgresql PGPORT="$PORT" \
    make -C "$check" installcheck PG_CONFIG="$SYSBIN/pg_config" >"$work/installcheck.log" 2>&1
st=$?
passed=$(grep -cE '\.\.\. ok' "$work/installcheck.log")
bad=$(grep -cE '\.\.\. (FAILED|failed)' "$work/installcheck.log")
want_tests=$(( $(make -s -C "$check" print-regress PG_CONFIG="$SYSBIN/pg_config" | wc -w)
             + $(make -s -C "$check" print-isolation PG_CONFIG="$SYSBIN/pg_config" | wc -w) ))
[ "$passed" -eq "$want_tests" ] && [ "$bad" -eq 0 ] || st=1
grep -E '\.\.\. (FAILED|failed)|tests (passed|failed)' "$work/installcheck.log" | say
[ "$st" -ne 0 ] && { tail -n 30 "$work/installcheck.log" | say; head -n 80 "$check"/*regression.diffs "$check"/output_iso/regression.diffs 2>/dev/null | say; }
tap $st "make installcheck against $CLUSTER (port $PORT): $passed of $want_tests regression and isolation tests pass ($((SECONDS - t0)) s)"

# 16. and refuses a server that does not preload the library
setsid -w pg_conftool "$V" "$CLUSTER" remove shared_preload_libraries >/dev/null 2>&1
setsid -w pg_ctlcluster --skip-systemctl-redirect "$V" "$CLUSTER" restart >/dev/null 2>&1 8<&-
pl=$(psql_c -A -t -d postgres -c 'SHOW shared_preload_libraries' 2>&1)
as_postgres env PGHOST=/var/run/postgresql PGPORT="$PORT" \
    make -C "$check" installcheck PG_CONFIG="$SYSBIN/pg_config" >"$work/nopreload.log" 2>&1
st=$?
say <"$work/nopreload.log"
ok=1
[ -z "$pl" ] && [ "$st" -ne 0 ] && grep -q 'does not preload fencing' "$work/nopreload.log" \
    && ! grep -q '\.\.\. ' "$work/nopreload.log" && ok=0
tap $ok "without the preload, make installcheck refuses to run and says why (no test started)"

# 17. the package's autopkgtest, as autopkgtest runs it: a non-root user in
# a copy of the source tree, the package installed
auto=$work/autopkgtest
unzip_to "$auto" && mkdir -p "$auto.tmp" && chown -R postgres: "$auto" "$auto.tmp"
t0=$SECONDS
(cd "$auto" && as_postgres env HOME="$auto.tmp" TMPDIR="$auto.tmp" AUTOPKGTEST_TMP="$auto.tmp" \
    PGPORT="$(fencing_free_port)" debian/tests/installcheck 8<&-) >"$work/autopkgtest.log" 2>&1
st=$?
apassed=$(grep -cE '\.\.\. ok' "$work/autopkgtest.log")
abad=$(grep -cE '\.\.\. (FAILED|failed)' "$work/autopkgtest.log")
[ "$apassed" -eq "$want_tests" ] && [ "$abad" -eq 0 ] || st=1
grep -E '^### |tests (passed|failed)|\.\.\. (FAILED|failed)' "$work/autopkgtest.log" | say
[ "$st" -ne 0 ] && tail -n 60 "$work/autopkgtest.log" | say
tap $st "autopkgtest debian/tests/installcheck (pg_buildext installcheck, pg_virtualenv with the preload): $apassed of $want_tests pass ($((SECONDS - t0)) s)"

# 18. purge the package (the cluster runs on: since step 16 it does not
# preload the library, so the server does not need its files)
setsid -w "${APT[@]}" purge "$PKG" >"$work/purge.log" 2>&1
st=$?
[ -z "$(pkg_state "$PKG")" ] || st=1
[ "$st" -eq 0 ] && unjournal "package $PKG"
[ "$st" -ne 0 ] && tail -n 20 "$work/purge.log" | say
tap $st "apt-get purge $PKG: not installed, no configuration files kept"

# 19. none of its files is left: every path that `dpkg -L` listed is gone,
# but for the directories that were there before the package came
left=()
while read -r f; do
    [ "$f" = /. ] && continue
    ls -d -- "$f" >/dev/null 2>&1 || continue
    [ -d "$f" ] && grep -qxF -- "$f" "$work/preexisting" && continue
    left+=("$f")
done <"$work/installed"
[ ${#left[@]} -gt 0 ] && printf 'left: %s\n' "${left[@]}" | say
[ ${#left[@]} -eq 0 ]
tap $? "none of the $(grep -vcx /. "$work/installed") paths that dpkg -L listed is left (ls after the purge; $(grep -c . "$work/preexisting") directories were there before)"

# 20-22. the PGXN client on the release archive, offline: what `pgxn install
# fencing` does after the download (make, make install into the server of
# pg_config), then `pgxn load` (CREATE EXTENSION, as META.json's provides
# says), against the same cluster
pgxn_opts=(--pg_config "$SYSBIN/pg_config" --make make)
st=1
if [ -z "$(pkg_state "$PKG")" ]; then
    journal "pgxn $zip"
    pgxn install "${pgxn_opts[@]}" "$zip" </dev/null >"$work/pgxn-install.log" 2>&1
    st=$?
    for f in "/usr/lib/postgresql/$V/lib/fencing.so" "/usr/share/postgresql/$V/extension/fencing.control"; do
        [ -f "$f" ] || { echo "# not installed: $f"; st=1; }
    done
    dpkg -S "/usr/lib/postgresql/$V/lib/fencing.so" >/dev/null 2>&1 && { echo "# fencing.so belongs to a package"; st=1; }
fi
[ "$st" -ne 0 ] && tail -n 30 "$work/pgxn-install.log" | say
tap $st "pgxn install $(basename "$zip"): built from the archive and installed into the system's PostgreSQL $V, owned by no package"

mkdir -p "$work/pgxn" && chown postgres: "$work/pgxn"
pgxn_db=(-h /var/run/postgresql -p "$PORT" -U postgres)
out=$(psql_c -d postgres -c 'CREATE DATABASE fencing_pgxn' 2>&1 \
    && as_postgres env TMPDIR="$work/pgxn" pgxn load --pg_config "$SYSBIN/pg_config" "${pgxn_db[@]}" -d fencing_pgxn "$zip" </dev/null 2>&1 \
    && psql_c -A -t -d fencing_pgxn -c "SELECT extversion FROM pg_extension WHERE extname = 'fencing'" 2>&1)
st=$?
echo "$out" | say
[ "$(echo "$out" | tail -n 1)" = "$upstream" ] || st=1
tap $st "pgxn load: CREATE EXTENSION fencing from META.json's provides, version $upstream"

# (not `pgxn check` as well: that is make installcheck a third time, which
# steps 15 and 17 run already; a functional check of this build instead)
setsid -w pg_conftool "$V" "$CLUSTER" set shared_preload_libraries fencing >/dev/null 2>&1
setsid -w pg_ctlcluster --skip-systemctl-redirect "$V" "$CLUSTER" restart >/dev/null 2>&1 8<&-
out=$(psql_c -A -t -d fencing_pgxn -f "$work/stale.sql" 2>&1)
echo "$out" | grep -E 'ERROR|^row|^stats' | say
st=0
echo "$out" | grep -q 'ERROR:  SF001: stale fence token 3:41' || st=1
echo "$out" | grep -qx 'row: paid 3:42' || st=1
echo "$out" | grep -qx 'stats: 1 accepted, 1 rejected as stale' || st=1
tap $st "the PGXN build, preloaded again: the stale write fails with SF001, nothing of it written, fencing.stats counts it"

# 23. drop the cluster
setsid -w pg_dropcluster --stop "$V" "$CLUSTER" >"$work/drop.log" 2>&1
st=$?
unjournal "cluster $V $CLUSTER"
pg_lsclusters -h | awk '{ print $2 }' | grep -qx "$CLUSTER" && st=1
for p in "/etc/postgresql/$V/$CLUSTER" "/var/lib/postgresql/$V/$CLUSTER" "/var/log/postgresql/postgresql-$V-$CLUSTER.log"; do
    [ -e "$p" ] && { echo "# left: $p"; st=1; }
done
[ "$st" -ne 0 ] && say <"$work/drop.log"
tap $st "pg_dropcluster --stop $V $CLUSTER: no configuration, data or log of it left"

# 24. pgxn uninstall
pgxn uninstall "${pgxn_opts[@]}" "$zip" </dev/null >"$work/pgxn-uninstall.log" 2>&1
st=$?
[ "$st" -eq 0 ] && unjournal "pgxn $zip"
leftover=$(find "/usr/lib/postgresql/$V" "/usr/share/postgresql/$V" -name '*fencing*' 2>/dev/null)
[ -n "$leftover" ] && { echo "$leftover" | sed 's/^/left: /' | say; st=1; }
[ "$st" -ne 0 ] && tail -n 20 "$work/pgxn-uninstall.log" | say
tap $st "pgxn uninstall: no file named fencing left under /usr/lib/postgresql/$V or /usr/share/postgresql/$V"

# 25. the system is as it was found
snapshot "$work/after"
out=$(compare "$work/before" "$work/after")
st=$?
[ -n "$out" ] && echo "$out" | say
[ "$(pkg_version "postgresql-$V")" = "$pg_before" ] || st=1
tap $st "the system is as found: packages (postgresql-$V $pg_before), clusters, apt sources, PostgreSQL's directories"

# 26-29. a run killed midway, once with SIGTERM, once with SIGKILL
[ -n "$NESTED" ] && exit 0
killed_run() {      # killed_run SIGNAL: start a child, kill it once it is up
    local sig=$1 ready=$work/ready.$1 pid
    rm -f "$ready"
    FENCING_PACKAGE_DEB=$deb FENCING_PACKAGE_ZIP=$zip FENCING_PACKAGE_READY=$ready \
        setsid bash "$SELF" run </dev/null >"$work/child.$sig.log" 2>&1 &
    pid=$!
    echo "$pid" >"$work/nested.pid"
    for _ in $(seq 1 900); do
        [ -f "$ready" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    [ -f "$ready" ] || { echo "child $pid never got ready"; cat "$work/child.$sig.log"; return 1; }
    # midway: once pg_regress runs in the child's process group
    for _ in $(seq 1 600); do
        pgrep -g "$pid" -f 'pg_(isolation_)?regress' >/dev/null && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.2
    done
    pgrep -g "$pid" -f 'pg_(isolation_)?regress' >/dev/null \
        || { echo "child $pid: no installcheck running to interrupt"; cat "$work/child.$sig.log"; return 1; }
    echo "child $pid: package installed, cluster up, installcheck running; kill -$sig to its process group"
    grep -E '^(not )?ok ' "$work/child.$sig.log" | sed 's/^/  child: /'
    kill "-$sig" -- "-$pid" 2>/dev/null
    for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && { echo "child $pid still running after 600 s"; return 1; }
    wait "$pid" 2>/dev/null
    echo "child $pid exited with status $?"
    rm -f "$work/nested.pid"
    echo "$pid" >"$work/child.pid"
    return 0
}

out=$(killed_run TERM 2>&1)
st=$?
echo "$out" | say
tap $st "a run killed with SIGTERM midway (package installed, cluster up, installcheck running) exits"
snapshot "$work/after-term"
out=$(compare "$work/before" "$work/after-term")
st2=$?
[ -n "$out" ] && echo "$out" | say
[ "$st" -eq 0 ] && [ "$st2" -eq 0 ]
tap $? "its trap left nothing behind: no package, cluster, journal or file of it"

out=$(killed_run KILL 2>&1)
st=$?
echo "$out" | say
cpid=$(cat "$work/child.pid" 2>/dev/null)
# the kill must have left something, or this proves nothing
[ -f "$JOURNAL_DIR/fencing-package.$cpid.journal" ] && [ "$(pkg_state "$PKG")" = ii ] \
    && pg_lsclusters -h | awk '{ print $2 }' | grep -qx "fencing_pkg_$cpid" || st=1
# and its server, still running, does not hold the suite's lock
# holds_open PID PATH: whether process PID has PATH open (the lock)
holds_open() {
    local fd
    for fd in "/proc/$1/fd/"*; do
        [ "$(readlink "$fd" 2>/dev/null)" = "$2" ] && return 0
    done
    return 1
}
pm=$(head -n 1 "/var/lib/postgresql/$V/fencing_pkg_$cpid/postmaster.pid" 2>/dev/null)
if [ -z "$pm" ] || ! kill -0 "$pm" 2>/dev/null; then
    echo "# the killed run's server is not running"; st=1
elif holds_open "$pm" "/usr/lib/postgresql/$V/lib"; then
    echo "# the killed run's server $pm holds the lock"; st=1
fi
tap $st "a run killed with SIGKILL midway leaves its journal, the package and its cluster (running, without the lock) behind"
out=$(bash "$SELF" --cleanup 2>&1)
st=$?
echo "$out" | say
snapshot "$work/after-kill"
out=$(compare "$work/before" "$work/after-kill")
st2=$?
[ -n "$out" ] && echo "$out" | say
[ "$st" -eq 0 ] && [ "$st2" -eq 0 ]
tap $? "the cleanup step every run starts with (package.sh --cleanup) removes all of it: the system is as found"

echo "1..$n"
echo "# $n steps in $((SECONDS - START)) s"
[ "$failed" -eq 0 ]
