#!/usr/bin/env python3
"""test/release/check_meta.py: is the release described consistently?

    python3 test/release/check_meta.py [ROOT]

Checks, in the tree at ROOT (default: the repository this file is in):

  1. META.json follows the PGXN Meta Spec 1.0.0: the required keys, and the
     form of every key it has (names, semantic versions, licenses, provides,
     prereqs, resources, tags, release_status, meta-spec), no unknown keys;
  2. the three versions of the release agree: fencing.control's
     default_version (1.1), META.json's version and provides.fencing.version
     (the same as a semantic version, 1.1.0: PGXN requires three numbers),
     and the upstream part of debian/changelog's newest version (1.1-1);
  3. the files named exist: provides' file (an .sql file, or `pgxn load`
     skips the extension) and docfile, and an install or update script that
     ends at default_version.

Prints one line per problem and exits 1, or prints the versions found and
exits 0.  Only the standard library: it runs wherever python3 does.
"""

import json
import os
import re
import sys

SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$")
# a prerequisite's version range: "0", a version, or comma-separated
# comparisons such as ">= 1.2.0, != 1.5.0, < 2.0.0"
RANGE_PART = re.compile(r"^(?:(?:[=!]=|[<>]=?)\s*)?(.+)$")
TERM = re.compile(r"^[^/\\\s\x00-\x1f\x7f]{2,}$")
TAG = re.compile(r"^[^/\\\x00-\x1f\x7f]{2,255}$")
EMAIL = re.compile(r"^[^@\s<>]+@[^@\s<>]+\.[^@\s<>]+$")
URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:\S+$")
LICENSES = {
    "agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
    "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
    "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
    "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
    "restricted", "unrestricted", "unknown",
}
TOP_REQUIRED = ["name", "version", "abstract", "maintainer", "license",
                "provides", "meta-spec"]
TOP_OPTIONAL = ["description", "generated_by", "tags", "no_index", "prereqs",
                "release_status", "resources"]
PHASES = ["configure", "build", "test", "runtime", "develop"]
RELATIONS = ["requires", "recommends", "suggests", "conflicts"]


def custom(key):
    """Keys starting with x_ or X_ are free for anyone (the spec's rule)."""
    return re.match(r"^[xX]_.", key) is not None


def unknown_keys(obj, allowed, where, problems):
    for key in obj:
        if key not in allowed and not custom(key):
            problems.append(f"{where}: unknown key \"{key}\"")


def nonempty_string(value):
    return isinstance(value, str) and len(value) > 0


def check_range(value, where, problems):
    if value == 0 or value == "0":
        return
    if not isinstance(value, str):
        problems.append(f"{where}: a version range is a string or 0, not {value!r}")
        return
    for part in value.split(","):
        m = RANGE_PART.match(part.strip())
        if not m or not (SEMVER.match(m.group(1)) or m.group(1) == "0"):
            problems.append(f"{where}: \"{value}\" is not a version range")
            return


def check_meta(meta, root, problems):
    """PGXN Meta Spec 1.0.0, key by key."""
    if not isinstance(meta, dict):
        problems.append("META.json: the top level is not an object")
        return
    for key in TOP_REQUIRED:
        if key not in meta:
            problems.append(f"META.json: the required key \"{key}\" is missing")
    unknown_keys(meta, TOP_REQUIRED + TOP_OPTIONAL, "META.json", problems)

    if "name" in meta and not (isinstance(meta["name"], str) and TERM.match(meta["name"])):
        problems.append("META.json name: not a term (2+ characters, no slash, backslash, space)")
    if "version" in meta and not (isinstance(meta["version"], str) and SEMVER.match(meta["version"])):
        problems.append(f"META.json version: {meta['version']!r} is not a semantic version (x.y.z)")
    for key in ("abstract", "description", "generated_by"):
        if key in meta and not nonempty_string(meta[key]):
            problems.append(f"META.json {key}: not a non-empty string")

    maint = meta.get("maintainer")
    if maint is not None:
        names = maint if isinstance(maint, list) else [maint]
        if not names or not all(nonempty_string(m) for m in names):
            problems.append("META.json maintainer: a non-empty string or list of strings")

    lic = meta.get("license")
    if lic is not None:
        if isinstance(lic, str):
            if lic not in LICENSES:
                problems.append(f"META.json license: \"{lic}\" is not a license the spec names")
        elif isinstance(lic, list):
            if not lic or len(set(map(str, lic))) != len(lic) or not all(x in LICENSES for x in lic):
                problems.append("META.json license: a list of distinct licenses the spec names")
        elif isinstance(lic, dict):
            if not lic or not all(isinstance(v, str) and URI.match(v) for v in lic.values()):
                problems.append("META.json license: an object mapping names to license URIs")
        else:
            problems.append("META.json license: a string, list or object")

    prov = meta.get("provides")
    if prov is not None:
        if not isinstance(prov, dict) or not prov:
            problems.append("META.json provides: an object naming at least one extension")
        else:
            for ext, spec in prov.items():
                where = f"META.json provides.{ext}"
                if not TERM.match(ext):
                    problems.append(f"{where}: the extension name is not a term")
                if not isinstance(spec, dict):
                    problems.append(f"{where}: not an object")
                    continue
                unknown_keys(spec, ["file", "version", "abstract", "docfile"], where, problems)
                for key in ("file", "version"):
                    if key not in spec:
                        problems.append(f"{where}: the required key \"{key}\" is missing")
                if "version" in spec and not (isinstance(spec["version"], str) and SEMVER.match(spec["version"])):
                    problems.append(f"{where}.version: {spec['version']!r} is not a semantic version")
                if "abstract" in spec and not nonempty_string(spec["abstract"]):
                    problems.append(f"{where}.abstract: not a non-empty string")
                for key in ("file", "docfile"):
                    path = spec.get(key)
                    if path is None:
                        continue
                    if not isinstance(path, str) or path.startswith("/") or "\\" in path or ".." in path.split("/"):
                        problems.append(f"{where}.{key}: {path!r} is not a relative Unix path")
                    elif not os.path.isfile(os.path.join(root, path)):
                        problems.append(f"{where}.{key}: {path} does not exist in the tree")
                # the PGXN client's rule: `pgxn load` takes an extension
                # whose file does not end in .sql for something else, and
                # skips it
                if isinstance(spec.get("file"), str) and not spec["file"].endswith(".sql"):
                    problems.append(f"{where}.file: {spec['file']} is not an .sql file "
                                    "(pgxn load would skip the extension)")

    ms = meta.get("meta-spec")
    if ms is not None:
        if not isinstance(ms, dict) or "version" not in ms:
            problems.append("META.json meta-spec: an object with a version")
        else:
            unknown_keys(ms, ["version", "url"], "META.json meta-spec", problems)
            if not re.match(r"^1\.0\.\d+$", str(ms["version"])):
                problems.append(f"META.json meta-spec.version: {ms['version']!r} is not 1.0.x")
            if "url" in ms and ms["url"] not in ("https://pgxn.org/meta/spec.txt", "http://pgxn.org/meta/spec.txt"):
                problems.append(f"META.json meta-spec.url: {ms['url']!r} is not the spec's address")

    pre = meta.get("prereqs")
    if pre is not None:
        if not isinstance(pre, dict) or not any(p in pre for p in PHASES):
            problems.append("META.json prereqs: an object with at least one phase")
        else:
            unknown_keys(pre, PHASES, "META.json prereqs", problems)
            for phase in PHASES:
                rels = pre.get(phase)
                if rels is None:
                    continue
                where = f"META.json prereqs.{phase}"
                if not isinstance(rels, dict) or not any(r in rels for r in RELATIONS):
                    problems.append(f"{where}: an object with requires, recommends, suggests or conflicts")
                    continue
                unknown_keys(rels, RELATIONS, where, problems)
                for rel in RELATIONS:
                    deps = rels.get(rel)
                    if deps is None:
                        continue
                    if not isinstance(deps, dict) or not deps:
                        problems.append(f"{where}.{rel}: an object naming at least one prerequisite")
                        continue
                    for dep, rng in deps.items():
                        if not TERM.match(dep):
                            problems.append(f"{where}.{rel}: {dep!r} is not a term")
                        check_range(rng, f"{where}.{rel}.{dep}", problems)

    res = meta.get("resources")
    if res is not None:
        if not isinstance(res, dict) or not any(k in res for k in ("homepage", "bugtracker", "repository")):
            problems.append("META.json resources: an object with homepage, bugtracker or repository")
        else:
            unknown_keys(res, ["homepage", "bugtracker", "repository"], "META.json resources", problems)
            if "homepage" in res and not (isinstance(res["homepage"], str) and URI.match(res["homepage"])):
                problems.append("META.json resources.homepage: not a URI")
            bt = res.get("bugtracker")
            if bt is not None:
                if not isinstance(bt, dict) or not ("web" in bt or "mailto" in bt):
                    problems.append("META.json resources.bugtracker: an object with web or mailto")
                else:
                    unknown_keys(bt, ["web", "mailto"], "META.json resources.bugtracker", problems)
                    if "web" in bt and not (isinstance(bt["web"], str) and URI.match(bt["web"])):
                        problems.append("META.json resources.bugtracker.web: not a URI")
                    if "mailto" in bt and not (isinstance(bt["mailto"], str) and EMAIL.match(bt["mailto"])):
                        problems.append("META.json resources.bugtracker.mailto: not an e-mail address")
            repo = res.get("repository")
            if repo is not None:
                if not isinstance(repo, dict) or not ("url" in repo or "web" in repo):
                    problems.append("META.json resources.repository: an object with url or web")
                else:
                    unknown_keys(repo, ["url", "web", "type"], "META.json resources.repository", problems)

    tags = meta.get("tags")
    if tags is not None:
        if (not isinstance(tags, list) or not tags or len(set(map(str, tags))) != len(tags)
                or not all(isinstance(t, str) and TAG.match(t) for t in tags)):
            problems.append("META.json tags: a list of distinct tags (2-255 characters, no slash or backslash)")

    if "release_status" in meta and meta["release_status"] not in ("stable", "testing", "unstable"):
        problems.append(f"META.json release_status: {meta['release_status']!r} is not stable, testing or unstable")

    ni = meta.get("no_index")
    if ni is not None:
        if not isinstance(ni, dict):
            problems.append("META.json no_index: an object with file and directory lists")
        else:
            unknown_keys(ni, ["file", "directory"], "META.json no_index", problems)


def control_field(root, field):
    """A field of fencing.control, unquoted."""
    with open(os.path.join(root, "fencing.control"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^\s*" + field + r"\s*=\s*'([^']*)'", line)
            if m:
                return m.group(1)
    return None


def changelog_version(root):
    """The newest version in debian/changelog: (full, upstream part)."""
    with open(os.path.join(root, "debian", "changelog"), encoding="utf-8") as f:
        first = f.readline()
    m = re.match(r"^(\S+) \(([^)\s]+)\) ", first)
    if not m:
        return None, None, None
    full = m.group(2)
    upstream = full.split(":", 1)[-1]          # drop the epoch
    if "-" in upstream:
        upstream = upstream.rsplit("-", 1)[0]  # drop the Debian revision
    return m.group(1), full, upstream


def as_semver(version):
    """A PostgreSQL extension version (1.1) as PGXN's x.y.z (1.1.0)."""
    parts = version.split(".")
    if not all(p.isdigit() for p in parts) or not 1 <= len(parts) <= 3:
        return None
    return ".".join([str(int(p)) for p in parts] + ["0"] * (3 - len(parts)))


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    problems = []

    try:
        with open(os.path.join(root, "META.json"), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        print(f"META.json: cannot be read as JSON: {e}")
        return 1
    check_meta(meta, root, problems)

    control = control_field(root, "default_version")
    if control is None:
        problems.append("fencing.control: no default_version")
    source, deb_full, deb_upstream = changelog_version(root)
    if deb_full is None:
        problems.append("debian/changelog: the first line is not \"source (version) ...\"")

    ext = "fencing"
    meta_version = meta.get("version") if isinstance(meta, dict) else None
    prov = meta.get("provides", {}) if isinstance(meta, dict) else {}
    prov_version = prov.get(ext, {}).get("version") if isinstance(prov, dict) and isinstance(prov.get(ext), dict) else None
    if isinstance(prov, dict) and ext not in prov:
        problems.append(f"META.json provides: the extension \"{ext}\" is missing")

    if control is not None:
        want = as_semver(control)
        if want is None:
            problems.append(f"fencing.control default_version {control!r} is not numeric (x.y or x.y.z)")
        else:
            if meta_version != want:
                problems.append(f"versions differ: META.json version {meta_version} is not fencing.control's "
                                f"default_version {control} (as x.y.z: {want})")
            if prov_version is not None and prov_version != want:
                problems.append(f"versions differ: META.json provides.{ext}.version {prov_version} is not "
                                f"fencing.control's default_version {control} (as x.y.z: {want})")
        if deb_upstream is not None and deb_upstream != control:
            problems.append(f"versions differ: debian/changelog {deb_full} (upstream {deb_upstream}) is not "
                            f"fencing.control's default_version {control}")
        sql = os.path.join(root, "sql")
        scripts = [f for f in (os.listdir(sql) if os.path.isdir(sql) else [])
                   if re.match(r"^" + ext + r"--(?:.+--)?" + re.escape(control) + r"\.sql$", f)]
        if not scripts:
            problems.append(f"sql/: no install or update script ends at default_version {control}")

    if problems:
        for p in problems:
            print(p)
        return 1
    print(f"fencing.control {control}, META.json {meta_version} (provides {ext} {prov_version}), "
          f"debian/changelog {source} {deb_full}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
