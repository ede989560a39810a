#!/usr/bin/env python3
# vm: every syscall boxd makes with its real plugins -- libvirt (QEMU
# domains, cold pause and restore, the agent's virtio-serial socket),
# nftables (taps, tables, the DNS forwarder) and sqlite -- passes
# boxd.service's SystemCallFilter (issue 12, item 5).  tests/daemon's
# boxd-unit checks the same with the dummy hypervisor; the unit's filter is
# read and expanded by the same code (tests/daemon/unit_test.py).  boxd runs
# under strace -f, so what it spawns (qemu-img, the file workers) counts too.
# QEMU is libvirtd's child, not boxd's, and is confined by libvirt's own
# seccomp sandbox (test_confine.py).

import os
import shutil
import sys
import tempfile

import vmtest
from vmtest import VmBoxd, Tap

sys.path.insert(0, os.path.join(vmtest.SOURCE_ROOT, 'tests', 'daemon'))
import unit_test  # noqa: E402  (tests/daemon/unit_test.py)

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
STRACE = shutil.which('strace')
if unit_test.ANALYZE is None or STRACE is None:
    vmtest.skip_all('needs systemd-analyze and strace')

TMP = tempfile.mkdtemp(prefix='box-vm-strace-')
SUMMARY = os.path.join(TMP, 'boxd.strace')
WRAPPER = os.path.join(TMP, 'boxd')
with open(WRAPPER, 'w') as f:
    f.write('#!/bin/sh\nexec %s -f -qq -c -o %s %s "$@"\n' % (STRACE, SUMMARY, vmtest.boxtest.BOXD))
os.chmod(WRAPPER, 0o755)
REAL_BOXD = vmtest.boxtest.BOXD
vmtest.boxtest.BOXD = WRAPPER
# hot_pause_s=0: every pause is cold (device state and RAM to a file, QEMU
# ends) and every wake a restore, the paths with the most file work.
# LeakSanitizer cannot run under ptrace (an ASan build would abort).
asan = os.environ.get('ASAN_OPTIONS', '')
d = VmBoxd(t, config={'plugin.libvirt': {'hot_pause_s': '0'}},
           env={'ASAN_OPTIONS': (asan + ':' if asan else '') + 'detect_leaks=0'})
with clock('boxd start (traced)'):
    vmtest.setup_or_bail(d, lambda: d.start())
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))


def status(r):
    return r[0]


def test_traced_run(t):
    with clock('create'):
        sb = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'traced'}))
    sid = sb['id']
    vmtest.ok_run(t, d, KEY, 'traced', ['sh', '-c', 'echo hi; ls /'], 'exec/run works under strace')
    t.eq(status(d.request('PUT', '/v1/sandboxes/traced/fs/file?path=/tmp/a.txt', raw=b'x' * 100000,
                          token=KEY)), 200, 'PUT fs/file')
    r = d.request('GET', '/v1/sandboxes/traced/fs/file?path=/tmp/a.txt', token=KEY)
    t.eq((r[0], len(r[3])), (200, 100000), 'GET fs/file gives the bytes back')
    t.eq(status(d.request('GET', '/v1/sandboxes/traced/fs/list?path=/tmp', token=KEY)), 200, 'fs/list')
    t.eq(status(d.request('GET', '/v1/sandboxes/traced/fs/tar?path=/etc/apt', token=KEY)), 200, 'fs/tar')
    t.eq(status(d.request('GET', '/v1/sandboxes/traced/ports', token=KEY)), 200, 'ports')
    r = vmtest.sh(d, KEY, 'traced', 'curl -s --unix-socket /run/box/api.sock http://x/self')
    t.ok(r.status == 200 and r.exit_code == 0 and sid in r.out, 'the in-sandbox socket answers',
         r.describe())
    t.eq(status(d.request('PATCH', '/v1/sandboxes/traced', {'env': {'A': '1'}}, token=KEY)), 200,
         'PATCH env')
    for verb, want in (('pause', 'paused'), ('wake', 'running'), ('stop', 'stopped'), ('wake', 'running')):
        with clock(verb):
            r = d.request('POST', '/v1/sandboxes/traced/%s' % verb, token=KEY, timeout=300)
        t.ok(r[0] == 200 and r[2].get('state') == want, '%s -> %s' % (verb, want), r[0])
    vmtest.ok_run(t, d, KEY, 'traced', ['true'], 'exec/run after the cold boot')
    t.eq(status(d.request('DELETE', '/v1/sandboxes/%s' % sid, token=KEY)), 204, 'delete')

    unit_test.stop_traced(t, d)
    vmtest.boxtest.BOXD = REAL_BOXD
    calls = unit_test.strace_names(SUMMARY) if os.path.exists(SUMMARY) else set()
    t.ok(len(calls) > 40, 'strace saw the run (%d syscalls)' % len(calls))
    t.comment('boxd used: ' + ' '.join(sorted(calls)))
    allowed = unit_test.allowed_syscalls()
    t.eq(sorted(calls - allowed), [], 'every syscall of boxd with libvirt and nftables passes SystemCallFilter')
    # the check is not vacuous: calls only the real plugins make were seen
    t.ok('sendmsg' in calls or 'sendto' in calls, 'netlink/libvirt traffic was traced')


try:
    vmtest.main(t, clock, test_traced_run)
finally:
    vmtest.boxtest.BOXD = REAL_BOXD
    shutil.rmtree(TMP, ignore_errors=True)
