#!/usr/bin/env python3
# test/release/check_links.py [ROOT]: every relative link of the Markdown files
# a user reads (README.md, CHANGELOG.md, docs/**/*.md, monitoring/README.md, managed/README.md)
# names a file of the tree and, with #anchor, a heading of that file
# (GitHub's anchors: lower case, punctuation dropped, spaces to hyphens).
# ROOT defaults to the tree this file is in.  Prints each broken link and a
# count; exits 1 when any is broken.
import glob, os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..')
files = [f for f in ['README.md', 'CHANGELOG.md', 'monitoring/README.md', 'managed/README.md']
         + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, 'docs', '**', '*.md'), recursive=True))
         if os.path.exists(os.path.join(root, f))]

def prose(path):
    """The lines of a file, those inside code fences blanked."""
    lines, fence = [], False
    for line in open(path, encoding='utf-8').read().split('\n'):
        if line.lstrip().startswith('```'):
            fence = not fence
            line = ''
        lines.append('' if fence else line)
    return lines

def slug(heading):
    h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading).replace('`', '').strip().lower()
    return re.sub(r'[^\w\- ]', '', h).replace(' ', '-')

anchors = {}
def anchors_of(path):
    if path not in anchors:
        seen, found = {}, set()
        for line in prose(path):
            m = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else f'{s}-{n}')
        anchors[path] = found
    return anchors[path]

links = bad = 0
for f in files:
    path = os.path.join(root, f)
    for n, line in enumerate(prose(path), 1):
        for m in re.finditer(r'\]\(([^)\s]+)\)', re.sub(r'`[^`]*`', '', line)):
            target = m.group(1)
            links += 1
            if re.match(r'^[a-z][a-z0-9+.-]*:', target):
                continue                    # https:, mailto: ...
            file, _, anchor = target.partition('#')
            dest = path if not file else os.path.normpath(os.path.join(os.path.dirname(path), file))
            if not os.path.exists(dest):
                print(f'{f}:{n}: {target}: no file {os.path.relpath(dest, root)}')
                bad += 1
            elif anchor and dest.endswith('.md') and anchor not in anchors_of(dest):
                print(f'{f}:{n}: {target}: no heading #{anchor} in {os.path.relpath(dest, root)}')
                bad += 1
print(f'{len(files)} files, {links} links, {bad} broken')
sys.exit(1 if bad else 0)
