#!/usr/bin/env python3
"""The SDK's boundary, checked on the built files (TAP).

1. libbox-plugin-<N>.so exports exactly what its installed headers declare
   with BOX_PLUGIN_API, every symbol under the version node BOX_PLUGIN_<N>,
   and its soname is libbox-plugin-<N>.so.<N>.
2. Every plugin module exports box_plugin_query and nothing else, needs
   libbox-plugin-<N>.so.<N>, and every box_* symbol it uses is one the SDK
   exports (nothing of boxd's own: the engine, its configuration, the agent
   client).

usage: check-exports.py LIBRARY HEADERS_DIRS ABI_VERSION PLUGIN.so...

HEADERS_DIRS: the installed headers' folders, separated by ':' (the
sources, and the build folder for the generated box-enum-types.h).
"""
import re
import subprocess
import sys

lib, headers_dir, abi = sys.argv[1], sys.argv[2], sys.argv[3]
plugins = sys.argv[4:]
failures = 0
n = 0


def ok(cond, what, detail=''):
    global failures, n
    n += 1
    print('%s %d - %s' % ('ok' if cond else 'not ok', n, what))
    if not cond:
        failures += 1
        for line in detail.strip().splitlines():
            print('# ' + line)


def dynsyms(path, defined):
    out = subprocess.run(['nm', '-D', '--with-symbol-versions',
                          '--defined-only' if defined else '--undefined-only', path],
                         check=True, capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if not parts:
            continue
        name = parts[-1]
        if defined and parts[1] == 'A':
            continue   # the version node itself
        base, _, version = name.partition('@')
        syms[base] = version.lstrip('@')
    return syms


def declared(headers_dirs):
    import glob
    import os
    names = set()
    headers = []
    for d in headers_dirs.split(os.pathsep):
        headers += glob.glob(os.path.join(d, '*.h'))
    for h in sorted(headers):
        if h.endswith('-private.h'):
            continue
        text = open(h).read()
        # BOX_PLUGIN_API, then a declaration up to the first '('
        for m in re.finditer(r'^BOX_PLUGIN_API\s+([^;(]*?)\b([a-z_][a-z0-9_]*)\s*\(', text, re.M):
            names.add(m.group(2))
        # BOX_PLUGIN_API before G_DECLARE_*_TYPE / G_DECLARE_INTERFACE: its get_type
        for m in re.finditer(r'^BOX_PLUGIN_API\s+G_DECLARE_\w+\s*\(\s*\w+\s*,\s*(\w+)\s*,', text, re.M):
            names.add(m.group(1) + '_get_type')
    return names


exports = dynsyms(lib, True)
wanted = declared(headers_dir)
extra = sorted(set(exports) - wanted)
missing = sorted(wanted - set(exports))
ok(len(exports) > 50, 'the SDK exports its API (%d symbols)' % len(exports))
ok(not extra, 'the SDK exports nothing its headers do not declare with BOX_PLUGIN_API',
   '\n'.join(extra))
ok(not missing, 'everything declared with BOX_PLUGIN_API is exported', '\n'.join(missing))
badver = sorted(s for s, v in exports.items() if v != 'BOX_PLUGIN_' + abi)
ok(not badver, 'every export is in the version node BOX_PLUGIN_' + abi, '\n'.join(badver))

dyn = subprocess.run(['readelf', '-d', lib], check=True, capture_output=True, text=True).stdout
soname = 'libbox-plugin-%s.so.%s' % (abi, abi)
ok('[%s]' % soname in dyn, 'the soname is ' + soname)

for plugin in plugins:
    name = plugin.rsplit('/', 1)[-1]
    own = dynsyms(plugin, True)
    ok(sorted(own) == ['box_plugin_query'], '%s exports box_plugin_query only' % name,
       ' '.join(sorted(own)))
    used = sorted(s for s in dynsyms(plugin, False) if s.lower().startswith('box'))
    foreign = [s for s in used if s not in exports]
    ok(not foreign, '%s uses only the SDK of boxd (%d symbols)' % (name, len(used)),
       '\n'.join(foreign))
    needed = subprocess.run(['readelf', '-d', plugin], check=True, capture_output=True,
                            text=True).stdout
    ok('[%s]' % soname in needed and 'boxcore' not in needed,
       '%s needs %s and no other library of boxd' % (name, soname))

print('1..%d' % n)
sys.exit(1 if failures else 0)
