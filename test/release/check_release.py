#!/usr/bin/env python3
# test/release/check_release.py [ROOT]: the release's description and
# archive, as TAP (the release suite, test/suites/release.sh, runs it).
#
#  1-5  META.json follows the PGXN Meta Spec and names the same version as
#       fencing.control and debian/changelog (check_meta.py), and the check
#       fails when any of the three differs, or the spec is broken, on a
#       copy broken on purpose;
#  6-9  `make dist` builds fencing-<version>.zip holding exactly the
#       committed tree (same paths, bytes and modes as HEAD): everything
#       that builds and tests the extension, nothing that .gitignore ignores;
#  10   every relative link of the Markdown a user reads names a file and
#       heading of the tree (check_links.py; and it catches a broken one);
#  11   the shell of test/ and .ci/ is shellcheck-clean (a SKIP when
#       shellcheck is missing and this does not run as root: the suite
#       installs it as root);
#  12-13 test/README.md lists every suite and FENCING_* variable, and
#       docs/development.md's claims about the source hold (check_harness.py;
#       and it catches each kind of gap on a copy broken on purpose).
#
# No server needed.  ROOT defaults to the tree this file is in (a git
# checkout: the archive is compared with HEAD).  Exits 1 when a check fails.
import hashlib, json, os, re, shutil, subprocess, sys, tempfile, zipfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', '..'))
for tool in ('git', 'make'):
    if not shutil.which(tool):
        print(f'1..0 # SKIP {tool} is not installed')
        sys.exit(0)

n = failed = 0


def tap(good, what, directive=''):
    global n, failed
    n += 1
    print(f'{"ok" if good else "not ok"} {n} - {what}{directive}', flush=True)
    if not good:
        failed += 1


def say(text, prefix=''):
    for line in text.rstrip('\n').split('\n') if text.strip() else []:
        print(f'# {prefix}{line}')


def run(cmd, cwd=None, stdin=None):
    """(status, stdout and stderr) of a command; its output as diagnostics."""
    p = subprocess.run(cmd, cwd=cwd, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def script(name, tree):
    return run([sys.executable, os.path.join(here, name), tree])


work = tempfile.mkdtemp(prefix='fencing-release.')
try:
    print('1..13')

    # 1. the committed description is consistent
    st, out = script('check_meta.py', root)
    say(out)
    tap(st == 0, "META.json follows PGXN Meta Spec 1.0.0 and its version agrees with "
        "fencing.control and debian/changelog")

    # A copy of the files the check reads, for breaking them on purpose.
    copy = os.path.join(work, 'copy')

    def fresh_copy():
        shutil.rmtree(copy, ignore_errors=True)
        os.makedirs(os.path.join(copy, 'debian'))
        for f in ('META.json', 'fencing.control', 'README.md'):
            shutil.copy2(os.path.join(root, f), copy)
        shutil.copytree(os.path.join(root, 'sql'), os.path.join(copy, 'sql'))
        shutil.copy2(os.path.join(root, 'debian', 'changelog'), os.path.join(copy, 'debian'))

    def edit(rel, change):
        p = os.path.join(copy, rel)
        with open(p, encoding='utf-8') as f:
            text = f.read()
        with open(p, 'w', encoding='utf-8') as f:
            f.write(change(text))

    def edit_meta(change):
        def json_change(text):
            m = json.loads(text)
            change(m)
            return json.dumps(m, indent=2)
        edit('META.json', json_change)

    def must_fail(what, *patterns):
        st, out = script('check_meta.py', copy)
        say(out)
        tap(st != 0 and all(p in out for p in patterns), what)

    # 2-4. each of the three versions moved alone is caught
    fresh_copy()

    def v980(m):
        m['version'] = m['provides']['fencing']['version'] = '9.8.0'
    edit_meta(v980)
    must_fail("the check fails when META.json's version differs (9.8.0)",
              'versions differ: META.json version 9.8.0')
    fresh_copy()
    edit('debian/changelog', lambda t: re.sub(r'\([^)]*\)', '(9.8-1)', t, count=1))
    must_fail("the check fails when debian/changelog's version differs (9.8-1)",
              'versions differ: debian/changelog 9.8-1')
    fresh_copy()
    edit('fencing.control', lambda t: re.sub(r'(?m)^default_version = .*$', "default_version = '9.8'", t))
    must_fail("the check fails when fencing.control's default_version differs (9.8)",
              'versions differ: META.json version')

    # 5. and a META.json that breaks the spec
    fresh_copy()

    def broken(m):
        m['license'] = 'GPL'
        m['provides']['fencing']['version'] = '1.1'
        del m['abstract']
        m['provides']['fencing']['file'] = 'fencing.control'
    edit_meta(broken)
    must_fail('the check fails on a META.json that breaks the spec (license, version form, a required '
              'key) or pgxn load (a provides file that is not SQL)',
              'license: "GPL"', 'is not a semantic version', '"abstract" is missing', 'is not an .sql file')

    # 6. make dist
    with open(os.path.join(root, 'META.json'), encoding='utf-8') as f:
        version = json.load(f)['version']
    zpath = os.path.join(work, f'fencing-{version}.zip')
    st, out = run(['make', '-s', '-C', root, 'dist', f'DISTDIR={work}'])
    say(out)
    tap(st == 0 and os.path.isfile(zpath) and os.path.getsize(zpath) > 0
        and out.rstrip('\n').split('\n')[-1] == zpath, f'make dist builds fencing-{version}.zip')

    # 7. the archive is the committed tree: same paths, same bytes, same modes
    prefix = f'fencing-{version}/'
    want = {}
    _, tree = run(['git', '-C', root, 'ls-tree', '-r', 'HEAD'])
    for line in tree.splitlines():
        meta, path = line.split('\t', 1)
        mode, _, oid = meta.split()
        want[path] = (mode, oid)
    got, out = {}, []
    if os.path.exists(zpath):
        with zipfile.ZipFile(zpath) as z:
            for info in z.infolist():
                if info.is_dir():
                    continue
                if not info.filename.startswith(prefix):
                    out.append(f'outside {prefix}: {info.filename}')
                    continue
                data = z.read(info)
                oid = hashlib.sha1(b'blob %d\0' % len(data) + data).hexdigest()
                mode = '100755' if (info.external_attr >> 16) & 0o111 else '100644'
                got[info.filename[len(prefix):]] = (mode, oid)
    for p in sorted(set(want) - set(got)):
        out.append(f'missing from the archive: {p}')
    for p in sorted(set(got) - set(want)):
        out.append(f'not in the committed tree: {p}')
    for p in sorted(set(want) & set(got)):
        if want[p][1] != got[p][1]:
            out.append(f'content differs from HEAD: {p}')
        elif want[p][0] != got[p][0]:
            out.append(f'mode differs from HEAD ({want[p][0]} vs {got[p][0]}): {p}')
    bad = len(out)
    say('\n'.join(out + [f'{len(got)} files under {prefix}, {len(want)} in HEAD']))
    tap(got and bad == 0, 'the archive holds exactly the committed tree (HEAD): same files, bytes and modes')

    # 8. nothing generated: no path of the archive is one that .gitignore
    # ignores (and the rules do catch generated files, or this would pass
    # vacuously)
    paths = sorted(got)
    _, ignored = run(['git', '-C', root, 'check-ignore', '--no-index', '--stdin'], stdin='\n'.join(paths) + '\n')
    say(ignored, 'generated: ')
    _, probe = run(['git', '-C', root, 'check-ignore', '--no-index', '--stdin'],
                   stdin='src/fencing.o\nfencing.so\nresults/x.out\nfencing-1.1.0.zip\n')
    caught = len(probe.split())
    if caught != 4:
        say(f'git check-ignore found {caught} of 4 generated probe paths')
    tap(paths and not ignored.strip() and caught == 4,
        'nothing generated in the archive (no path that .gitignore ignores: objects, results, archives)')

    # 9. everything that builds and tests it: the Makefile's inputs are there
    def make_print(target, expr=None):
        cmd = ['make', '-s', '-C', root]
        if expr:
            cmd.append(f'--eval={target}: ; @echo $({expr})')
        return run(cmd + [target])[1].split()
    need = ['Makefile', 'fencing.control', 'META.json', 'README.md', 'debian/control', 'debian/rules',
            'debian/tests/control']
    need += [o[:-2] + '.c' for o in make_print('print-objs', 'OBJS')]
    need += make_print('print-data', 'DATA')
    for t in make_print('print-regress'):
        need += [f'sql/{t}.sql', f'expected/{t}.out']
    for t in make_print('print-isolation'):
        need += [f'test/isolation/specs/{t}.spec', f'test/isolation/expected/{t}.out']
    missing = [f for f in need if f not in got]
    say('\n'.join(missing), 'missing: ')
    tap(not missing, 'the archive holds what builds and tests it (sources of OBJS, DATA, REGRESS and '
        'ISOLATION files, debian/)')

    # 10. every relative link of README.md, CHANGELOG.md, docs/ and
    # monitoring/ names a file of the tree and a heading of it (and the
    # check does catch a missing file and a missing heading)
    st, out = script('check_links.py', root)
    say(out)
    links = os.path.join(work, 'links')
    shutil.copytree(os.path.join(root, 'docs'), os.path.join(links, 'docs'))
    shutil.copy2(os.path.join(root, 'README.md'), links)
    with open(os.path.join(links, 'README.md'), 'a', encoding='utf-8') as f:
        f.write('\n[gone](docs/no-such-page.md) [moved](docs/guard.md#no-such-heading)\n')
    pst, probe = script('check_links.py', links)
    caught = 'no file docs/no-such-page.md' in probe and 'no heading #no-such-heading in docs/guard.md' in probe
    if pst == 0 or not caught:
        say(probe, 'probe: ')
    tap(st == 0 and pst != 0 and caught, 'every relative link of the Markdown a user reads names a file '
        'and heading of the tree (test/release/check_links.py)')

    # 11. the shell of test/ (harness, demo, benchmarks) and .ci/run: no
    # warning of shellcheck at its default severity, with the files they
    # source followed (.shellcheckrc); a warning that is wrong is disabled
    # where it occurs, with the reason
    what = 'the shell of test/ and .ci/ is shellcheck-clean'
    if shutil.which('shellcheck'):
        st, files = run(['git', '-C', root, 'ls-files', '--', 'test', '.ci'])
        if st != 0:
            files = '\n'.join(os.path.relpath(os.path.join(d, f), root)
                              for top in ('test', '.ci') for d, ds, fs in os.walk(os.path.join(root, top))
                              if 'node_modules' not in d for f in fs)
        shfiles = []
        for f in files.splitlines():
            if f.endswith('.sh'):
                shfiles.append(f)
                continue
            try:
                with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                    first = fh.readline()
            except OSError:
                continue
            if re.match(r'^#!.*[/ ](ba)?sh\s*$', first):
                shfiles.append(f)
        st, out = run(['shellcheck', '-f', 'gcc', '--'] + shfiles, cwd=root)
        say(out)
        ver = re.search(r'^version: (\S+)', run(['shellcheck', '--version'])[1], re.M)
        tap(st == 0 and len(shfiles) > 20,
            f'{what} ({len(shfiles)} files, shellcheck {ver.group(1) if ver else "?"})')
    elif os.geteuid() == 0:
        tap(False, f'{what}: shellcheck could not be installed')
    else:
        tap(True, what, ' # SKIP shellcheck is not installed (apt-get install shellcheck, as root)')

    # 12. test/README.md is the one description of the harness: it lists
    # every suite and every FENCING_* variable of test/ and .ci/; and what
    # docs/development.md says of the source holds
    st, out = script('check_harness.py', root)
    say(out)
    tap(st == 0, "test/README.md lists every suite and FENCING_* variable; docs/development.md's claims "
        "about the source hold (test/release/check_harness.py)")

    # 13. ... and the check catches each kind of gap, on a copy broken on
    # purpose (or it would pass vacuously)
    h = os.path.join(work, 'harness')
    for d in ('test', '.ci', 'src'):
        shutil.copytree(os.path.join(root, d), os.path.join(h, d), symlinks=True,
                        ignore=shutil.ignore_patterns('node_modules', 'tmp_check*'))
    os.makedirs(os.path.join(h, 'docs'))
    shutil.copy2(os.path.join(root, 'docs', 'development.md'), os.path.join(h, 'docs'))
    copy = h
    edit('test/README.md', lambda t: re.sub(r'(?m)^\| `locksvc` \|.*\n', '', t)
         .replace('FENCING_UPDATE_WAIT', 'NOT_UPDATE_WAIT'))
    edit('src/fence.c', lambda t: t + '#if PG_VERSION_NUM >= 170000\n#endif\n')
    edit('docs/development.md', lambda t: t.replace('`idempotency.c`, ', ''))
    pst, probe = script('check_harness.py', h)
    gaps = [w for w in (r'has no row for locksvc', r'FENCING_UPDATE_WAIT is not listed',
                        r'src/fence\.c:[0-9]*: tests the server version outside', r'src/idempotency\.c is in no layer')
            if not re.search(w, probe)]
    say('\n'.join(gaps), 'not caught: ')
    if pst == 0 or gaps:
        say(probe, 'probe: ')
    tap(pst != 0 and not gaps, 'the check fails on a suite, a variable and a C file left out, and on a '
        'version test outside compat.h')
finally:
    shutil.rmtree(work, ignore_errors=True)
sys.exit(1 if failed else 0)
