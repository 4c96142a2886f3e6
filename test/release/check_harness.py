#!/usr/bin/env python3
# test/release/check_harness.py [ROOT]: test/README.md is the one description
# of the harness, and docs/development.md's claims about the source hold.
#
#   - every suite, test/suites/NAME.sh, has its row in the table of suites
#     of test/README.md ("| `NAME` |"), and that table no other;
#   - every FENCING_* variable named in a file under test/ or .ci/ (the
#     harness, the demo, the benchmarks, the TAP and client tests) is named
#     in test/README.md, in backquotes;
#   - only test/lib/deps.sh changes the system (apt-get, dpkg, apt's
#     configuration, the install helpers) among the harness's shell files:
#     test/check.sh runs it before any suite starts;
#   - docs/development.md: no file of src/ tests PG_VERSION_NUM but
#     compat.h and the exceptions its sentence on version tests names, and
#     each of their version tests is about what that sentence names; the
#     source layout table names every C file of src/ and only files that
#     exist; the table of what differs between the server versions names
#     files that exist, and the functions it names are in those files.
#
# ROOT defaults to the tree this file is in.  Prints each problem and a
# count; exits 1 when there is any.
import glob, os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
problems = []


def read(rel):
    with open(os.path.join(root, rel), encoding='utf-8', errors='replace') as f:
        return f.read()


def table_after(text, header):
    """The rows of the Markdown table whose header line starts with header."""
    lines = text.split('\n')
    for i, line in enumerate(lines):
        if line.startswith(header):
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith('|'):
                    break
                rows.append([c.strip() for c in row.strip().strip('|').split('|')])
            return rows
    return None


def ticked(cell):
    return re.findall(r'`([^`]+)`', cell)


readme = read('test/README.md')
readme_ticked = set()
for line in readme.split('\n'):
    for span in re.findall(r'`([^`]+)`', line):
        readme_ticked.update(re.findall(r'FENCING_[A-Z0-9_]*[A-Z0-9]', span))

# 1. the suites
suites = sorted(os.path.basename(p)[:-3] for p in glob.glob(os.path.join(root, 'test', 'suites', '*.sh')))
suite_rows = table_after(readme, '| Suite |') or []
listed = {w for row in suite_rows for w in ticked(row[0])}
for s in suites:
    if s not in listed:
        problems.append(f'test/README.md: the table of suites ("| Suite |") has no row for {s} (test/suites/{s}.sh)')
for s in sorted(listed - set(suites)):
    problems.append(f'test/README.md: the table of suites lists {s}, which test/suites/ does not have')

# 2. the variables
named = {}
for top in ('test', '.ci'):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = [d for d in dirnames if d not in ('node_modules', 'tmp_check', 'results')]
        for fn in filenames:
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, root)
            if fn.endswith('.md'):
                continue
            try:
                with open(path, encoding='utf-8') as f:
                    text = f.read()
            except (UnicodeDecodeError, OSError):
                continue
            for v in re.findall(r'\bFENCING_[A-Z0-9_]*[A-Z0-9]\b', text):
                named.setdefault(v, rel)
for v in sorted(named):
    if v not in readme_ticked:
        problems.append(f'test/README.md: {v} is not listed (it is named in {named[v]})')

# 3. one step of a run changes the system: test/lib/deps.sh installs every
# package and downloads every source package before the first suite starts
# (and the package suite installs and purges its own package).  No other
# shell file of the harness runs apt-get or dpkg, writes apt's
# configuration, or installs through the helpers but fencing_need.
system_changers = re.compile(
    r'\b(apt-get|apt|dpkg|fencing_apt_install|fencing_install_missing|fencing_download_sources)\b(?!-)'
    r'|/etc/apt/')
# (and test/fresh-machine.sh, which undoes it, and refuses while a run is on)
allowed_here = {'test/lib/deps.sh', 'test/fresh-machine.sh'}
for top in ('test', '.ci'):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = [d for d in dirnames if d not in ('node_modules', 'tmp_check', 'results')]
        for fn in filenames:
            path = os.path.join(dirpath, fn)
            rel = os.path.relpath(path, root)
            if not (fn.endswith('.sh') or rel == '.ci/run') or rel in allowed_here:
                continue
            for i, line in enumerate(read(rel).split('\n')):
                # the command, not its comments and messages
                code = re.sub(r'"(\\.|[^"\\])*"|\'[^\']*\'', '""', line)
                code = re.sub(r'(^|\s)#.*', '', code)
                m = system_changers.search(code)
                if m and not re.search(r'dpkg-query|apt-cache', code[m.start():m.end() + 6]):
                    problems.append(f'{rel}:{i + 1}: changes the system ("{m.group(0)}") outside '
                                    f'test/lib/deps.sh, while other suites may run: name what it needs '
                                    f'in fencing_suite_packages and call fencing_need')

# 4. docs/development.md against src/
dev = read('docs/development.md')
paragraphs = re.split(r'\n\s*\n', dev)
claim = [p for p in paragraphs if 'is the only place that tests `PG_VERSION_NUM`' in p]
if not claim:
    problems.append('docs/development.md: the sentence on where PG_VERSION_NUM is tested is gone '
                    '(test/release/check_harness.py checks it: change both)')
    allowed, exceptions, subjects = set(), set(), set()
else:
    words = ticked(claim[0])
    allowed = {w for w in words if w.endswith('.h')}
    exceptions = {w for w in words if w.endswith('.c')}
    subjects = {w for w in words if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', w) and re.search(r'[A-Z_]', w)
                and w != 'PG_VERSION_NUM'}
version_test = re.compile(r'^\s*#\s*(if|elif|ifdef|ifndef)\b.*\b(PG_VERSION_NUM|PG_MAJORVERSION_NUM)\b')
for path in sorted(glob.glob(os.path.join(root, 'src', '*.[ch]'))):
    fn = os.path.basename(path)
    if fn in allowed:
        continue
    lines = read(os.path.join('src', fn)).split('\n')
    for i, line in enumerate(lines):
        if not version_test.match(line):
            continue
        if fn not in exceptions:
            problems.append(f'src/{fn}:{i + 1}: tests the server version outside '
                            f'{", ".join(sorted(allowed)) or "compat.h"} (docs/development.md): '
                            f'make it a named shim in src/compat.h')
            continue
        # the block, to its #else/#elif/#endif at the same depth
        depth, body = 0, []
        for nxt in lines[i + 1:]:
            if re.match(r'^\s*#\s*if', nxt):
                depth += 1
            elif re.match(r'^\s*#\s*endif', nxt):
                if depth == 0:
                    break
                depth -= 1
            elif re.match(r'^\s*#\s*(else|elif)', nxt) and depth == 0:
                break
            body.append(nxt)
        if not any(re.search(r'\b%s\b' % re.escape(w), '\n'.join(body)) for w in subjects):
            problems.append(f'src/{fn}:{i + 1}: a version test about something else than what '
                            f'docs/development.md allows it ({", ".join(sorted(subjects))})')

layers = table_after(dev, '| layer | files |')
if layers is None:
    problems.append('docs/development.md: the source layout table ("| layer | files |") is gone')
else:
    in_table = set()
    for row in layers:
        for w in ticked(row[1]):
            in_table.add(w)
            if not os.path.exists(os.path.join(root, 'src', w)):
                problems.append(f'docs/development.md: the source layout names {w}, which src/ does not have')
    for path in sorted(glob.glob(os.path.join(root, 'src', '*.c'))):
        fn = os.path.basename(path)
        if fn not in in_table:
            problems.append(f'docs/development.md: src/{fn} is in no layer of the source layout')

differs = table_after(dev, '| change | release | where |')
if differs is None:
    problems.append('docs/development.md: the table of what differs between the versions is gone')
else:
    for row in differs:
        files, names = [], []
        for w in ticked(row[2]):
            if '/' in w or re.search(r'\.(c|h|sql|sh|pl|out)$', w):
                hits = [w] if os.path.exists(os.path.join(root, w)) else \
                    [os.path.relpath(p, root) for p in glob.glob(os.path.join(root, '**', w), recursive=True)]
                if not hits:
                    problems.append(f'docs/development.md: {w} (what differs: "{row[0][:50]}") does not exist')
                files += hits
            else:
                names.append(w.rstrip('()'))
        text = '\n'.join(read(f) for f in files if os.path.isfile(os.path.join(root, f)))
        for n in names:
            if not re.search(r'\b%s\b' % re.escape(n), text):
                problems.append(f'docs/development.md: {n} is not in {", ".join(files)} '
                                f'(what differs: "{row[0][:50]}")')

for p in problems:
    print(p)
print(f'{len(suites)} suites, {len(named)} FENCING_* variables, '
      f'{len(glob.glob(os.path.join(root, "src", "*.[ch]")))} source files; {len(problems)} problems')
sys.exit(1 if problems else 0)
