#!/usr/bin/env python3
# Fails when a source file that marks strings for translation is missing
# from po/POTFILES.in, or when POTFILES.in names a file that does not exist.
# Prints TAP.

import os
import re
import sys

MARKERS = re.compile(r'(?<![A-Za-z0-9_])(?:_|N_|C_|NC_|Q_)\s*\(')
DIRS = ('core', 'plugins', 'tools')
SUFFIXES = ('.c', '.h')


def listed_files(root):
    listed = set()
    with open(os.path.join(root, 'po', 'POTFILES.in'), encoding='utf-8') as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith('#'):
                listed.add(line)
    return listed


def strip_comments(text):
    # drop /* */ and // comments so a mention in prose does not count
    text = re.sub(r'/\*.*?\*/', '', text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def marking_files(root):
    found = set()
    for top in DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith('.')]
            for name in filenames:
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                with open(path, encoding='utf-8', errors='replace') as f:
                    if MARKERS.search(strip_comments(f.read())):
                        found.add(os.path.relpath(path, root))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    listed = listed_files(root)
    marking = marking_files(root)
    missing = sorted(marking - listed)
    gone = sorted(p for p in listed if not os.path.isfile(os.path.join(root, p)))

    print('1..2')
    if missing:
        print('not ok 1 - every file marking strings is in po/POTFILES.in')
        for path in missing:
            print('# missing from po/POTFILES.in: ' + path)
    else:
        print('ok 1 - every file marking strings is in po/POTFILES.in')
    if gone:
        print('not ok 2 - every file in po/POTFILES.in exists')
        for path in gone:
            print('# listed in po/POTFILES.in but absent: ' + path)
    else:
        print('ok 2 - every file in po/POTFILES.in exists')
    return 1 if missing or gone else 0


if __name__ == '__main__':
    sys.exit(main())
