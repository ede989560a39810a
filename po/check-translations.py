#!/usr/bin/env python3
# Fails when a language of po/LINGUAS does not translate every message the
# sources in po/POTFILES.in mark (untranslated or fuzzy against a fresh
# template), or when msgfmt --check refuses it (a format that does not match
# its msgid, a bad header).  The template is made with xgettext as the
# build's 'glib' preset does, in a temporary directory; nothing in the
# source tree changes.  Skips when the gettext tools are missing.  TAP.

import os
import re
import shutil
import subprocess
import sys
import tempfile

KEYWORDS = ['_', 'N_', 'C_:1c,2', 'NC_:1c,2', 'g_dcgettext:2', 'g_dngettext:2,3', 'g_dpgettext2:2c,3']


def run(args):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)


def entries(po_text):
    """(msgid, translated?) of every live entry but the header."""
    out = []
    for block in po_text.split('\n\n'):
        lines = [l for l in block.splitlines() if not l.startswith('#~')]
        if not any(l.startswith('msgid ') for l in lines):
            continue
        fuzzy = any(l.startswith('#,') and 'fuzzy' in l for l in lines)
        key, msgid, strs = None, [], []
        for l in lines:
            m = re.match(r'(msgid|msgid_plural|msgstr(?:\[\d+\])?|msgctxt) (".*")$', l)
            if m:
                key = m.group(1)
                if key.startswith('msgstr'):
                    strs.append([m.group(2)])
                elif key == 'msgid':
                    msgid.append(m.group(2))
            elif l.startswith('"') and key is not None:
                if key.startswith('msgstr'):
                    strs[-1].append(l)
                elif key == 'msgid':
                    msgid.append(l)
        text = ''.join(s[1:-1] for s in msgid)
        if text == '':
            continue
        done = not fuzzy and strs and all(''.join(s[1:-1] for s in parts) != '' for parts in strs)
        out.append((text, bool(done)))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), '..')
    tools = [shutil.which(t) for t in ('xgettext', 'msgmerge', 'msgfmt')]
    if not all(tools):
        print('1..0 # SKIP the gettext tools (xgettext, msgmerge, msgfmt) are not installed')
        return 0
    with open(os.path.join(root, 'po', 'LINGUAS')) as f:
        langs = [w for line in f for w in line.split('#')[0].split()]
    print('1..%d' % (2 * len(langs)))
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        pot = os.path.join(tmp, 'box.pot')
        r = run(['xgettext', '--from-code=UTF-8', '--add-comments', '-D', root,
                 '--files-from=' + os.path.join(root, 'po', 'POTFILES.in'), '-o', pot] +
                ['--keyword=' + k for k in KEYWORDS])
        if r.returncode != 0:
            print('Bail out! xgettext: ' + r.stderr.strip().replace('\n', ' '))
            return 1
        n = 0
        for lang in langs:
            po = os.path.join(root, 'po', lang + '.po')
            n += 1
            r = run(['msgfmt', '--check', '-o', os.devnull, po])
            if r.returncode == 0:
                print('ok %d - %s.po passes msgfmt --check' % (n, lang))
            else:
                failed = True
                print('not ok %d - %s.po passes msgfmt --check' % (n, lang))
                for line in r.stderr.splitlines():
                    print('# ' + line)
            merged = os.path.join(tmp, lang + '.po')
            n += 1
            r = run(['msgmerge', '-q', '--no-fuzzy-matching', '-o', merged, po, pot])
            missing = []
            if r.returncode != 0:
                missing = ['msgmerge: ' + r.stderr.strip()]
            else:
                with open(merged, encoding='utf-8') as f:
                    missing = [text for text, done in entries(f.read()) if not done]
            if missing:
                failed = True
                print('not ok %d - %s.po translates every marked message' % (n, lang))
                for text in missing:
                    print('# untranslated: ' + text[:200])
            else:
                print('ok %d - %s.po translates every marked message' % (n, lang))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
