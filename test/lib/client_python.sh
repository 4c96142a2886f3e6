# shellcheck shell=bash
# test/lib/client_python.sh: the Python client (clients/python) built and
# installed as a user installs it, for the suites that run it (the
# client_python suite; any suite whose Python needs fencing_client).
# Sourcing it defines a function and changes nothing.
#
#   fencing_python_client_venv DEST
#       a fresh virtual environment DEST (Debian's python3 -m venv) with
#       clients/python/requirements.txt installed (exact versions, hashes
#       checked) and the wheel of clients/python built from a copy of it
#       (flit_core, pinned there too) and installed with pip; DEST/dist
#       holds the wheel, DEST/src the copy it was built from.  The wheels
#       of the requirements come from PyPI once per requirements.txt and
#       are kept under $FENCING_CLIENT_PYTHON_CACHE (default
#       /var/cache/fencing/client-python/<hash of requirements.txt>/wheels),
#       so a second run is offline.  Needs root for the cache (its lock)
#       the first time; false, with the reason on stderr, when anything
#       failed.

fencing_python_client_venv() {
    local dest=$1 src=$FENCING_ROOT/clients/python sum cache wheels
    cache=${FENCING_CLIENT_PYTHON_CACHE:-$FENCING_CACHE/client-python}
    sum=$(cat /usr/bin/python3 "$src/requirements.txt" | sha256sum | cut -c1-16)
    wheels=$cache/$sum/wheels
    mkdir -p "$cache" && (
        flock 9
        [ -f "$wheels/.complete" ] && exit 0
        fencing_log "downloading clients/python/requirements.txt's wheels into $wheels"
        rm -rf "${cache:?}/$sum.tmp" "${cache:?}/$sum" && mkdir -p "$cache/$sum.tmp" &&
            /usr/bin/python3 -m venv "$cache/$sum.tmp/pip" &&
            "$cache/$sum.tmp/pip/bin/pip" download --quiet --disable-pip-version-check \
                --require-hashes --only-binary=:all: -r "$src/requirements.txt" \
                -d "$cache/$sum.tmp/wheels" >&2 &&
            rm -rf "$cache/$sum.tmp/pip" && touch "$cache/$sum.tmp/wheels/.complete" &&
            chmod -R a+rX "$cache/$sum.tmp" && mv "$cache/$sum.tmp" "$cache/$sum"
    ) 9>"$cache/pip.lock"
    [ -f "$wheels/.complete" ] || { echo "no wheels for clients/python/requirements.txt" >&2; return 1; }
    local pip=(env PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS= PIP_NO_INPUT=1
               "$dest/bin/pip" --disable-pip-version-check --quiet)
    if ! { rm -rf "$dest" && /usr/bin/python3 -m venv "$dest" &&
           "${pip[@]}" install --no-index --find-links "$wheels" --require-hashes \
               -r "$src/requirements.txt" >&2 &&
           mkdir -p "$dest/src" && cp -a "$src/." "$dest/src/" &&
           rm -rf "$dest/src/build" "$dest/src/dist" &&
           "${pip[@]}" wheel --no-index --no-deps --no-build-isolation -w "$dest/dist" "$dest/src" >&2 &&
           "${pip[@]}" install --no-index --find-links "$wheels" "$dest"/dist/fencing_client-*.whl >&2; }; then
        echo "building or installing clients/python into $dest failed" >&2
        return 1
    fi
    chmod -R a+rX "$dest"
}
