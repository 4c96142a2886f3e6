#!/usr/bin/env bash
# test/fresh-machine.sh: make this machine "fresh" again for a cold
# measurement of test/check.sh: remove exactly what the harness installed
# and filled, nothing else.  For developers; CI never runs it.
#
#   sudo bash test/fresh-machine.sh          say what it would remove
#   sudo bash test/fresh-machine.sh --yes    remove it
#
# What the harness leaves, and what this removes:
# - the Debian packages its apt runs installed, with the dependencies apt
#   installed along with them: every apt run of the harness is in apt's
#   history (/var/log/apt/history.log*, its command line is
#   "apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends
#   ..."), and its "Install:" line lists what that run installed; those
#   still installed are purged (packages the machine had before, or that
#   something else installed, are not in those lines and stay);
# - $FENCING_CACHE (/var/cache/fencing): PostgreSQL 18, pgTAP, Citus, the
#   source packages downloaded (with the harness's own deb-src entry and
#   apt lists), the Go build cache, npm's trees and cache, the postgres OS
#   user's HOME for the harness's programs;
# - the deb-src entries older versions of the harness left in
#   /etc/apt/sources.list.d/ (fencing-pg18-src.sources,
#   fencing-postgresql-*-src.sources) and the source indexes apt fetched
#   for them (apt-get update drops them);
# - what older versions of the harness put in the postgres OS user's home
#   (Go's telemetry in /var/lib/postgresql/.config/go) and the directory
#   where TAP tests reserve ports (/tmp/fencing-portlock).
# It does not touch root's own caches (~/.npm, ~/.cache/go-build): older
# versions of the harness filled them too, but so may anything else; it
# names them, to remove by hand.
#
# It refuses while a run of test/check.sh holds the harness's apt lock,
# or while any /tmp/fencing.* scratch directory has a server running.
set -u
FENCING_CACHE=${FENCING_CACHE:-/var/cache/fencing}
doit=''
case ${1:-} in
--yes) doit=1 ;;
'') ;;
*) echo "usage: fresh-machine.sh [--yes]" >&2; exit 2 ;;
esac
[ "$(id -u)" -eq 0 ] || { echo "error: run as root" >&2; exit 1; }

say() { printf '%s\n' "$*"; }
act() { if [ -n "$doit" ]; then "$@"; else say "  would run: $*"; fi; }

if [ -e "$FENCING_CACHE/apt.lock" ]; then
    exec 9>"$FENCING_CACHE/apt.lock"
    flock -n -x 9 || { echo "error: a run of test/check.sh holds $FENCING_CACHE/apt.lock: wait for it to end" >&2; exit 1; }
fi
if pgrep -f -- '-D /tmp/fencing\.' >/dev/null; then
    echo "error: servers of a harness run are up (pgrep -f -- '-D /tmp/fencing.'): wait for it to end" >&2
    exit 1
fi

# 1. the packages: the Install: lines of the harness's apt runs
mapfile -t installed < <(
    for f in /var/log/apt/history.log*; do [ -e "$f" ] && zcat -f "$f"; done | awk '
        /^Start-Date:/ { ours = 0 }
        /^Commandline: apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends / { ours = 1 }
        ours && /^Install: / {
            sub(/^Install: /, "")
            n = split($0, parts, /\), /)
            for (i = 1; i <= n; i++) { split(parts[i], w, " "); print w[1] }
        }' | sort -u)
purge=()
for p in "${installed[@]}"; do
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | tr -d ' ')" = ii ] && purge+=("$p")
done
say "packages the harness's apt runs installed, still installed: ${#purge[@]} (of ${#installed[@]} in apt's history)"
[ ${#purge[@]} -gt 0 ] && say "  ${purge[*]}"
if [ ${#purge[@]} -gt 0 ]; then
    act env DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq "${purge[@]}"
fi

# 2. the caches
say "the harness's caches: $FENCING_CACHE ($(du -sh "$FENCING_CACHE" 2>/dev/null | cut -f1 || echo none))"
[ -d "$FENCING_CACHE" ] && act rm -rf "$FENCING_CACHE"

# 3. apt's entries of the harness, then apt's lists without them
entries=$(compgen -G '/etc/apt/sources.list.d/fencing-*.sources')
say "apt entries older versions of the harness left: ${entries:-none}"
if [ -n "$entries" ]; then
    # shellcheck disable=SC2086
    act rm -f $entries
    act apt-get update -qq
fi

# 4. the rest
for d in /var/lib/postgresql/.config/go /tmp/fencing-portlock; do
    [ -e "$d" ] && { say "left by the harness: $d"; act rm -rf "$d"; }
done
for d in /root/.npm /root/.cache/go-build /root/.config/go; do
    [ -e "$d" ] && say "not removed (older harness versions filled it, but not only they): $d"
done
[ -n "$doit" ] || say "(nothing removed: --yes removes it)"
exit 0
