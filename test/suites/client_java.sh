#!/usr/bin/env bash
# test/suites/client_java.sh: the Java client library (clients/java).  The
# checks are test/t/124_client_java.pl (its head says what it runs); this
# makes sure of Debian's packages (Java 17, Maven, the lock services:
# fencing_need), fills a Maven repository from Maven Central once per pom.xml
# (cached under FENCING_CLIENT_JAVA_CACHE by the pom's hash, so a second
# run is offline) and runs that file with `make prove_installcheck` as the
# postgres OS user, in copies of the tree and of clients/java
# (FENCING_CLIENT_JAVA, FENCING_CLIENT_JAVA_M2 the settings file naming the
# cached repository), with FENCING_CLIENT_STORM 1 on PostgreSQL 15; then
# fails if it skipped.
# Once per edition (fencing_client_prove, test/lib/managed.sh): the C
# edition, and on PostgreSQL 18 the edition for managed PostgreSQL too
# (FENCING_CLIENT_EDITIONS).
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/pgtle.sh
. "$FENCING_ROOT/test/lib/pgtle.sh"
# shellcheck source=../lib/managed.sh
. "$FENCING_ROOT/test/lib/managed.sh"

t=test/t/124_client_java.pl W=$FENCING_WORK/client_java SRC=$FENCING_ROOT/clients/java
CACHE=${FENCING_CLIENT_JAVA_CACHE:-$FENCING_CACHE/client-java}
fencing_need client_java ||
    { echo "not ok 1 - the packages it needs: $(fencing_suite_packages client_java | tr '\n' ' ')"; exit 1; }
# the repository: every dependency and plugin of one pom.xml, fetched once
# (a build and a run of the one server-less test class make Maven resolve
# Surefire's JUnit provider too), under a lock
sum=$( (java -version 2>&1; cat "$SRC/pom.xml") | sha256sum | cut -c1-16) R=$CACHE/$sum
settings() { printf '<settings><localRepository>%s</localRepository></settings>\n' "$1"; }
mkdir -p "$CACHE" && (
    flock 9
    [ -f "$R/.complete" ] && exit 0
    fencing_log "Maven: clients/java's dependencies into $R"
    rm -rf "${R:?}.tmp" "${R:?}" && mkdir -p "$R.tmp/project" &&
        cp -a "$SRC"/{pom.xml,src,examples} "$R.tmp/project/" &&
        settings "$R.tmp/m2" >"$R.tmp/settings.xml" &&
        (cd "$R.tmp/project" && mvn -B -q -s "$R.tmp/settings.xml" -Dtest=TokenTest \
            -Dmdep.outputFile=cp.txt -Dmdep.includeScope=test dependency:go-offline dependency:build-classpath test) >&2 &&
        rm -rf "$R.tmp/project" && mv "$R.tmp" "$R" && settings "$R/m2" >"$R/settings.xml" &&
        touch "$R/.complete"
) 9>"$CACHE/maven.lock"
[ -f "$R/.complete" ] || { echo "not ok 1 - Maven: clients/java's dependencies from Maven Central (pom.xml)"; exit 1; }
# the TAP test runs Maven as postgres: the repository is its (Maven reads only)
fencing_with_lock "$CACHE/maven.lock" chown -R postgres: "$R" || exit 1
rm -rf "$W" && mkdir -p "$W/java" && cp -a "$SRC"/{pom.xml,README.md,src,examples} "$W/java/" || exit 1
storm=${FENCING_CLIENT_STORM:-$([ "$FENCING_PGVER" = 15 ] && echo 1 || echo 0)}
fencing_client_prove "$W" "$t" FENCING_CLIENT_JAVA="$W/java" FENCING_CLIENT_JAVA_M2="$R/settings.xml" \
    FENCING_CLIENT_STORM="$storm"
