#!/usr/bin/env python3
"""Builds plugins/example the way a third party would (TAP output).

Installs boxd's headers, library and box-plugin.pc from the build tree into
a temporary DESTDIR, points a copy of box-plugin.pc at it, then configures,
builds and installs the example with meson as a standalone project and
checks that the module exports box_plugin_query() and nothing else.

usage: example-standalone-test.py BUILD_ROOT EXAMPLE_SOURCE_DIR
"""

import os
import shutil
import subprocess
import sys
import tempfile

results = []


def check(name, ok, detail=''):
    results.append(ok)
    print(('ok' if ok else 'not ok') + ' %d %s' % (len(results), name))
    if not ok and detail:
        for line in detail.rstrip().splitlines()[-40:]:
            print('# ' + line)
    sys.stdout.flush()
    return ok


def run(argv, env=None):
    proc = subprocess.run(argv, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    return proc.returncode == 0, proc.stdout


def find(root, name):
    for dirpath, _dirnames, filenames in os.walk(root):
        if name in filenames:
            return os.path.join(dirpath, name)
    return None


def main():
    if len(sys.argv) != 3:
        print('usage: %s BUILD_ROOT EXAMPLE_SOURCE_DIR' % sys.argv[0], file=sys.stderr)
        return 2
    build_root, source_dir = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix='box-example-test-')
    try:
        return test(build_root, source_dir, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test(build_root, source_dir, tmp):
    print('1..6')
    dest = os.path.join(tmp, 'dest')
    ok, out = run(['meson', 'install', '-C', build_root, '--no-rebuild', '--quiet',
                   '--tags', 'devel,runtime', '--destdir', dest])
    if not check('boxd installs into a DESTDIR', ok, out):
        return 1

    pc = find(dest, 'box-plugin.pc')
    if not check('box-plugin.pc is installed', pc is not None):
        return 1

    # The .pc names the real prefix; move it under DESTDIR, as a packager's
    # sysroot would.
    pc_dir = os.path.join(tmp, 'pkgconfig')
    os.makedirs(pc_dir)
    with open(pc) as f:
        lines = f.read().splitlines()
    with open(os.path.join(pc_dir, 'box-plugin.pc'), 'w') as f:
        for line in lines:
            if line.startswith('prefix='):
                line = 'prefix=' + dest + line[len('prefix='):]
            f.write(line + '\n')

    env = dict(os.environ)
    env['PKG_CONFIG_PATH'] = pc_dir
    build = os.path.join(tmp, 'build')
    ok, out = run(['meson', 'setup', build, source_dir], env=env)
    if not check('the example configures against box-plugin.pc', ok, out):
        return 1
    ok, out = run(['ninja', '-C', build], env=env)
    if not check('the example builds', ok, out):
        return 1

    module = os.path.join(build, 'box-plugin-example.so')
    ok, out = run(['nm', '-D', '--defined-only', module])
    exported = sorted(line.split()[-1] for line in out.splitlines()
                      if len(line.split()) == 3 and line.split()[1] in 'TDBRVW')
    check('the module exports only box_plugin_query', ok and exported == ['box_plugin_query'],
          out + '\nexported: %r' % exported)

    dest2 = os.path.join(tmp, 'dest2')
    ok, out = run(['meson', 'install', '-C', build, '--destdir', dest2], env=env)
    installed = find(dest2, 'box-plugin-example.so') if ok else None
    check('the example installs into pkg-config\'s plugindir',
          installed is not None and os.path.dirname(installed).endswith('/box/plugins'),
          out + '\ninstalled at: %r' % installed)
    return 0 if all(results) else 1


if __name__ == '__main__':
    sys.exit(main())
