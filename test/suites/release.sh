#!/usr/bin/env bash
# test/suites/release.sh: the release's description and archive.
#
# META.json follows the PGXN Meta Spec and names the same version as
# fencing.control and debian/changelog (test/release/check_meta.py), and the
# check fails when they differ; `make dist` builds fencing-<version>.zip
# holding exactly the committed tree: everything that builds and tests the
# extension, nothing generated; every relative link of the Markdown a user
# reads names a file and heading of the tree (test/release/check_links.py);
# the shell of test/ and .ci/ is shellcheck-clean (shellcheck installed when
# missing, as root); test/README.md lists every suite and every FENCING_*
# variable, and docs/development.md's claims about the source hold
# (test/release/check_harness.py).  No server needed; prints TAP.
#
# Run by test/check.sh (FENCING_SUITES=release), or alone:
#   bash test/suites/release.sh

set -u
FENCING_ROOT=${FENCING_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
set +o pipefail

work=$(mktemp -d /tmp/fencing-release.XXXXXX)
trap 'rm -rf "$work"' EXIT
check=$FENCING_ROOT/test/release/check_meta.py
n=0
failed=0

tap() {     # tap STATUS DESCRIPTION: one TAP line
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi
}
say() { sed 's/^/# /'; }

for tool in python3 git make; do
    command -v "$tool" >/dev/null || { echo "1..0 # SKIP $tool is not installed"; exit 0; }
done

echo "1..13"

# 1. the committed description is consistent
out=$(python3 "$check" "$FENCING_ROOT" 2>&1)
st=$?
echo "$out" | say
tap $st "META.json follows PGXN Meta Spec 1.0.0 and its version agrees with fencing.control and debian/changelog"

# A copy of the files the check reads, for breaking them on purpose.
copy() {
    rm -rf "$work/copy" && mkdir -p "$work/copy/debian"
    cp -a "$FENCING_ROOT/META.json" "$FENCING_ROOT/fencing.control" "$FENCING_ROOT/README.md" \
        "$FENCING_ROOT/sql" "$work/copy/"
    cp -a "$FENCING_ROOT/debian/changelog" "$work/copy/debian/"
}
# must_fail DESCRIPTION PATTERN: the check fails on the copy, saying PATTERN
must_fail() {
    local out st
    out=$(python3 "$check" "$work/copy" 2>&1)
    st=$?
    echo "$out" | say
    if [ "$st" -ne 0 ] && echo "$out" | grep -q -- "$2"; then tap 0 "$1"; else tap 1 "$1"; fi
}

# 2-4. each of the three versions moved alone is caught
copy
python3 - "$work/copy/META.json" <<'EOF'
import json, sys
p = sys.argv[1]; m = json.load(open(p))
m["version"] = m["provides"]["fencing"]["version"] = "9.8.0"
json.dump(m, open(p, "w"), indent=2)
EOF
must_fail "the check fails when META.json's version differs (9.8.0)" "versions differ: META.json version 9.8.0"

copy
sed -i '1s/(\([^)]*\))/(9.8-1)/' "$work/copy/debian/changelog"
must_fail "the check fails when debian/changelog's version differs (9.8-1)" "versions differ: debian/changelog 9.8-1"

copy
sed -i "s/^default_version = .*/default_version = '9.8'/" "$work/copy/fencing.control"
must_fail "the check fails when fencing.control's default_version differs (9.8)" "versions differ: META.json version"

# 5. and a META.json that breaks the spec
copy
python3 - "$work/copy/META.json" <<'EOF'
import json, sys
p = sys.argv[1]; m = json.load(open(p))
m["license"] = "GPL"; m["provides"]["fencing"]["version"] = "1.1"; del m["abstract"]
m["provides"]["fencing"]["file"] = "fencing.control"
json.dump(m, open(p, "w"), indent=2)
EOF
out=$(python3 "$check" "$work/copy" 2>&1)
st=$?
echo "$out" | say
ok=1
[ "$st" -ne 0 ] && echo "$out" | grep -q 'license: "GPL"' && echo "$out" | grep -q 'is not a semantic version' \
    && echo "$out" | grep -q '"abstract" is missing' && echo "$out" | grep -q 'is not an .sql file' && ok=0
tap $ok "the check fails on a META.json that breaks the spec (license, version form, a required key) or pgxn load (a provides file that is not SQL)"

# 6. make dist
version=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["version"])' "$FENCING_ROOT/META.json")
zip=$work/fencing-$version.zip
out=$(make -s -C "$FENCING_ROOT" dist DISTDIR="$work" 2>&1)
st=$?
echo "$out" | say
[ "$st" -eq 0 ] && [ -s "$zip" ] && [ "$(echo "$out" | tail -n 1)" = "$zip" ]
tap $? "make dist builds fencing-$version.zip"

# 7. the archive is the committed tree: same paths, same bytes, same modes
git -C "$FENCING_ROOT" ls-tree -r HEAD >"$work/tree"
out=$(python3 - "$zip" "fencing-$version/" "$work/tree" <<'EOF' 2>&1
import hashlib, sys, zipfile
zpath, prefix, tree = sys.argv[1:]
want = {}
for line in open(tree):
    meta, path = line.rstrip("\n").split("\t", 1)
    mode, kind, oid = meta.split()
    want[path] = (mode, oid)
got = {}
with zipfile.ZipFile(zpath) as z:
    for info in z.infolist():
        if info.is_dir():
            continue
        if not info.filename.startswith(prefix):
            print(f"outside {prefix}: {info.filename}"); continue
        data = z.read(info)
        oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        mode = "100755" if (info.external_attr >> 16) & 0o111 else "100644"
        got[info.filename[len(prefix):]] = (mode, oid)
bad = 0
for p in sorted(set(want) - set(got)):
    print(f"missing from the archive: {p}"); bad += 1
for p in sorted(set(got) - set(want)):
    print(f"not in the committed tree: {p}"); bad += 1
for p in sorted(set(want) & set(got)):
    if want[p][1] != got[p][1]:
        print(f"content differs from HEAD: {p}"); bad += 1
    elif want[p][0] != got[p][0]:
        print(f"mode differs from HEAD ({want[p][0]} vs {got[p][0]}): {p}"); bad += 1
print(f"{len(got)} files under {prefix}, {len(want)} in HEAD")
sys.exit(1 if bad else 0)
EOF
)
st=$?
echo "$out" | say
tap $st "the archive holds exactly the committed tree (HEAD): same files, bytes and modes"

# 8. nothing generated: no path of the archive is one that .gitignore ignores
python3 -c '
import sys, zipfile
for n in zipfile.ZipFile(sys.argv[1]).namelist():
    if not n.endswith("/"): print(n.split("/", 1)[1])' "$zip" >"$work/paths"
ignored=$(git -C "$FENCING_ROOT" check-ignore --no-index --stdin <"$work/paths")
[ -n "$ignored" ] && echo "$ignored" | sed 's/^/generated: /' | say
# (and the rules do catch generated files, or this would pass vacuously)
probe=$(printf 'src/fencing.o\nfencing.so\nresults/x.out\nfencing-1.1.0.zip\n' | git -C "$FENCING_ROOT" check-ignore --no-index --stdin | wc -l)
[ "$probe" -eq 4 ] || echo "git check-ignore found $probe of 4 generated probe paths" | say
[ -z "$ignored" ] && [ "$probe" -eq 4 ]
tap $? "nothing generated in the archive (no path that .gitignore ignores: objects, results, archives)"

# 9. everything that builds and tests it: the Makefile's inputs are there
missing=()
has() { grep -qxF -- "$1" "$work/paths" || missing+=("$1"); }
for f in Makefile fencing.control META.json README.md debian/control debian/rules debian/tests/control; do has "$f"; done
# shellcheck disable=SC2016  # $(OBJS) and $(DATA) are make's, expanded by make
for o in $(make -s -C "$FENCING_ROOT" --eval='print-objs: ; @echo $(OBJS)' print-objs); do has "${o%.o}.c"; done
# shellcheck disable=SC2016  # (as above)
for d in $(make -s -C "$FENCING_ROOT" --eval='print-data: ; @echo $(DATA)' print-data); do has "$d"; done
for t in $(make -s -C "$FENCING_ROOT" print-regress); do has "sql/$t.sql"; has "expected/$t.out"; done
for t in $(make -s -C "$FENCING_ROOT" print-isolation); do has "test/isolation/specs/$t.spec"; has "test/isolation/expected/$t.out"; done
[ ${#missing[@]} -gt 0 ] && printf 'missing: %s\n' "${missing[@]}" | say
[ ${#missing[@]} -eq 0 ]
tap $? "the archive holds what builds and tests it (sources of OBJS, DATA, REGRESS and ISOLATION files, debian/)"

# 10. every relative link of README.md, CHANGELOG.md, docs/ and monitoring/
# names a file of the tree and a heading of it
links=$FENCING_ROOT/test/release/check_links.py
out=$(python3 "$links" "$FENCING_ROOT" 2>&1)
st=$?
echo "$out" | say
# (and the check does catch a missing file and a missing heading, or this
# would pass vacuously)
rm -rf "$work/links" && mkdir -p "$work/links/docs"
cp -a "$FENCING_ROOT/README.md" "$work/links/"
cp -a "$FENCING_ROOT/docs/." "$work/links/docs/"
printf '\n[gone](docs/no-such-page.md) [moved](docs/guard.md#no-such-heading)\n' >>"$work/links/README.md"
probe=$(python3 "$links" "$work/links" 2>&1)
pst=$?
echo "$probe" | grep -q 'no file docs/no-such-page.md' && echo "$probe" | grep -q 'no heading #no-such-heading in docs/guard.md'
caught=$?
{ [ "$pst" -ne 0 ] && [ "$caught" -eq 0 ]; } || echo "$probe" | sed 's/^/probe: /' | say
[ "$st" -eq 0 ] && [ "$pst" -ne 0 ] && [ "$caught" -eq 0 ]
tap $? "every relative link of the Markdown a user reads names a file and heading of the tree (test/release/check_links.py)"

# 11. the shell of test/ (harness, demo, benchmarks) and .ci/run: no
# warning of shellcheck at its default severity, with the files they
# source followed (.shellcheckrc); a warning that is wrong is disabled
# where it occurs, with the reason
if ! command -v shellcheck >/dev/null && [ "$(id -u)" -eq 0 ]; then
    fencing_install_missing shellcheck >/dev/null 2>&1
fi
if command -v shellcheck >/dev/null; then
    shell_files() {
        git -C "$FENCING_ROOT" ls-files -- test .ci 2>/dev/null ||
            (cd "$FENCING_ROOT" && find test .ci -type f -not -path '*/node_modules/*')
    }
    mapfile -t shfiles < <(shell_files | while IFS= read -r f; do
        case $f in
        *.sh) echo "$f" ;;
        *) head -n 1 "$FENCING_ROOT/$f" 2>/dev/null | grep -qE '^#!.*[/ ](ba)?sh$' && echo "$f" ;;
        esac
    done)
    out=$(cd "$FENCING_ROOT" && shellcheck -f gcc -- "${shfiles[@]}" 2>&1)
    st=$?
    [ -n "$out" ] && echo "$out" | say
    { [ "$st" -eq 0 ] && [ "${#shfiles[@]}" -gt 20 ]; }
    tap $? "the shell of test/ and .ci/ is shellcheck-clean (${#shfiles[@]} files, shellcheck $(shellcheck --version | sed -n 's/^version: //p'))"
elif [ "$(id -u)" -eq 0 ]; then
    tap 1 "the shell of test/ and .ci/ is shellcheck-clean: shellcheck could not be installed"
else
    n=$((n + 1))
    echo "ok $n - the shell of test/ and .ci/ is shellcheck-clean # SKIP shellcheck is not installed (apt-get install shellcheck, as root)"
fi

# 12. test/README.md is the one description of the harness: it lists every
# suite and every FENCING_* variable of test/ and .ci/; and what
# docs/development.md says of the source holds (version tests only in
# compat.h, every C file in a layer, the files and functions of the
# version table)
harness=$FENCING_ROOT/test/release/check_harness.py
out=$(python3 "$harness" "$FENCING_ROOT" 2>&1)
st=$?
echo "$out" | say
tap $st "test/README.md lists every suite and FENCING_* variable; docs/development.md's claims about the source hold (test/release/check_harness.py)"

# 13. ... and the check catches each kind of gap, on a copy broken on
# purpose (or it would pass vacuously)
rm -rf "$work/harness" && mkdir -p "$work/harness/docs"
cp -a "$FENCING_ROOT/test" "$FENCING_ROOT/.ci" "$FENCING_ROOT/src" "$work/harness/"
cp -a "$FENCING_ROOT/docs/development.md" "$work/harness/docs/"
sed -i '/^| \x60locksvc\x60 |/d; s/FENCING_\(UPDATE_WAIT\)/NOT_\1/' "$work/harness/test/README.md"
printf '#if PG_VERSION_NUM >= 170000\n#endif\n' >>"$work/harness/src/fence.c"
sed -i 's/\x60idempotency.c\x60, //' "$work/harness/docs/development.md"
probe=$(python3 "$harness" "$work/harness" 2>&1)
pst=$?
caught=0
for want in 'has no row for locksvc' 'FENCING_UPDATE_WAIT is not listed' \
    'src/fence.c:[0-9]*: tests the server version outside' 'src/idempotency.c is in no layer'; do
    echo "$probe" | grep -q -- "$want" || { echo "not caught: $want" | say; caught=1; }
done
{ [ "$pst" -ne 0 ] && [ "$caught" -eq 0 ]; } || echo "$probe" | sed 's/^/probe: /' | say
[ "$pst" -ne 0 ] && [ "$caught" -eq 0 ]
tap $? "the check fails on a suite, a variable and a C file left out, and on a version test outside compat.h"

[ "$failed" -eq 0 ]
