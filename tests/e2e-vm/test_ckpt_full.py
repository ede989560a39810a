#!/usr/bin/env python3
# vm: the node's disk fills up in the middle of a checkpoint (issue 13
# item 8): the checkpoint is 503 capacity with Retry-After, leaves no file
# and no record, and the sandbox runs on; with room again, checkpoints and
# restores work.
#
# boxd gets a vm_dir of its own on a tmpfs of 3 GiB (so that filling it
# disturbs nothing else on the host; the sandbox has 512 MiB of RAM, which
# a memory checkpoint's room check counts in full), and the libvirt plugin's test delay at
# the start of every checkpoint (BOX_LIBVIRT_TEST_DELAY_AT=checkpoint,
# plugins/libvirt/README.md): the room check has passed, nothing is written
# yet.  The test then fills the tmpfs up to FREE_LEFT with a file, so the
# memory checkpoint's RAM (64 MiB of it written by the guest just before)
# meets a full disk midway; for a disk-only checkpoint (a disk snapshot:
# only a new, empty overlay and the manifest are written) it leaves less
# room than that overlay takes.  Then a fork of a checkpoint, held at
# the test delay after its room check (BOX_LIBVIRT_TEST_DELAY_AT=fork-files),
# meets a disk filled to the last byte: 503 capacity, the fork gone with its
# VM directory, the checkpoint and the source untouched.  Last, a fork whose
# files fit but whose guest then meets the full disk: a memory checkpoint
# taken while the source writes to its disk, its fork held at the test delay
# after its start (BOX_LIBVIRT_TEST_DELAY_AT=fork) while the disk fills; the
# fork's guest writes on, QEMU stops it on the write, its set-up times out:
# 503 capacity too, and nothing left of it.

import errno
import os
import re
import shutil
import subprocess
import threading
import time

import vmtest
from vmtest import VmBoxd, Tap, sh, state

DELAY_MS = 5000
FREE_LEFT = 4 << 20
# what a fill may leave beyond what it was asked to: less than a fork's
# new qcow2 overlay (~200 KiB), which fitted in the 1 MiB this was (a fork
# got 201 on a disk "filled to the last byte" once in a CI run)
SLACK = 64 << 10
# less than a disk snapshot's new overlay (196 KiB), even with SLACK
OVERLAY_LEFT = 96 << 10
FULL_DIR = '/var/tmp/box-e2e-vm-full-%d' % os.getpid()

t = Tap()
clock = vmtest.Clock(t)
if os.geteuid() == 0:
    os.makedirs(FULL_DIR, mode=0o711, exist_ok=True)
    r = subprocess.run(['mount', '-t', 'tmpfs', '-o', 'size=3g,mode=0711', 'box-e2e-full', FULL_DIR],
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        vmtest.skip_all('cannot mount a tmpfs for the vm_dir: %s' % r.stderr.decode().strip())
    # the suite's KVM probe answer, as the other files find it
    probe = os.path.join(vmtest.VM_DIR, 'accel-probe')
    if os.path.isdir(probe):
        shutil.copytree(probe, os.path.join(FULL_DIR, 'accel-probe'))
    vmtest.VM_DIR = FULL_DIR
FILLER = os.path.join(FULL_DIR, 'filler')
CKPT_ROOT = os.path.join(FULL_DIR, 'checkpoints')
vmtest.prepare(t)
# no background materialisation: its files come and go on this small file
# system while a case holds it full (a failed one freed room during the fork
# case's delay, so the fork's files fit and its guest met the full disk)
d = VmBoxd(t, config={'plugin.libvirt': {'vm_dir': FULL_DIR, 'pool_size': '1',
                                         'checkpoint_materialise': 'false'}},
           env={'BOX_LIBVIRT_TEST_DELAY_MS': str(DELAY_MS),
                'BOX_LIBVIRT_TEST_DELAY_AT': 'checkpoint,fork-files,fork'})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('full'))
with clock('create the sandbox (a template snapshot of its own first)'):
    # 512 MiB of RAM: a memory checkpoint's room check counts all of it
    SRC = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'kf',
                                                                 'resources': {'memory_mib': 512}}))
SID = SRC['id']
FITS = {}   # the checkpoint that fitted (test_room_again)


def free_bytes():
    st = os.statvfs(FULL_DIR)
    return st.f_bavail * st.f_frsize


def fill(left=FREE_LEFT):
    """The tmpfs full but @left: one fallocate (quick, where writing a
    gigabyte would race the checkpoint once its delay is over).  A
    fallocate that meets ENOSPC (a guest or QEMU wrote meanwhile) is undone
    whole by tmpfs, so it is asked again with the new free space."""
    for _ in range(50):
        fd = os.open(FILLER, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            # from the filler's end, so that a second fill takes what was freed
            os.posix_fallocate(fd, os.fstat(fd).st_size, max(free_bytes() - left, 1))
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
        finally:
            os.close(fd)
        if free_bytes() <= left + SLACK:
            return


def unfill():
    if os.path.exists(FILLER):
        os.unlink(FILLER)


def ids():
    r = d.request('GET', '/v1/sandboxes/kf/checkpoints', token=KEY)
    return [c['id'] for c in (r[2] or {}).get('checkpoints', [])] if r[0] == 200 else r[0]


def on_disk():
    try:
        return sorted(n[len(SID) + 1:] for n in os.listdir(CKPT_ROOT) if n.startswith(SID + '.'))
    except OSError:
        return []


def vm_disks():
    """The disk files in kf's VM directory (its overlay, layers, a disk
    snapshot's new overlay), with their inodes."""
    vm_dir = d.vm_path(SID)
    if vm_dir is None:
        return None
    return sorted((n, os.lstat(os.path.join(vm_dir, n)).st_ino) for n in os.listdir(vm_dir)
                  if n.startswith('disk.qcow2') or n.startswith('layer-'))


def refused_on_full_disk(t, call, result, what, left):
    """The disk filled up but @left while @call (a request under way, its
    answer appended to @result) waits at its test delay: 503 capacity."""
    try:
        fill(left)
        t.ok(free_bytes() <= left + SLACK, '%s: the disk filled up meanwhile' % what,
             '%d bytes free' % free_bytes())
        # kept full until the answer: room freed meanwhile (a removed
        # temporary, the guest's discards) would let the call fit after all
        # (a fork got 201 so, once in three runs)
        end = time.time() + 300
        while call.is_alive() and time.time() < end:
            if free_bytes() > left + SLACK:
                fill(left)
            call.join(0.1)
    finally:
        unfill()
    r = result[0] if result else (0, {}, None, 'no answer')
    code = ((r[2] or {}).get('error') or {}).get('code')
    t.ok((r[0], code) == (503, 'capacity'), '%s on a disk that filled midway: 503 capacity' % what,
         r[3][:300])
    t.ok(r[1].get('retry-after') is not None if r[0] else False, '%s: with Retry-After' % what)


def checkpoint_on_full_disk(t, body, what, left=FREE_LEFT):
    before_ids, before_files, before_disks = ids(), on_disk(), vm_disks()
    delays = len(d.log_lines('test delay: checkpoint of sandbox'))
    result = []
    call = threading.Thread(target=lambda: result.append(
        d.request('POST', '/v1/sandboxes/kf/checkpoints', body, token=KEY, timeout=300)), daemon=True)
    call.start()
    end = time.time() + 60
    while time.time() < end and len(d.log_lines('test delay: checkpoint of sandbox')) <= delays:
        time.sleep(0.05)
    t.ok(len(d.log_lines('test delay: checkpoint of sandbox')) > delays,
         '%s: under way (the room check passed)' % what)
    refused_on_full_disk(t, call, result, what, left)
    t.eq(ids(), before_ids, '%s: no record' % what)
    t.eq(on_disk(), before_files, '%s: no checkpoint file, not even a temporary' % what)
    t.eq(vm_disks(), before_disks, '%s: the VM\'s disk files are as before (no layer, no new '
         'overlay)' % what)
    t.eq(state(d, KEY, 'kf'), 'running', '%s: the sandbox runs on' % what)
    m = sh(d, KEY, 'kf', 'cat /tmp/mark')
    t.eq((m.status, m.out), (200, 'one\n'), '%s: and runs commands with its files' % what)


def test_memory_checkpoint(t):
    r = sh(d, KEY, 'kf', 'echo one > /tmp/mark; head -c 64M /dev/urandom > /dev/shm/ram; echo ok')
    t.eq((r.status, r.out), (200, 'ok\n'), '64 MiB of the guest\'s RAM written')
    checkpoint_on_full_disk(t, {'comment': 'too big'}, 'a memory checkpoint')


def test_disk_checkpoint(t):
    r = sh(d, KEY, 'kf', 'head -c 16M /dev/urandom > /var/tmp/big; sync; echo ok')
    t.eq((r.status, r.out), (200, 'ok\n'), '16 MiB written to the guest\'s disk')
    # a disk snapshot writes a new overlay (196 KiB on a tmpfs) and the
    # manifest: the disk fills up to OVERLAY_LEFT, which the guest's own
    # writes meanwhile (its journal commits) need: with no room at all QEMU
    # stops the guest on its next write (werror=enospc)
    checkpoint_on_full_disk(t, {'memory': False}, 'a disk-only checkpoint', left=OVERLAY_LEFT)


def test_room_again(t):
    r = d.request('POST', '/v1/sandboxes/kf/checkpoints', {'comment': 'fits'}, token=KEY, timeout=300)
    t.status(r, 201, 'with room again: a memory checkpoint')
    ckpt = FITS['id'] = (r[2] or {}).get('id')
    t.eq(on_disk(), sorted(ids()) if isinstance(ids(), list) else None,
         'its files are exactly the records')
    sh(d, KEY, 'kf', 'rm /tmp/mark')
    r = d.request('POST', '/v1/sandboxes/kf/checkpoints/%s/restore' % ckpt, token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'it restores', r[3][:300])
    m = sh(d, KEY, 'kf', 'cat /tmp/mark; test -s /var/tmp/big && echo big')
    t.eq((m.status, m.out), (200, 'one\nbig\n'), 'to its /tmp and disk files')


def test_fork(t):
    before_ids, before_files = ids(), on_disk()
    point = 'test delay: fork-files of sandbox'
    result = []
    call = threading.Thread(target=lambda: result.append(
        d.request('POST', '/v1/sandboxes', {'name': 'kg', 'from': {'sandbox': 'kf',
                                                                   'checkpoint': FITS['id']}},
                  token=KEY, timeout=300)), daemon=True)
    call.start()
    end = time.time() + 60
    while time.time() < end and not d.log_lines(point):
        time.sleep(0.05)
    lines = d.log_lines(point)
    t.ok(lines, 'a fork: under way (the room check passed)')
    m = re.search(r'\(domain box-(\S+)\)', lines[0] if lines else '')
    vm_dir = os.path.join(FULL_DIR, 'vms', m.group(1) if m else '-')
    refused_on_full_disk(t, call, result, 'a fork', 0)
    t.eq(d.request('GET', '/v1/sandboxes/kg', token=KEY)[0], 404, 'a fork: the refused fork is gone')
    end = time.time() + 30
    while time.time() < end and os.path.exists(vm_dir):
        time.sleep(0.2)
    t.ok(m is not None and not os.path.exists(vm_dir), 'a fork: no VM directory left of it', vm_dir)
    t.eq(ids(), before_ids, 'a fork: the source\'s checkpoints as they were')
    t.eq(on_disk(), before_files, 'a fork: and their files')
    t.eq(state(d, KEY, 'kf'), 'running', 'a fork: the source runs on')
    r = d.request('POST', '/v1/sandboxes', {'name': 'kh', 'from': {'sandbox': 'kf',
                                                                  'checkpoint': FITS['id']}},
                  token=KEY, timeout=300)
    t.status(r, 201, 'with room again: the fork works')
    m = sh(d, KEY, 'kh', 'cat /tmp/mark')
    t.eq((m.status, m.out), (200, 'one\n'), 'and runs commands with the checkpoint\'s files')


def test_fork_guest_on_full_disk(t):
    t.status(d.request('DELETE', '/v1/sandboxes/kh', token=KEY, timeout=120), 204,
             'the fork of the previous case deleted (it would meet the full disk too)')
    # a source of its own: kf met the full disk of the previous case, and
    # QEMU keeps a guest it stopped on a full disk stopped
    r = d.request('POST', '/v1/sandboxes', {'name': 'kv', 'resources': {'memory_mib': 512}},
                  token=KEY, timeout=300)
    t.status(r, 201, 'a new source')
    r = sh(d, KEY, 'kv', 'printf "while :; do date >> /var/tmp/tick; sync; sleep 0.2; done\\n" '
           '> /var/tmp/writer.sh; echo ok', timeout_s=30)
    t.ok((r.status, r.out) == (200, 'ok\n'), 'a disk writer written', r.describe())
    r = sh(d, KEY, 'kv', 'setsid sh /var/tmp/writer.sh >/dev/null 2>&1 </dev/null & echo ok',
           timeout_s=30)
    t.ok((r.status, r.out) == (200, 'ok\n'), 'started in the source', r.describe())
    r = sh(d, KEY, 'kv', 'sleep 1; test -s /var/tmp/tick && echo ok', timeout_s=30)
    t.ok((r.status, r.out) == (200, 'ok\n'), 'and writing', r.describe())
    r = d.request('POST', '/v1/sandboxes/kv/checkpoints', {'comment': 'writer'}, token=KEY,
                  timeout=300)
    t.status(r, 201, 'a memory checkpoint with the writer running')
    ckpt = (r[2] or {}).get('id')
    # (the bracket: pkill's own shell does not match)
    r = sh(d, KEY, 'kv', 'pkill -f "[w]riter.sh"; sleep 0.5; pgrep -f "[w]riter.sh" || echo stopped',
           timeout_s=30)
    t.ok((r.status, r.out) == (200, 'stopped\n'), 'the writer stopped in the source',
         r.describe())
    before_files = sorted(os.listdir(CKPT_ROOT))
    point = 'test delay: fork of sandbox'
    seen = len(d.log_lines(point))
    result = []
    call = threading.Thread(target=lambda: result.append(
        d.request('POST', '/v1/sandboxes', {'name': 'kw', 'from': {'sandbox': 'kv',
                                                                   'checkpoint': ckpt}},
                  token=KEY, timeout=300)), daemon=True)
    call.start()
    end = time.time() + 120
    while time.time() < end and len(d.log_lines(point)) <= seen:
        time.sleep(0.05)
    lines = d.log_lines(point)[seen:]
    t.ok(lines, 'a fork: its files made and its guest running (held after its start)')
    m = re.search(r'\(domain box-(\S+)\)', lines[0] if lines else '')
    vm_dir = os.path.join(FULL_DIR, 'vms', m.group(1) if m else '-')
    refused_on_full_disk(t, call, result, 'a fork whose guest meets a full disk', 0)
    t.eq(d.request('GET', '/v1/sandboxes/kw', token=KEY)[0], 404,
         'a fork whose guest met a full disk: no record')
    end = time.time() + 30
    while time.time() < end and os.path.exists(vm_dir):
        time.sleep(0.2)
    t.ok(m is not None and not os.path.exists(vm_dir),
         'a fork whose guest met a full disk: no VM directory left of it', vm_dir)
    t.eq(state(d, KEY, 'kv'), 'running',
         'a fork whose guest met a full disk: the source runs on')
    t.eq(sorted(os.listdir(CKPT_ROOT)), before_files,
         'a fork whose guest met a full disk: the checkpoints\' files as they were')


def test_cleanup(t):
    vmtest.delete_all_and_stop(t, d, KEY)
    t.eq(on_disk(), [], 'the sandbox\'s checkpoints went with it')


if __name__ == '__main__':
    try:
        vmtest.main(t, clock, test_memory_checkpoint, test_disk_checkpoint, test_room_again,
                    test_fork, test_fork_guest_on_full_disk, test_cleanup)
    finally:
        # (boxd's VMs are destroyed at exit, vmtest.prepare's handler)
        subprocess.run(['umount', '-l', FULL_DIR], stderr=subprocess.DEVNULL)
        shutil.rmtree(FULL_DIR, ignore_errors=True)
