# shellcheck shell=bash
# test/lib/upgrade.sh: helpers of the upgrade suites (test/suites/update.sh,
# test/suites/pg_upgrade.sh).  Source after test/lib/common.sh.
#
#   fencing_versions              the extension's versions, oldest first,
#                                 from sql/fencing--*.sql
#   fencing_newest_version        default_version of fencing.control
#   fencing_update_paths FROM TO  every path of update scripts, one a line
#                                 ("1.0 1.1 1.2")
#   fencing_inst_dir INST WHAT    a directory (pkglibdir, sharedir, bindir)
#                                 of the copy INST of the installation
#   fencing_install_files FROM TO install the extension's files of copy FROM
#                                 over those of copy TO, as a package upgrade
#                                 does (new file, then rename)
#   fencing_releases              the released versions, oldest first, one
#                                 "VERSION COMMIT" a line (test/releases)
#   fencing_release_commit V      the commit that released version V
#   fencing_release_source V DIR  release V's tree (git archive of its
#                                 commit) in DIR; fails, saying why, when
#                                 the commit is not in this clone or its
#                                 fencing.control is not at V
#   fencing_build_release V INST  build and install the released version V
#                                 (its commit's tree) into the copy INST
#   fencing_ext_dump DB FILE      what makes the extension in DB what it is,
#                                 OIDs normalised: pg_dump --schema-only
#                                 --binary-upgrade (every member with its ALTER
#                                 EXTENSION ADD, owners, ACLs, comments and
#                                 initial privileges), pg_extension's row with
#                                 its config tables by name, and the pg_depend
#                                 membership via pg_identify_object
#   fencing_sql DB SQL...         psql -X -At -v ON_ERROR_STOP=1 as postgres

fencing_sql() {
    local db=$1; shift
    local args=(-c "SET client_min_messages = warning") s
    for s in "$@"; do args+=(-c "$s"); done
    fencing_as_postgres "$FENCING_BINDIR/psql" -X -At -q -v ON_ERROR_STOP=1 -d "$db" "${args[@]}"
}

fencing_versions() {
    (cd "$FENCING_ROOT/sql" && ls -1 fencing--*.sql) \
        | sed 's/^fencing--//; s/\.sql$//' | tr -- '-' '\n' | grep -v '^$' | sort -uV
}

fencing_newest_version() {
    sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$FENCING_ROOT/fencing.control"
}

# Depth-first over the update scripts from $1 to $2.
fencing_update_paths() {
    local from=$1 to=$2 path=${3:-$1} next
    if [ "$from" = "$to" ]; then
        echo "$path"
        return
    fi
    for next in $(cd "$FENCING_ROOT/sql" && compgen -G "fencing--$from--*.sql" \
                  | sed "s/^fencing--$from--//; s/\.sql$//" | sort -V); do
        case " $path " in *" $next "*) continue ;; esac    # no cycles
        fencing_update_paths "$next" "$to" "$path $next"
    done
}

fencing_inst_dir() {
    local inst=$1 what=$2
    case $FENCING_PGVER in
    15) echo "$inst$(/usr/lib/postgresql/15/bin/pg_config --"$what")" ;;
    *) "$inst/bin/pg_config" --"$what" ;;
    esac
}

fencing_install_files() {
    local from=$1 to=$2 f d
    d=$(fencing_inst_dir "$to" pkglibdir)
    f=$(fencing_inst_dir "$from" pkglibdir)/fencing.so
    cp "$f" "$d/.fencing.so.new" && mv -f "$d/.fencing.so.new" "$d/fencing.so"
    if [ -d "$(fencing_inst_dir "$from" pkglibdir)/bitcode/fencing" ]; then
        rm -rf "$d/bitcode/fencing" "$d/bitcode/fencing.index.bc"
        cp -a "$(fencing_inst_dir "$from" pkglibdir)"/bitcode/fencing* "$d/bitcode/"
    fi
    d=$(fencing_inst_dir "$to" sharedir)/extension
    for f in "$(fencing_inst_dir "$from" sharedir)"/extension/fencing*; do
        cp "$f" "$d/.new" && mv -f "$d/.new" "$d/$(basename "$f")"
    done
    chmod -R a+rX "$to"
}

# The released versions from test/releases: "VERSION COMMIT" lines,
# comments and blank lines left out.
fencing_releases() {
    sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$FENCING_ROOT/test/releases" | awk '{ print $1, $2 }'
}

fencing_release_commit() {
    fencing_releases | awk -v v="$1" '$1 == v { print $2 }'
}

# Release $1's tree, from its commit, into directory $2 (replaced).  On
# failure says why on stderr: not recorded, a commit this clone does not
# have (a shallow clone: git fetch --unshallow), or a tree whose
# fencing.control is at another version (a wrong line in test/releases).
fencing_release_source() {
    local v=$1 dir=$2 commit ctl
    commit=$(fencing_release_commit "$v")
    if [ -z "$commit" ]; then
        echo "release $v is not recorded in test/releases" >&2
        return 1
    fi
    if ! git -C "$FENCING_ROOT" cat-file -e "$commit^{commit}" 2>/dev/null; then
        echo "commit $commit of release $v is not in $FENCING_ROOT (not a git clone, or a shallow one: git fetch --unshallow)" >&2
        return 1
    fi
    rm -rf "$dir" && mkdir -p "$dir"
    git -C "$FENCING_ROOT" archive "$commit" | tar -x -C "$dir" || return 1
    ctl=$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$dir/fencing.control")
    if [ "$ctl" != "$v" ]; then
        echo "commit $commit recorded for release $v has default_version '$ctl' in fencing.control" >&2
        return 1
    fi
}

# Build release $1 from its commit into copy $2.  Returns 2 (saying why on
# stderr) when its source cannot be had, 1 (with the log in
# $FENCING_WORK/build.log) when it does not build on this server.
fencing_build_release() {
    local v=$1 inst=$2 src=$FENCING_WORK/release-$1
    fencing_release_source "$v" "$src" || return 2
    (fencing_make_install "$src" "$inst" "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING") 2>/dev/null || return 1
}

fencing_ext_dump() {
    local db=$1 out=$2
    {
        echo "== pg_dump --schema-only --binary-upgrade (the extension's schema)"
        fencing_as_postgres "$FENCING_BINDIR/pg_dump" --schema-only --binary-upgrade -N app -d "$db"
        echo "== pg_extension"
        fencing_sql "$db" "SELECT extname, extowner::regrole, extnamespace::regnamespace,
                extrelocatable, extversion,
                (SELECT array_agg(c::regclass::text ORDER BY o)
                   FROM unnest(extconfig) WITH ORDINALITY u(c, o)),
                extcondition
           FROM pg_extension WHERE extname = 'fencing'"
        echo "== members (pg_depend deptype e)"
        fencing_sql "$db" "SELECT (pg_identify_object(classid, objid, objsubid)).type
                       || ' ' || (pg_identify_object(classid, objid, objsubid)).identity
           FROM pg_depend
          WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
            AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'fencing')
          ORDER BY 1"
    } | sed -E \
        -e '/^\\(un)?restrict /d' \
        -e '/^-- Dumped (from|by) /d' \
        -e "/binary_upgrade_set_next|binary_upgrade_create_empty_extension|pg_upgrade: OID|'[0-9]+'::pg_catalog.oid/{s|[0-9A-F]+/[0-9A-F]+|N/N|g;s/[0-9]+/N/g}" \
        -e "s/^SET relfrozenxid = '[0-9]+', relminmxid = '[0-9]+'/SET relfrozenxid = 'N', relminmxid = 'N'/" \
        -e "s/^WHERE oid = '[0-9]+';/WHERE oid = 'N';/" \
        -e "s/^(SELECT pg_catalog.setval\('[^']*', )[0-9]+, (true|false)\);/\1N, B); -- data of a configuration sequence/" \
        >"$out"
}
