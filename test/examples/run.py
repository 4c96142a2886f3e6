#!/usr/bin/env python3
"""Run every fenced code block of README.md and docs/ (docs/*.md, then
the pages of its folders, such as docs/recipes/) as written.

Used by test/suites/examples.sh, which starts the services the blocks
need and sets their environment; it can run alone against any server
that preloads fencing (PGHOST, PGPORT; user postgres):

    python3 test/examples/run.py --root . [--work DIR] [PAGE...]

Each page gets a fresh database (ex_<page>).  Its blocks run in the order
of the page, each as the reader would run it: ```sql with psql (a session
of its own per block, VERBOSITY verbose), ```sh/```bash with bash -e,
```python with Debian's python3, ```go/```java/```javascript built and
run as programs; then the whole page runs again in the same database, and
every block must do again what it did the first time (retry-safety).
Each block gets one TAP line, "page:line lang: first line".

What a block should do is said by HTML comments just before it:

    <!-- example: expect SF001 SF002 -->   the errors (SQLSTATEs) its
                                           statements raise, in order;
                                           SF001/stale_token also checks
                                           the reason (constraint_name)
    <!-- example: file pay.py -->          saved in the page's directory
                                           under that name, for a later
                                           block to run; not run itself
    <!-- example: args "$EXAMPLE_DSN" r-1 -->  a program's arguments
    <!-- example: exit 3 -->               its exit status (default 0)
    <!-- example: prints committed -->     text its output must contain
    <!-- example: skip why -->             not run, for that reason
    <!-- example: once -->                 run in the first pass only (an
                                           install, which refuses to run
                                           twice); its result counts for both

A page that installs the edition for managed PostgreSQL (managed/) says
so once, anywhere in it:

    <!-- examples: managed pgtle -->       (or: managed script)

Its blocks run on the server the caller names in EXAMPLE_MANAGED_PORT
(EXAMPLE_MANAGED_HOST; fencing not preloaded, pg_tle preloaded when
EXAMPLE_MANAGED_PGTLE=1), as the role example_admin, made as the services
make the role they give a user: not a superuser, the owner of the page's
database, and for pgtle a member of pgtle_admin with pg_tle created in the
database (by the superuser, as the service's admin role may); the blocks
install the edition themselves (managed/*.sql, copied into the page's
directory) and DATABASE_URL is that role's URL.  Without that server
(or pg_tle, for pgtle) the page's blocks are skipped, saying why.

A block without `expect` must raise no error at all.  ```text blocks are
output, not code.  test/examples/skips lists blocks of pages this harness
may not annotate (page, the block's first line, the reason).

The environment of every block: PGHOST PGPORT PGUSER PGDATABASE (the
page's database), EXAMPLE_DSN (the same as a libpq keyword string),
EXAMPLE_URL (as a URL), EXAMPLE_JDBC_URL, EXAMPLE_TOKEN (a new token
0:N for each run of a block, higher than every earlier one), and what the
caller passes on (REDIS_URL, ETCDCTL_ENDPOINTS, ETCD_HOST, ETCD_PORT,
ZK_HOSTS, NODE_PATH, ...).
"""
import argparse
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

FENCE_OPEN = re.compile(r'^(\s*)(`{3,})([A-Za-z0-9_+-]*)\s*$')
ANNOTATION = re.compile(r'^\s*<!--\s*example:\s*(.*?)\s*-->\s*$')
MANAGED_PAGE = re.compile(r'^\s*<!--\s*examples:\s*managed\s+(pgtle|script)\s*-->\s*$', re.M)
MANAGED_ROLE = 'example_admin'
OUTPUT_LANGS = {'text', 'console', 'output'}
RUN_LANGS = {'sql', 'sh', 'bash', 'python', 'go', 'java', 'javascript'}
PSQL_ERROR = re.compile(r'^psql:.*?:\d+: (ERROR|FATAL|PANIC):\s+([0-9A-Z]{5}): (.*)$')
PSQL_QUIET = re.compile(r'^psql:.*?:\d+: (NOTICE|WARNING|INFO|DEBUG|LOG):')
PSQL_OTHER = re.compile(r'^psql:.*?:\d+: (.*)$')
BLOCK_TIMEOUT = 60
# shell commands that change the machine or run the test harness itself: a
# block with one of them must say why it is skipped, it is never run here
UNSAFE = re.compile(r'(^|[\s;&|(])(sudo|apt-get|apt|dpkg|dpkg-buildpackage|pgxn|pg_conftool|'
                    r'pg_ctlcluster|pg_createcluster|systemctl|make)(\s|$)|test/(check|demo)\.sh|'
                    r'test/bench/', re.M)


class Block:
    def __init__(self, page, line, lang, text):
        self.page, self.line, self.lang, self.text = page, line, lang, text
        self.expect = []        # [(sqlstate, reason or None)]
        self.file = None
        self.args = ''
        self.exit = 0
        self.prints = []
        self.skip = None
        self.once = False
        self.problems = []      # bad annotations

    @property
    def name(self):
        first = next((l.strip() for l in self.text.splitlines() if l.strip()), '')
        if len(first) > 60:
            first = first[:57] + '...'
        return f'{self.page}:{self.line} {self.lang}: {first}'


def parse_page(root, page, skips):
    lines = open(os.path.join(root, page), encoding='utf-8').read().split('\n')
    blocks = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, lang = len(m.group(1)), m.group(2), m.group(3).lower()
        start = i
        close = re.compile(r'^\s*`{%d,}\s*$' % len(ticks))
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = []
        for l in lines[i + 1:j]:
            k = 0
            while k < indent and k < len(l) and l[k] == ' ':
                k += 1
            body.append(l[k:])
        b = Block(page, start + 1, lang or '(none)', '\n'.join(body) + '\n')
        # the annotations: comment lines just before the fence
        k = start - 1
        while k >= 0 and lines[k].strip() == '':
            k -= 1
        notes = []
        while k >= 0 and ANNOTATION.match(lines[k]):
            notes.insert(0, ANNOTATION.match(lines[k]).group(1))
            k -= 1
        for note in notes:
            word, _, rest = note.partition(' ')
            rest = rest.strip()
            if word == 'skip' and rest:
                b.skip = rest
            elif word == 'expect' and rest:
                for code in rest.split():
                    state, _, reason = code.partition('/')
                    b.expect.append((state, reason or None))
            elif word == 'file' and rest:
                b.file = rest
            elif word == 'args':
                b.args = rest
            elif word == 'exit' and rest.isdigit():
                b.exit = int(rest)
            elif word == 'prints' and rest:
                b.prints.append(rest)
            elif word == 'once' and not rest:
                b.once = True
            else:
                b.problems.append(f'unknown annotation "example: {note}"')
        first = next((l.strip() for l in body if l.strip()), '')
        for spage, sfirst, reason in skips:
            if spage == page and first == sfirst and not b.skip:
                b.skip = reason
        blocks.append(b)
        i = j + 1
    return blocks


def load_skips(path):
    skips = []
    if os.path.exists(path):
        for l in open(path, encoding='utf-8'):
            if l.strip() and not l.startswith('#'):
                page, first, reason = l.rstrip('\n').split('\t')
                skips.append((page, first.strip(), reason))
    return skips


class Runner:
    def __init__(self, args):
        self.root = os.path.abspath(args.root)
        self.work = os.path.abspath(args.work)
        self.psql = args.psql
        self.n = args.first - 1
        self.token = 1000
        self.ran = self.skipped = self.output = 0
        self.failed = 0
        self.skip_lines = []
        self.cache = args.cache
        self.count_file = args.count_file
        os.makedirs(self.work, exist_ok=True)
        os.makedirs(self.cache, exist_ok=True)

    # ---- TAP
    def tap(self, ok, name, diag=()):
        self.n += 1
        print(f'{"ok" if ok else "not ok"} {self.n} - {name}', flush=True)
        if self.count_file:
            with open(self.count_file, 'w') as f:
                f.write(f'{self.n}\n')
        if not ok:
            self.failed += 1
            for d in diag:
                for l in str(d).rstrip('\n').split('\n')[-40:]:
                    print(f'#   {l}', flush=True)

    def comment(self, text):
        print(f'# {text}', flush=True)

    # ---- environment
    def server(self, managed=False):
        """host, port and user of the blocks: the main server as postgres,
        or (a managed page) the managed server as MANAGED_ROLE"""
        if managed:
            return (os.environ.get('EXAMPLE_MANAGED_HOST', '127.0.0.1'),
                    os.environ['EXAMPLE_MANAGED_PORT'], MANAGED_ROLE)
        return os.environ.get('PGHOST', '127.0.0.1'), os.environ.get('PGPORT', '5432'), 'postgres'

    def env(self, db, managed=False):
        e = dict(os.environ)
        host, port, user = self.server(managed)
        self.token += 1
        # URLs need a TCP host: the main cluster also listens on 127.0.0.1
        e.update(PGHOST=host, PGPORT=port, PGUSER=user, PGDATABASE=db,
                 EXAMPLE_DSN=f'host={host} port={port} user={user} dbname={db}',
                 EXAMPLE_URL=f'postgres://{user}@127.0.0.1:{port}/{db}?sslmode=disable',
                 EXAMPLE_JDBC_URL=f'jdbc:postgresql://127.0.0.1:{port}/{db}?user={user}',
                 EXAMPLE_TOKEN=f'0:{self.token}',
                 PYTHONDONTWRITEBYTECODE='1')
        if managed:
            e['DATABASE_URL'] = e['EXAMPLE_URL']
        return e

    def admin(self, sql, managed=False, db='postgres'):
        host, port, _ = self.server(managed)
        return subprocess.run([self.psql, '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', db,
                               '-h', host, '-p', port, '-U', 'postgres', '-c', sql],
                              capture_output=True, text=True, timeout=60)

    def managed_db(self, db, route):
        """the page's database on the managed server, as the service gives
        it: owned by MANAGED_ROLE, not a superuser; for pgtle, pg_tle
        created and pgtle_admin granted.  [] or the errors."""
        role = MANAGED_ROLE
        steps = [('postgres', f'DROP DATABASE IF EXISTS {db} WITH (FORCE)'),
                 ('postgres', f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{role}') "
                              f"THEN CREATE ROLE {role} LOGIN NOSUPERUSER; END IF; END $$"),
                 ('postgres', f'CREATE DATABASE {db} OWNER {role}'),
                 ('postgres', f'GRANT CREATE ON DATABASE {db} TO {role}')]
        if route == 'pgtle':
            steps += [(db, 'CREATE EXTENSION pg_tle'), (db, f'GRANT pgtle_admin TO {role}')]
        for where, sql in steps:
            r = self.admin(sql, True, where)
            if r.returncode != 0:
                return [sql, r.stderr]
        return []

    # ---- one block, one pass: (ok, what it did, diagnostics)
    def run_block(self, b, pagedir, db, managed=False):
        env = self.env(db, managed)
        stem = f'{b.line}'
        try:
            if b.file:
                path = os.path.join(pagedir, b.file)
                with open(path, 'w') as f:
                    f.write(b.text)
                if b.lang == 'python':
                    r = subprocess.run(['/usr/bin/python3', '-m', 'py_compile', path],
                                       capture_output=True, text=True, env=env)
                    if r.returncode != 0:
                        return False, 'does not compile', [r.stderr]
                return True, f'saved as {b.file}', []
            if b.lang == 'sql':
                return self.run_sql(b, pagedir, env, stem)
            if b.lang in ('sh', 'bash'):
                if UNSAFE.search(b.text):
                    return False, ('changes the machine or runs the test harness: never run here'
                                   ' (annotate it: <!-- example: skip why -->)'), []
                path = os.path.join(pagedir, f'block-{stem}.sh')
                open(path, 'w').write(b.text)
                return self.run_program(b, ['bash', '-e', path], pagedir, env)
            if b.lang == 'python':
                path = os.path.join(pagedir, f'block-{stem}.py')
                open(path, 'w').write(b.text)
                return self.run_program(b, ['/usr/bin/python3', path], pagedir, env)
            if b.lang == 'javascript':
                path = os.path.join(pagedir, f'block-{stem}.js')
                open(path, 'w').write(b.text)
                return self.run_program(b, ['node', path], pagedir, env)
            if b.lang == 'go':
                exe, diag = self.build_go(b)
                if not exe:
                    return False, 'does not build', diag
                return self.run_program(b, [exe], pagedir, env)
            if b.lang == 'java':
                cmd, diag = self.build_java(b, pagedir, stem)
                if not cmd:
                    return False, 'does not compile', diag
                return self.run_program(b, cmd, pagedir, env)
        except subprocess.TimeoutExpired:
            return False, f'still running after {BLOCK_TIMEOUT} s', []
        except Exception as e:      # a fault of this harness: that block fails, the rest runs
            import traceback
            return False, f'the harness failed: {e!r}', [traceback.format_exc()]
        return False, f'no way to run a ```{b.lang} block', []

    def run_sql(self, b, pagedir, env, stem):
        path = os.path.join(pagedir, f'block-{stem}.sql')
        open(path, 'w').write(b.text)
        r = subprocess.run([self.psql, '-X', '-v', 'VERBOSITY=verbose', '-f', path],
                           capture_output=True, text=True, env=env, timeout=BLOCK_TIMEOUT,
                           cwd=pagedir)
        got, other = [], []
        lines = r.stderr.split('\n')
        for idx, l in enumerate(lines):
            m = PSQL_ERROR.match(l)
            if m:
                reason = None
                for l2 in lines[idx + 1:]:
                    if l2.startswith('psql:'):
                        break
                    if l2.startswith('CONSTRAINT NAME:'):
                        reason = l2.split(':', 1)[1].strip()
                got.append((m.group(2), reason, m.group(3)))
            elif PSQL_QUIET.match(l):
                continue
            elif PSQL_OTHER.match(l):
                other.append(l)
        did = 'errors: ' + ' '.join(f'{c}/{r}' if r else c for c, r, _ in got) if got else 'no error'
        diag = []
        if r.returncode != 0:
            diag.append(f'psql exited with {r.returncode}')
        if other:
            diag.append('psql said: ' + ' | '.join(other))
        ok = r.returncode == 0 and not other and len(got) == len(b.expect) and all(
            c == ec and (er is None or er == gr) for (c, gr, _), (ec, er) in zip(got, b.expect))
        if not ok:
            want = ' '.join(f'{c}/{r}' if r else c for c, r in b.expect) or 'none'
            diag.append(f'expected errors: {want}; got: ' +
                        ('; '.join(f'{c}/{gr} {msg}' for c, gr, msg in got) or 'none'))
            diag.append(r.stderr[-3000:])
        return ok, did, diag

    def run_program(self, b, cmd, pagedir, env):
        # $NAME and ${NAME} of the block's environment, in each argument
        expand = lambda a: re.sub(r'\$(\w+)|\$\{(\w+)\}',
                                  lambda m: env.get(m.group(1) or m.group(2), ''), a)
        r = subprocess.run(cmd + [expand(a) for a in shlex.split(b.args)],
                           capture_output=True, text=True, env=env, cwd=pagedir,
                           timeout=BLOCK_TIMEOUT)
        out = r.stdout + r.stderr
        ok = r.returncode == b.exit and all(p in out for p in b.prints)
        did = f'exit {r.returncode}'
        diag = [] if ok else [f'exit {r.returncode} (expected {b.exit}); '
                              f'expected output containing: {b.prints}', out[-3000:]]
        return ok, did, diag

    def build_go(self, b):
        gv = subprocess.run(['go', 'version'], capture_output=True, text=True).stdout
        h = hashlib.sha256((gv + b.text).encode()).hexdigest()[:16]
        exe = os.path.join(self.cache, f'go-{h}')
        if os.path.exists(exe):
            return exe, []
        gopath = os.path.join(self.cache, 'gopath')
        src = os.path.join(gopath, 'src', f'example{h}')
        os.makedirs(src, exist_ok=True)
        open(os.path.join(src, 'main.go'), 'w').write(b.text)
        env = dict(os.environ, GO111MODULE='off', GOPATH=f'{gopath}:/usr/share/gocode',
                   GOCACHE=os.environ.get('GOCACHE') or os.path.join(self.cache, 'gocache'),
                   GOFLAGS='')
        r = subprocess.run(['go', 'build', '-o', exe + '.tmp', f'example{h}'],
                           capture_output=True, text=True, env=env, timeout=300)
        if r.returncode != 0:
            return None, [r.stderr]
        os.rename(exe + '.tmp', exe)
        return exe, []

    def build_java(self, b, pagedir, stem):
        m = re.search(r'public\s+class\s+(\w+)', b.text)
        if not m:
            return None, ['no public class']
        d = os.path.join(pagedir, f'java-{stem}')
        os.makedirs(d, exist_ok=True)
        open(os.path.join(d, m.group(1) + '.java'), 'w').write(b.text)
        jar = '/usr/share/java/postgresql.jar'
        r = subprocess.run(['javac', '-d', d, '-cp', jar, os.path.join(d, m.group(1) + '.java')],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            return None, [r.stderr]
        return ['java', '-cp', f'{jar}:{d}', m.group(1)], []

    # ---- a page
    def run_page(self, page, blocks, route=None):
        slug = re.sub(r'[^a-z0-9]+', '_', page.lower().removesuffix('.md'))
        db = f'ex_{slug}'
        pagedir = os.path.join(self.work, slug)
        shutil.rmtree(pagedir, ignore_errors=True)
        os.makedirs(pagedir)
        managed = route is not None
        why_not = None
        if managed and not os.environ.get('EXAMPLE_MANAGED_PORT'):
            why_not = 'no server for the managed edition here (EXAMPLE_MANAGED_PORT; the examples suite starts one)'
        elif route == 'pgtle' and os.environ.get('EXAMPLE_MANAGED_PGTLE') != '1':
            why_not = 'pg_tle is not built here (EXAMPLE_MANAGED_PGTLE; the examples suite builds it from FENCING_PGTLE_SRC)'
        todo = []
        for b in blocks:
            if b.lang in OUTPUT_LANGS:
                self.output += 1
            elif b.skip or why_not:
                self.skipped += 1
                self.comment(f'skip {b.page}:{b.line} {b.lang}: {b.skip or why_not}')
            else:
                todo.append(b)
        if not todo:
            return
        if managed:
            # the install files, where the page's commands read them
            os.makedirs(os.path.join(pagedir, 'managed'))
            for f in ('fencing_sql.sql', 'fencing_sql_pgtle.sql'):
                shutil.copy(os.path.join(self.root, 'managed', f), os.path.join(pagedir, 'managed', f))
            errs = self.managed_db(db, route)
            if errs:
                self.tap(False, f'{page}: a fresh database on the managed server ({route})', errs)
                return
        else:
            r = self.admin(f'DROP DATABASE IF EXISTS {db} WITH (FORCE)')
            r2 = self.admin(f'CREATE DATABASE {db}') if r.returncode == 0 else r
            if r2.returncode != 0:
                self.tap(False, f'{page}: a fresh database', [r.stderr, r2.stderr])
                return
        results = {}
        for npass in (1, 2):
            for b in todo:
                if npass == 2 and b.once:
                    continue
                if b.problems:
                    results[b] = [(False, 'bad annotation', b.problems)]
                    continue
                if b.lang not in RUN_LANGS:
                    results[b] = [(False, f'```{b.lang} is no language this harness runs'
                                   ' (annotate it: <!-- example: skip why -->)', [])]
                    continue
                t = time.monotonic()
                ok, did, diag = self.run_block(b, pagedir, db, managed)
                results.setdefault(b, []).append((ok, f'{did} in {time.monotonic() - t:.1f} s', diag))
        page_ok = True
        for b in todo:
            res = results[b]
            self.ran += 1
            ok = all(r[0] for r in res)
            page_ok = page_ok and ok
            diag = []
            for npass, (rok, did, d) in enumerate(res, 1):
                diag.append(f'pass {npass}: {"as expected" if rok else "NOT as expected"}: {did}')
                if not rok:
                    diag.extend(d)
            self.tap(ok, b.name, diag)
        if page_ok:     # a failed page's database stays, for a look
            self.admin(f'DROP DATABASE IF EXISTS {db} WITH (FORCE)', managed)
        else:
            self.comment(f'{page}: its database {db} and directory {pagedir} are kept')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--root', default='.')
    ap.add_argument('--work', default='/tmp/fencing-examples')
    ap.add_argument('--cache', default='/var/cache/fencing/examples')
    ap.add_argument('--psql', default='psql')
    ap.add_argument('--first', type=int, default=1, help='number of the first TAP line')
    ap.add_argument('--plan', action='store_true', help='print the plan line at the end')
    ap.add_argument('--count-file', help='keep the number of the last TAP line in this file')
    ap.add_argument('pages', nargs='*')
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    pages = args.pages or ['README.md'] + sorted(
        (os.path.relpath(os.path.join(d, f), root)
         for d, _, files in os.walk(os.path.join(root, 'docs')) for f in files if f.endswith('.md')),
        key=lambda p: (p.count('/'), p))
    skips = load_skips(os.path.join(root, 'test/examples/skips'))
    run = Runner(args)
    t0 = time.monotonic()
    for page in pages:
        m = MANAGED_PAGE.search(open(os.path.join(root, page), encoding='utf-8').read())
        run.run_page(page, parse_page(root, page, skips), m.group(1) if m else None)
    run.comment(f'{run.ran} blocks run twice each, {run.skipped} skipped, '
                f'{run.output} output blocks (```text) not run; {run.failed} failed; '
                f'{time.monotonic() - t0:.0f} s')
    if args.plan:
        print(f'1..{run.n}')
    return 0        # failures are in the TAP lines; non-zero: the harness itself died


if __name__ == '__main__':
    sys.exit(main())
