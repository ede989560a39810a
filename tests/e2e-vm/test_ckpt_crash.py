#!/usr/bin/env python3
# vm: checkpoints, restores and forks survive a kill -9 (issue 13 items 7,
# 8 and 11), and a checkpoint that does not fit is 503 capacity.
#
# boxd runs with the libvirt plugin's test delay (BOX_LIBVIRT_TEST_DELAY_MS,
# plugins/libvirt/README.md): every checkpoint, restore and fork waits in
# its worker thread, midway, after logging "test delay: <what> of sandbox
# <id> (domain <name>)".  The test waits for that line and kills boxd or
# the QEMU then, so "while it runs" never races.  For each of a memory
# checkpoint, a restore and a fork, once with boxd killed (then restarted
# on the same data dir) and once with the QEMU killed:
#   - every checkpoint acknowledged (201) before is listed and restorable;
#   - the plugin's checkpoint directory holds exactly the recorded
#     checkpoints of the sandbox (no temporaries, no files without a
#     record, no record without files) once the reconcile is done;
#   - the sandbox is running, paused or stopped (never a transition);
#   - a fork killed midway is gone, or in error (the spec's "creating |
#     first boot fails") with no VM left and deletable, or whole (running,
#     runs commands).
# Then boxd is killed while a memory checkpoint holds the guest's vCPUs
# stopped (BOX_LIBVIRT_TEST_DELAY_AT=checkpoint-stopped): the sandbox comes
# back running, and the same QEMU checkpoints and cold-pauses again.
# Then boxd is killed while a memory checkpoint is materialised in the
# background: no helper domain or file is left, the next start materialises
# it, and a restore maps its RAM file.  Only that case materialises
# ([plugin.libvirt] checkpoint_materialise=false before it): each
# materialisation loads a whole checkpoint into a helper QEMU, which on two
# TCG cores made this file take 559 s instead of ~90 s.
# Then a restore fails after its old QEMU ended (its state file removed at
# BOX_LIBVIRT_TEST_DELAY_AT=restore-ended): the sandbox is stopped, not
# "running" over no QEMU, and a wake boots it.
# Then a disk-only checkpoint's disk snapshot is cut: before QEMU switched
# to the new overlay by a kill of boxd (BOX_LIBVIRT_TEST_DELAY_AT=
# disk-snapshot-made: the restart removes it), and after, before the
# overlay has its name (disk-snapshot), by a kill of boxd (the restart
# finishes it) and of the QEMU (the sandbox goes back to its disk); no
# file written is lost.
# Last, boxd restarts with disk_reserve_mib beyond the disk: a checkpoint
# (memory or disk only), a restore and a fork are 503 capacity, write no
# file and no record, and the sandbox runs on.

import json
import os
import re
import signal
import threading
import time

import vmtest
from vmtest import VmBoxd, Tap, sh, state

DELAY_MS = 4000
SETTLED = ('running', 'paused', 'stopped')
CKPT_ROOT = os.path.join(vmtest.VM_DIR, 'checkpoints')

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t, config={'plugin.libvirt': {'checkpoint_materialise': 'false'}},
            env={'BOX_LIBVIRT_TEST_DELAY_MS': str(DELAY_MS)})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('crash'))
with clock('create the source'):
    SRC = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'kc', 'env': {'E': 'kc'}}))
SID = SRC['id']


class Call(threading.Thread):
    """One API request in the background: .result is (status, ...) or the exception's text."""

    def __init__(self, method, path, body=None):
        super().__init__(daemon=True)
        self.args_ = (method, path, body)
        self.result = None
        self.start()

    def run(self):
        try:
            self.result = d.request(self.args_[0], self.args_[1], self.args_[2], token=KEY, timeout=300)
        except Exception as e:  # noqa: BLE001  (a killed boxd resets the connection)
            self.result = ('no answer: %s' % e,)

    def status(self, timeout=300):
        self.join(timeout)
        return self.result[0] if self.result else 'no answer (timed out)'


def delays(what):
    return d.log_lines('test delay: %s of sandbox' % what)


def wait_delay(what, before, timeout=180):
    """The log line of the next test delay of @what (its domain), None if none came."""
    end = time.time() + timeout
    while time.time() < end:
        lines = delays(what)
        if len(lines) > before:
            m = re.search(r'\(domain (\S+)\)', lines[before])
            return m.group(1) if m else '-'
        time.sleep(0.05)
    return None


def kill_qemu(t, domain, desc):
    pid = vmtest.qemu_pid(domain or '')
    if not t.ok(pid is not None, '%s: the QEMU of %s found (pid %s)' % (desc, domain, pid)):
        return
    os.kill(pid, signal.SIGKILL)
    end = time.time() + 15
    while time.time() < end and os.path.exists('/proc/%d' % pid):
        time.sleep(0.05)
    t.ok(not os.path.exists('/proc/%d' % pid), '%s: QEMU killed with SIGKILL' % desc)


def ids(sandbox='kc'):
    r = d.request('GET', '/v1/sandboxes/%s/checkpoints' % sandbox, token=KEY)
    return [c['id'] for c in (r[2] or {}).get('checkpoints', [])] if r[0] == 200 else r[0]


def on_disk(sid):
    try:
        names = os.listdir(CKPT_ROOT)
    except OSError:
        names = []
    return sorted(n[len(sid) + 1:] for n in names if n.startswith(sid + '.'))


def files_match(t, desc, sid=None, timeout=30):
    """The plugin's checkpoint directory holds exactly the sandbox's records
    (the reconcile's deletes run in the background: waited for)."""
    sid = sid or SID
    end = time.time() + timeout
    while True:
        recorded, files = ids(), on_disk(sid)
        if (isinstance(recorded, list) and sorted(recorded) == files) or time.time() > end:
            break
        time.sleep(0.2)
    t.ok(isinstance(recorded, list) and files == sorted(recorded),
         '%s: the checkpoint files are exactly the records (no temporary, no orphan)' % desc,
         'files %r, records %r' % (files, recorded))
    return recorded


def settled(t, desc, sandbox='kc', allowed=SETTLED, timeout=60):
    end = time.time() + timeout
    st = state(d, KEY, sandbox)
    while st not in allowed and time.time() < end:
        time.sleep(0.2)
        st = state(d, KEY, sandbox)
    t.ok(st in allowed, '%s: %s is %s (one of %s)' % (desc, sandbox, st, '/'.join(allowed)))
    return st


def restorable(t, desc, checkpoint='v1'):
    with clock('restore %s' % checkpoint):
        r = d.request('POST', '/v1/sandboxes/kc/checkpoints/%s/restore' % checkpoint, token=KEY,
                      timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running',
         '%s: %s restores (200 running)' % (desc, checkpoint), r[3][:300])
    m = sh(d, KEY, 'kc', 'cat /tmp/mark')
    t.eq((m.status, m.out.strip()), (200, 'one'), '%s: its /tmp file is back' % desc)


def restart(desc):
    with clock('boxd restart (%s)' % desc):
        d.start()


def vm_files(prefix):
    """The names in kc's VM directory that start with @prefix."""
    vm_dir = d.vm_path(SID)
    return sorted(n for n in os.listdir(vm_dir) if n.startswith(prefix)) if vm_dir else None


def disk_checkpoint_cut(t, point, comment, under_way, desc, before_ids, at_delay=None):
    """A disk-only checkpoint of kc held at the test delay @point (@at_delay
    runs there), boxd killed and restarted: not acknowledged, not listed, no
    file left, kc running."""
    before = len(delays(point))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints', {'memory': False, 'comment': comment})
    t.ok(wait_delay(point, before) is not None, under_way)
    if at_delay is not None:
        at_delay()
    d.kill9()
    t.ok(call.status() != 201, 'the checkpoint cut by the kill was not acknowledged', call.result[:1])
    restart(desc)
    t.eq(ids(), before_ids, 'after the restart: the cut checkpoint is not listed')
    files_match(t, desc)
    t.eq(settled(t, desc), 'running', 'the sandbox runs on')


def restart_delayed(at, why, desc, cold=False):
    """boxd stopped and started again with the libvirt plugin's test delay
    at @at (BOX_LIBVIRT_TEST_DELAY_AT), and hot_pause_s=0 when @cold (a
    pause is cold at once); kc is woken when it is not running."""
    d.stop('boxd stops on SIGTERM (%s)' % why)
    d.extra_env['BOX_LIBVIRT_TEST_DELAY_AT'] = at
    if cold:
        d.config['plugin.libvirt']['hot_pause_s'] = '0'
    restart(desc)
    if settled(t, 'after the restart') != 'running':
        t.status(d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300), 200, 'wake kc')


def test_acknowledged(t):
    sh(d, KEY, 'kc', 'echo one > /tmp/mark; sync')
    with clock('memory checkpoint (with the test delay)'):
        r = d.request('POST', '/v1/sandboxes/kc/checkpoints', {'comment': 'acked'}, token=KEY, timeout=300)
    t.status(r, 201, 'memory checkpoint v1 acknowledged')
    t.eq(ids(), ['v1'], 'v1 listed')
    files_match(t, 'after v1')


def test_checkpoint_boxd_killed(t):
    before = len(delays('checkpoint'))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints', {'comment': 'killed'})
    t.ok(wait_delay('checkpoint', before) is not None, 'the checkpoint is under way (test delay)')
    t.ok(any('.tmp-' in n for n in os.listdir(CKPT_ROOT) if n.startswith(SID + '.')),
         'its temporary directory exists')
    d.kill9()
    t.ok(call.status() != 201, 'the checkpoint cut by the kill was not acknowledged', call.result[:1])
    restart('boxd killed during a checkpoint')
    t.eq(ids(), ['v1'], 'after the restart: v1 listed, the unacknowledged v2 not')
    files_match(t, 'boxd killed during a checkpoint')
    settled(t, 'boxd killed during a checkpoint')
    r = sh(d, KEY, 'kc', 'cat /tmp/mark; printenv E')
    t.eq((r.status, r.out), (200, 'one\nkc\n'), 'the sandbox runs commands with its files and env')


def test_checkpoint_qemu_killed(t):
    before = len(delays('checkpoint'))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints', {'comment': 'qemu killed'})
    dom = wait_delay('checkpoint', before)
    t.ok(dom is not None, 'the checkpoint is under way (test delay)')
    kill_qemu(t, dom, 'during a memory checkpoint')
    status = call.status()
    t.comment('the checkpoint answered %s' % (call.result[3][:200] if len(call.result) > 3 else status))
    t.ok(status != 201 or 'v3' in ids(), 'not acknowledged, or acknowledged and listed', status)
    t.ok(status in (201, 500, 503), 'the answer is a status, not a hang', status)
    settled(t, 'QEMU killed during a checkpoint')
    recorded = files_match(t, 'QEMU killed during a checkpoint')
    t.ok('v1' in recorded, 'v1 still listed', recorded)


def test_restore_boxd_killed(t):
    before = len(delays('restore'))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints/v1/restore')
    t.ok(wait_delay('restore', before) is not None, 'the restore is under way (test delay)')
    d.kill9()
    t.ok(call.status() != 200, 'the restore cut by the kill was not acknowledged', call.result[:1])
    restart('boxd killed during a restore')
    settled(t, 'boxd killed during a restore')
    recorded = files_match(t, 'boxd killed during a restore')
    t.ok('v1' in recorded, 'v1 still listed', recorded)
    restorable(t, 'after boxd was killed during a restore')


def test_restore_qemu_killed(t):
    before = len(delays('restore'))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints/v1/restore')
    t.ok(wait_delay('restore', before) is not None, 'the restore is under way (test delay)')
    kill_qemu(t, d.domain_of(SID), 'during a restore')
    status = call.status()
    t.ok(status in (200, 500, 503), 'the restore answers (%s)' % status, call.result[3][:300]
         if len(call.result) > 3 else call.result)
    st = settled(t, 'QEMU killed during a restore')
    recorded = files_match(t, 'QEMU killed during a restore')
    t.ok('v1' in recorded, 'v1 still listed', recorded)
    if status == 200 and st == 'running':
        m = sh(d, KEY, 'kc', 'cat /tmp/mark')
        t.eq((m.status, m.out.strip()), (200, 'one'), 'restored: the /tmp file of v1 is there')
    else:
        restorable(t, 'after the QEMU was killed during a restore')


def fork_left(t, name, dom, desc):
    """A fork cut midway: gone, or error with no VM (then deleted), or whole."""
    r = d.request('GET', '/v1/sandboxes/%s' % name, token=KEY)
    st = (r[2] or {}).get('state') if r[0] == 200 else r[0]
    t.comment('%s: the fork is %s' % (desc, st))
    t.ok(st in (404, 'error', 'running'), '%s: the fork is gone, in error or whole' % desc, st)
    if st == 'running':
        x = sh(d, KEY, name, 'cat /tmp/mark')
        t.eq((x.status, x.out.strip()), (200, 'one'), '%s: a whole fork runs with v1\'s files' % desc)
        return
    vm_id = (dom or 'box-')[4:]
    end = time.time() + 30
    while time.time() < end and (dom in vmtest.all_domains() or
                                 os.path.exists(os.path.join(vmtest.VM_DIR, 'vms', vm_id))):
        time.sleep(0.2)
    t.ok(dom not in vmtest.all_domains(), '%s: no domain left of the fork' % desc, dom)
    t.ok(not os.path.exists(os.path.join(vmtest.VM_DIR, 'vms', vm_id)),
         '%s: no VM directory left of the fork' % desc, vm_id)
    if st == 'error':
        t.status(d.request('DELETE', '/v1/sandboxes/%s' % name, token=KEY), 204,
                 '%s: the fork in error is deleted' % desc)


def test_fork_boxd_killed(t):
    before = len(delays('fork'))
    call = Call('POST', '/v1/sandboxes', {'name': 'kf', 'from': {'sandbox': 'kc', 'checkpoint': 'v1'}})
    dom = wait_delay('fork', before)
    t.ok(dom is not None, 'the fork is under way (test delay)', dom)
    d.kill9()
    t.ok(call.status() != 201, 'the fork cut by the kill was not acknowledged', call.result[:1])
    restart('boxd killed during a fork')
    fork_left(t, 'kf', dom, 'boxd killed during a fork')
    recorded = files_match(t, 'boxd killed during a fork')
    t.ok('v1' in recorded, 'v1 still listed', recorded)
    settled(t, 'boxd killed during a fork')


def test_fork_qemu_killed(t):
    before = len(delays('fork'))
    call = Call('POST', '/v1/sandboxes', {'name': 'kq', 'from': {'sandbox': 'kc', 'checkpoint': 'v1'}})
    dom = wait_delay('fork', before)
    t.ok(dom is not None, 'the fork is under way (test delay)', dom)
    kill_qemu(t, dom, 'the fork\'s, during the fork')
    status = call.status()
    t.comment('the fork answered %s' % (call.result[3][:300] if len(call.result) > 3 else status))
    t.ok(status in (201, 500, 503), 'the fork answers (%s)' % status)
    fork_left(t, 'kq', dom, 'QEMU killed during a fork')
    files_match(t, 'QEMU killed during a fork')


def test_materialise_boxd_killed(t):
    """boxd killed while a memory checkpoint is materialised in the
    background (box-libvirt-materialise.c): nothing lost, no helper domain
    or file left, the next start materialises it, and a restore of it maps
    its RAM file."""
    # only v1 is kept: the start with materialisations on queues every
    # memory checkpoint that is not materialised
    for cp in ids():
        if cp != 'v1':
            t.status(d.request('DELETE', '/v1/sandboxes/kc/checkpoints/%s' % cp, token=KEY), 204,
                     'delete %s (no materialisation of it)' % cp)
    d.stop('boxd stops on SIGTERM (to turn materialisations on)')
    d.config['plugin.libvirt']['checkpoint_materialise'] = 'true'
    restart('materialisations on')
    if settled(t, 'after the restart') != 'running':
        t.status(d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300), 200, 'wake kc')
    sh(d, KEY, 'kc', 'echo one > /tmp/mark; sync')
    r = d.request('POST', '/v1/sandboxes/kc/checkpoints', {'comment': 'materialise'}, token=KEY,
                  timeout=300)
    t.status(r, 201, 'a memory checkpoint to materialise')
    cp = (r[2] or {}).get('id')
    what = 'materialise of checkpoint %s' % cp
    dom = wait_delay(what, 0, timeout=600)
    t.ok(dom is not None, 'its materialisation is under way (test delay), helper %s' % dom)
    d.kill9()
    cdir = os.path.join(CKPT_ROOT, '%s.%s' % (SID, cp))
    restart('boxd killed while materialising')
    vm_id = (dom or 'box-')[4:]
    end = time.time() + 30
    while time.time() < end and (dom in vmtest.all_domains() or
                                 os.path.exists(os.path.join(vmtest.VM_DIR, 'vms', vm_id))):
        time.sleep(0.2)
    t.ok(dom not in vmtest.all_domains(), 'no helper domain left', dom)
    t.ok(not os.path.exists(os.path.join(vmtest.VM_DIR, 'vms', vm_id)), 'no helper directory left')
    recorded = files_match(t, 'boxd killed while materialising')
    t.ok(cp in recorded, '%s still listed' % cp, recorded)
    settled(t, 'boxd killed while materialising')
    # queued again at start (a second test delay of it), then committed
    manifest = os.path.join(cdir, 'manifest.json')
    end = time.time() + 600
    ram = False
    while time.time() < end and not ram:
        try:
            with open(manifest) as f:
                ram = json.load(f).get('ram') is True
        except (OSError, ValueError):
            pass
        time.sleep(0.5)
    t.ok(ram, '%s materialised after the restart' % cp)
    t.eq(sorted(n for n in os.listdir(cdir) if n.endswith('.tmp')), [], 'no temporary file in it')
    t.ok(os.path.getsize(os.path.join(cdir, 'devstate')) < (64 << 20), 'its devstate is devices only')
    # its fork made ready in advance (box-libvirt-ready.c), then boxd
    # killed: the restart leaves nothing of it
    line = 'sandbox %s: a fork of checkpoint %s is ready (VM ' % (SID, cp)
    end = time.time() + 300
    while time.time() < end and not d.log_lines(line):
        time.sleep(0.2)
    lines = d.log_lines(line)
    m = re.search(r'is ready \(VM ([^,)\s]+)', lines[-1]) if lines else None
    if t.ok(m is not None, 'a fork of %s was made ready in advance' % cp):
        ready_dom, ready_dir = 'box-' + m.group(1), os.path.join(vmtest.VM_DIR, 'vms', m.group(1))
        _rc, dom_state = vmtest.virsh('domstate', ready_dom)
        t.eq(dom_state.strip(), 'paused', 'the ready fork is paused (it never ran)')
        d.kill9()
        restart('boxd killed with a ready fork')
        end = time.time() + 30
        while time.time() < end and (ready_dom in vmtest.all_domains() or os.path.exists(ready_dir)):
            time.sleep(0.2)
        t.ok(ready_dom not in vmtest.all_domains(), 'no ready fork domain left', ready_dom)
        t.ok(not os.path.exists(ready_dir), 'no ready fork directory left')
        settled(t, 'boxd killed with a ready fork')
    sh(d, KEY, 'kc', 'rm /tmp/mark')
    restorable(t, 'the materialised checkpoint', cp)
    vm_ram = d.vm_path(SID, 'ram')
    t.ok(os.path.exists(vm_ram) and os.stat(vm_ram).st_ino == os.stat(os.path.join(cdir, 'ram')).st_ino,
         'the restored VM maps the checkpoint\'s RAM file (a link of it)')


def test_stopped_boxd_killed(t):
    """boxd killed while a memory checkpoint holds the guest's vCPUs
    stopped (QEMU's last pass done, the disk copy not yet): the restart
    finds a QEMU that ended a migration and waits; the sandbox must come
    back running, and later migrations out of that QEMU (a checkpoint, a
    cold pause) must work."""
    restart_delayed('checkpoint-stopped', 'to hold checkpoints with the guest stopped',
                    'test delay with the guest stopped, cold pauses', cold=True)
    before_ids = ids()
    before = len(delays('checkpoint-stopped'))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints', {'comment': 'stopped'})
    dom = wait_delay('checkpoint-stopped', before)
    t.ok(dom is not None, 'the checkpoint holds the guest stopped (test delay)', dom)
    _rc, dom_state = vmtest.virsh('domstate', dom or '-')
    t.eq(dom_state.strip(), 'paused', 'the guest\'s vCPUs are stopped (libvirt: paused)')
    d.kill9()
    t.ok(call.status() != 201, 'the checkpoint cut by the kill was not acknowledged', call.result[:1])
    d.extra_env.pop('BOX_LIBVIRT_TEST_DELAY_AT')
    restart('boxd killed with the guest stopped by a checkpoint')
    t.eq(ids(), before_ids, 'after the restart: the cut checkpoint is not listed')
    files_match(t, 'boxd killed with the guest stopped')
    t.eq(settled(t, 'boxd killed with the guest stopped'), 'running',
         'the sandbox runs again (it was running; nobody paused it)')
    r = sh(d, KEY, 'kc', 'cat /tmp/mark; printenv E')
    t.eq((r.status, r.out), (200, 'one\nkc\n'), 'it runs commands with its files and env')
    # the same QEMU migrates again: a memory checkpoint, then a cold pause
    sh(d, KEY, 'kc', 'echo two > /tmp/mark2')
    r = d.request('POST', '/v1/sandboxes/kc/checkpoints', {'comment': 'after'}, token=KEY, timeout=300)
    t.status(r, 201, 'a memory checkpoint of that QEMU works')
    after = (r[2] or {}).get('id')
    t.status(d.request('POST', '/v1/sandboxes/kc/pause', token=KEY, timeout=300), 200,
             'a cold pause of it (hot_pause_s=0) works')
    t.status(d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300), 200, 'and it wakes')
    r = sh(d, KEY, 'kc', 'cat /tmp/mark /tmp/mark2')
    t.eq((r.status, r.out), (200, 'one\ntwo\n'), 'with its /tmp files')
    r = d.request('POST', '/v1/sandboxes/kc/checkpoints/%s/restore' % after, token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running',
         'the checkpoint taken after the restart restores', r[3][:300])
    r = sh(d, KEY, 'kc', 'cat /tmp/mark2')
    t.eq((r.status, r.out), (200, 'two\n'), 'to its /tmp files')
    d.config['plugin.libvirt'].pop('hot_pause_s')


def test_restore_fails_after_qemu_ended(t):
    """A restore that fails after it ended the old QEMU (its state file
    removed while it waits at restore-ended: the rename into place fails)
    answers an error and leaves the sandbox on what the libvirt plugin
    has, a VM shut off on its disk: stopped, not a record saying running
    over no QEMU.  A wake boots it, and a restore works again."""
    restart_delayed('restore-ended', 'to delay restores after their QEMU ended',
                    'test delay after a restore ended the QEMU')
    v1 = d.request('GET', '/v1/sandboxes/kc/checkpoints/v1', token=KEY)[2] or {}
    ev = d.events(KEY, 'sandbox=' + SID)
    t.ok(ev.wait_connected(10) and ev.status == 200, 'event stream open')
    before = len(delays('restore-ended'))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints/v1/restore')
    dom = wait_delay('restore-ended', before)
    t.ok(dom is not None, 'the restore ended the old QEMU (test delay)', dom)
    state_tmp = d.vm_path(SID, 'cold.mig.tmp')
    t.ok(state_tmp is not None and os.path.exists(state_tmp), 'the checkpoint\'s state is linked as cold.mig.tmp',
         state_tmp)
    if state_tmp is not None and os.path.exists(state_tmp):
        os.unlink(state_tmp)
    status = call.status()
    t.ok(status in (500, 503), 'the restore fails (%s)' % status,
         call.result[3][:300] if len(call.result) > 3 else call.result)
    t.eq(state(d, KEY, 'kc'), 'stopped', 'the sandbox is stopped on its disk, not running over no QEMU')
    e = vmtest.wait_event(ev, SID, 'sandbox.stopped', 30)
    ev.close()
    at, made = vmtest.spec_time(vmtest.detail_of(e).get('snapshot_at')), vmtest.spec_time(v1.get('created_at'))
    t.ok(vmtest.reason_of(e) == 'vm_lost' and at is not None and made is not None and
         made - 2 <= at <= made + 60 and at < time.time() - 60,
         'sandbox.stopped vm_lost, detail.snapshot_at v1\'s time (its disk is in place), not now',
         (vmtest.detail_of(e), v1.get('created_at')))
    t.ok(d.log_lines('its VM changed under the failed operation') != [],
         'boxd logs that it put the record back to the VM')
    r = d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'a wake boots it', r[3][:300])
    r = sh(d, KEY, 'kc', 'true')
    t.eq(r.status, 200, 'it runs commands')
    d.extra_env.pop('BOX_LIBVIRT_TEST_DELAY_AT')
    d.stop('boxd stops on SIGTERM (the test delay goes)')
    restart('no test delay')
    restorable(t, 'after a restore failed with its QEMU ended')


def test_disk_snapshot_cut(t):
    """A disk-only checkpoint of a running VM is a disk snapshot
    (plugins/libvirt/box-libvirt-snapshot.c): QEMU writes to a new overlay
    from the snapshot on, which gets the name disk.qcow2 after.  boxd
    killed before the switch (disk-snapshot-made): the restart removes the
    new overlay.  Killed after it (disk-snapshot): the
    restart finishes the swap, the cut checkpoint is neither listed nor
    left on disk, and what the guest wrote before and after is kept through
    a cold pause and a wake (a new QEMU opens the chain by its names).
    Then the QEMU killed at the same point: the sandbox goes back to its
    disk, and a wake boots it with its files."""
    restart_delayed('disk-snapshot-made,disk-snapshot', 'to hold disk snapshots midway',
                    'test delays in a disk snapshot, cold pauses', cold=True)
    before_ids = ids()
    r = sh(d, KEY, 'kc', 'echo before > /var/tmp/before; sync; echo ok')
    t.eq((r.status, r.out), (200, 'ok\n'), 'a file written before the checkpoint')
    # killed before the switch: the new overlay goes, QEMU writes on to its disk
    layers = vm_files('layer-')
    t.ok(layers is not None, 'kc\'s VM directory is known', layers)
    disk_checkpoint_cut(t, 'disk-snapshot-made', 'cut early',
                        'a new overlay made, QEMU not yet switched to it (test delay)',
                        'boxd killed before a disk snapshot', before_ids)
    nxt = d.vm_path(SID, 'disk.qcow2.next')
    t.ok(d.log_lines('left by a disk-only checkpoint cut before its snapshot') != [] and
         nxt is not None and not os.path.exists(nxt),
         'the restart removed the new overlay QEMU never wrote to')
    t.eq(vm_files('layer-'), layers, 'and the layer it had linked: the VM\'s layers are as before')
    r = sh(d, KEY, 'kc', 'cat /var/tmp/before')
    t.eq((r.status, r.out), (200, 'before\n'), 'the guest reads its file')
    # killed after the switch: the restart finishes it
    disk_checkpoint_cut(t, 'disk-snapshot', 'cut', 'the disk snapshot is under way (test delay)',
                        'boxd killed in a disk snapshot', before_ids,
                        at_delay=lambda: t.ok(nxt is not None and os.path.exists(nxt),
                                              'QEMU writes to the new overlay, not yet named '
                                              'disk.qcow2', nxt))
    t.ok(d.log_lines('cut midway (its QEMU writes to it)') != [],
         'the restart finished the swap (QEMU wrote to the new overlay)')
    t.ok(nxt is not None and not os.path.exists(nxt), 'the new overlay has its name')
    r = sh(d, KEY, 'kc', 'echo after > /var/tmp/after; sync; echo ok')
    t.eq((r.status, r.out), (200, 'ok\n'), 'a file written after the restart')
    t.status(d.request('POST', '/v1/sandboxes/kc/pause', token=KEY, timeout=300), 200,
             'a cold pause (hot_pause_s=0)')
    t.status(d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300), 200, 'a wake')
    r = sh(d, KEY, 'kc', 'cat /var/tmp/before /var/tmp/after')
    t.eq((r.status, r.out), (200, 'before\nafter\n'), 'the new QEMU reads both files')

    before = len(delays('disk-snapshot'))
    call = Call('POST', '/v1/sandboxes/kc/checkpoints', {'memory': False, 'comment': 'qemu killed'})
    dom = wait_delay('disk-snapshot', before)
    t.ok(dom is not None, 'a disk snapshot under way (test delay)')
    kill_qemu(t, dom, 'during a disk snapshot')
    status = call.status()
    t.ok(status in (201, 500, 503), 'the checkpoint answers (%s)' % status,
         call.result[3][:300] if len(call.result) > 3 else call.result)
    made = (call.result[2] or {}).get('id') if status == 201 else None
    t.ok(status != 201 or made in ids(), 'not acknowledged, or acknowledged and listed', made)
    t.eq(settled(t, 'QEMU killed in a disk snapshot', allowed=('stopped',)), 'stopped',
         'the sandbox is back on its disk')
    files_match(t, 'QEMU killed in a disk snapshot')
    r = d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'a wake boots it', r[3][:300])
    r = sh(d, KEY, 'kc', 'cat /var/tmp/before /var/tmp/after')
    t.eq((r.status, r.out), (200, 'before\nafter\n'), 'with its files')
    d.extra_env.pop('BOX_LIBVIRT_TEST_DELAY_AT')
    d.config['plugin.libvirt'].pop('hot_pause_s')
    d.stop('boxd stops on SIGTERM (the test delay goes)')
    restart('no test delay')
    if settled(t, 'after the restart') != 'running':
        t.status(d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300), 200, 'wake kc')
    # the boot lost /tmp: its mark again, for the cases after
    t.eq(sh(d, KEY, 'kc', 'echo one > /tmp/mark').status, 200, '/tmp/mark written again')


def test_capacity(t):
    d.stop('boxd stops on SIGTERM (to change disk_reserve_mib)')
    d.config['plugin.libvirt']['disk_reserve_mib'] = str(2 ** 32 - 1)
    d.config['plugin.libvirt']['checkpoint_materialise'] = 'false'  # (it would not fit either)
    restart('disk_reserve_mib beyond the disk')
    if settled(t, 'after the restart') != 'running':
        t.status(d.request('POST', '/v1/sandboxes/kc/wake', token=KEY, timeout=300), 200, 'wake kc')
    before, files_before = ids(), on_disk(SID)
    for body in ({'comment': 'too big'}, {'memory': False}):
        r = d.request('POST', '/v1/sandboxes/kc/checkpoints', body, token=KEY, timeout=300)
        t.ok((r[0], ((r[2] or {}).get('error') or {}).get('code')) == (503, 'capacity'),
             'a checkpoint %r that does not fit: 503 capacity' % body, r[3][:300])
        t.ok(r[1].get('retry-after') is not None, 'with Retry-After', r[1])
    t.eq(ids(), before, 'no record written')
    t.eq(on_disk(SID), files_before, 'no checkpoint file written (not even a temporary)')
    r = d.request('POST', '/v1/sandboxes/kc/checkpoints/v1/restore', token=KEY, timeout=300)
    t.ok(r[0] == 503, 'a restore that does not fit (its auto-N first): 503', r[3][:300])
    r = d.request('POST', '/v1/sandboxes', {'name': 'kb', 'from': {'sandbox': 'kc', 'checkpoint': 'v1'}},
                  token=KEY, timeout=300)
    t.ok(r[0] == 503, 'a fork that does not fit: 503', r[3][:300])
    t.eq(d.request('GET', '/v1/sandboxes/kb', token=KEY)[0], 404, 'the refused fork is gone')
    t.eq(ids(), before, 'still no new record')
    t.eq(on_disk(SID), files_before, 'still no new file')
    t.eq(state(d, KEY, 'kc'), 'running', 'the sandbox runs on')
    r = sh(d, KEY, 'kc', 'cat /tmp/mark')
    t.eq((r.status, r.out.strip()), (200, 'one'), 'and runs commands')


def test_cleanup(t):
    vmtest.delete_all_and_stop(t, d, KEY)
    t.eq(on_disk(SID), [], 'the sandbox\'s checkpoints went with it')


if __name__ == '__main__':
    vmtest.main(t, clock, test_acknowledged, test_checkpoint_boxd_killed, test_checkpoint_qemu_killed,
                test_restore_boxd_killed, test_restore_qemu_killed, test_fork_boxd_killed,
                test_fork_qemu_killed, test_stopped_boxd_killed, test_materialise_boxd_killed,
                test_restore_fails_after_qemu_ended, test_disk_snapshot_cut, test_capacity,
                test_cleanup)
