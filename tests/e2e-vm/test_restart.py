#!/usr/bin/env python3
# vm: boxd killed with SIGKILL and restarted on the same data dir, and QEMU
# processes killed under a running boxd: states right, nothing acknowledged
# lost.
#
#   1. kill -9 boxd with a running sandbox, a (hot) paused one and one whose
#      create was just acknowledged; the VMs live on; a new boxd adopts
#      them: running ones run commands with their processes, the paused one
#      is still paused and wakes with its processes.
#   2. the QEMU of a running sandbox killed (SIGKILL, by the pid libvirt
#      keeps for its domain).  The spec's "node lost" row: back to its
#      latest snapshot, here its disk (the libvirt plugin keeps a memory
#      snapshot only while a sandbox is paused): stopped, event
#      sandbox.stopped reason vm_lost with detail.snapshot_at; its next wake
#      boots that disk with its files (processes and /tmp are gone).
#   3. the QEMU of a hot-paused sandbox killed: its memory snapshot lived in
#      that QEMU, so what is left is its disk as of the pause: stopped,
#      reason vm_lost, detail.snapshot_at the pause's time; the wake boots
#      it with its files.
#   4. the same kill -9 of boxd with a cold pause (hot_pause_s=0: the
#      snapshot is a file and no QEMU runs), and a QEMU killed while boxd
#      is down: the reconciliation at start makes it stopped, reason
#      vm_lost, and it boots with its files.

import os
import signal
import time

import vmtest
from vmtest import VmBoxd, Tap, run, sh, state, wait_event, reason_of, detail_of

MARK = 'sleep 2727'
d_pids = {}     # sandbox name -> pid of its background process
t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))


def seed(sandbox, tag):
    """A background process, a /tmp file and a disk file (synced)."""
    r = sh(d, KEY, sandbox, 'setsid sh -c "exec %s" </dev/null >/dev/null 2>&1 & '
                            'echo %s > /tmp/e2e-tmp; echo %s > /home/box/e2e-disk; sync; sleep 0.3; '
                            'pgrep -f "^%s$"' % (MARK, tag, tag, MARK))
    return r.out.strip() if r.status == 200 and r.exit_code == 0 else None


def facts(sandbox, timeout=120):
    r = sh(d, KEY, sandbox, 'pgrep -f "^%s$" || echo; cat /tmp/e2e-tmp 2>/dev/null || echo NO-TMP; '
                            'cat /home/box/e2e-disk 2>/dev/null || echo NO-DISK' % MARK, timeout=timeout)
    lines = r.out.splitlines() + [''] * 3
    return {'status': r.status, 'pid': lines[0], 'tmp': lines[1], 'disk': lines[2]}


def kill_qemu(t, sandbox_id, desc):
    dom = d.domain_of(sandbox_id)
    pid = vmtest.qemu_pid(dom or '')
    cmdline = ''
    if pid is not None:
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                cmdline = f.read().decode('utf-8', 'replace')
        except OSError:
            pass
    ok = t.ok(pid is not None and ('guest=%s' % dom) in cmdline,
              '%s: the QEMU of domain %s found (pid %s)' % (desc, dom, pid))
    if ok:
        os.kill(pid, signal.SIGKILL)
        end = time.time() + 15
        while time.time() < end and os.path.exists('/proc/%d' % pid):
            time.sleep(0.05)
        t.ok(not os.path.exists('/proc/%d' % pid), '%s: QEMU killed with SIGKILL' % desc)
    return dom


def test_boxd_kill9(t):
    with clock('create three sandboxes'):
        for name in ('runner', 'sleeper', 'lost-run'):
            d.create_sandbox(KEY, {'name': name, 'env': {'E': name}})
    pids = {name: seed(name, name) for name in ('runner', 'sleeper', 'lost-run')}
    t.ok(all(p and p.isdigit() for p in pids.values()), 'each runs a background process', pids)
    d_pids.update(pids)
    t.status(d.request('POST', '/v1/sandboxes/sleeper/pause', token=KEY), 200, 'pause sleeper')
    t.status(d.request('PATCH', '/v1/sandboxes/runner', {'labels': {'acked': 'yes'}}, token=KEY), 200,
             'PATCH runner\'s labels')
    late = d.create_sandbox(KEY, {'name': 'late'})
    t.eq(late.get('state'), 'running', 'a create acknowledged just before the kill')
    doms = {n: d.domain_of(d.request('GET', '/v1/sandboxes/%s' % n, token=KEY)[2]['id'])
            for n in ('runner', 'sleeper', 'lost-run', 'late')}
    d.kill9()
    t.ok(True, 'boxd killed with SIGKILL')
    running = vmtest.running_domains()
    t.ok(all(doms[n] in running for n in doms), 'the VMs live on without boxd', (doms, running))

    with clock('boxd restart after SIGKILL'):
        d.start()
    states = {x['name']: x['state'] for x in d.request('GET', '/v1/sandboxes', token=KEY)[2]['sandboxes']}
    t.eq(states, {'runner': 'running', 'sleeper': 'paused', 'lost-run': 'running', 'late': 'running'},
         'states after the restart')
    r = d.request('GET', '/v1/sandboxes/runner', token=KEY)
    t.eq((r[2] or {}).get('labels'), {'acked': 'yes'}, 'the acknowledged PATCH is kept')
    for name in ('runner', 'lost-run'):
        with clock('first exec/run in an adopted VM'):
            f = facts(name)
        t.eq(f, {'status': 200, 'pid': pids[name], 'tmp': name, 'disk': name},
             '%s: adopted; exec/run works, same process, /tmp and disk files' % name)
    r = run(d, KEY, 'late', ['hostname'])
    t.eq((r.status, r.out), (200, 'late\n'), 'the sandbox created just before the kill runs commands')
    t.eq(state(d, KEY, 'sleeper'), 'paused', 'sleeper still paused (nothing woke it)')
    with clock('wake of an adopted paused VM'):
        r = d.request('POST', '/v1/sandboxes/sleeper/wake', token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake sleeper: 200 running', r[3][:300])
    f = facts('sleeper')
    t.eq(f, {'status': 200, 'pid': pids['sleeper'], 'tmp': 'sleeper', 'disk': 'sleeper'},
         'sleeper wakes with its process and files')
    r = run(d, KEY, 'runner', ['printenv', 'E'])
    t.eq(r.out, 'runner\n', 'the env is still there after the restart')


def test_qemu_killed_running(t):
    ev = d.events(KEY)
    t.ok(ev.wait_connected(5) and ev.status == 200, 'event stream open')
    sid = d.request('GET', '/v1/sandboxes/runner', token=KEY)[2]['id']
    kill_qemu(t, sid, 'running sandbox')
    e = ev.wait_for(lambda x: (x.get('data') or {}).get('sandbox') == sid
                    and x.get('event') in ('sandbox.error', 'sandbox.paused', 'sandbox.stopped'), 20)
    st = state(d, KEY, 'runner')
    t.comment('after the kill: state %s, event %s %r' % (st, (e or {}).get('event'), detail_of(e)))
    t.ok(e is not None, 'an event tells the sandbox lost its VM')
    t.eq(((e or {}).get('event'), reason_of(e), st), ('sandbox.stopped', 'vm_lost', 'stopped'),
         'back to its disk: stopped, event sandbox.stopped reason vm_lost')
    at = vmtest.spec_time(detail_of(e).get('snapshot_at'))
    t.ok(at is not None and vmtest.T0 - 5 <= at <= time.time() + 5, 'detail.snapshot_at is a time of this run',
         detail_of(e))
    with clock('wake of a lost VM (boot on its disk)'):
        r = d.request('POST', '/v1/sandboxes/runner/wake', token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake runner: 200 running', r[3][:300])
    f = facts('runner', timeout=300)
    t.eq(f, {'status': 200, 'pid': '', 'tmp': 'NO-TMP', 'disk': 'runner'},
         'booted on its disk: the disk file is there; processes and /tmp are gone')
    r = run(d, KEY, 'runner', ['hostname'])
    t.eq((r.status, r.out), (200, 'runner\n'), 'the booted sandbox runs commands')
    ev.close()


def test_qemu_killed_paused(t):
    sid = d.request('GET', '/v1/sandboxes/sleeper', token=KEY)[2]['id']
    paused_at = time.time()
    t.status(d.request('POST', '/v1/sandboxes/sleeper/pause', token=KEY), 200, 'pause sleeper (acknowledged)')
    ev = d.events(KEY)
    ev.wait_connected(5)
    kill_qemu(t, sid, 'hot-paused sandbox')
    e = ev.wait_for(lambda x: (x.get('data') or {}).get('sandbox') == sid
                    and x.get('event') in ('sandbox.error', 'sandbox.paused', 'sandbox.stopped'), 20)
    st = state(d, KEY, 'sleeper')
    t.comment('after the kill: state %s, event %s %r' % (st, (e or {}).get('event'), detail_of(e)))
    # its memory snapshot lived in the QEMU that was killed: its disk as of
    # the pause is what is left
    t.eq(((e or {}).get('event'), reason_of(e), st), ('sandbox.stopped', 'vm_lost', 'stopped'),
         'a hot-paused sandbox whose QEMU was killed: back to its disk, stopped, reason vm_lost')
    at = vmtest.spec_time(detail_of(e).get('snapshot_at'))
    t.ok(at is not None and paused_at - 2 <= at <= time.time() + 1,
         'detail.snapshot_at is the time of the pause', (detail_of(e), paused_at))
    r = d.request('POST', '/v1/sandboxes/sleeper/wake', token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake sleeper: 200 running (a boot)',
         r[3][:300])
    f = facts('sleeper', timeout=300)
    t.eq(f, {'status': 200, 'pid': '', 'tmp': 'NO-TMP', 'disk': 'sleeper'},
         'booted on its disk: the disk file is kept; processes and /tmp are gone')
    ev.close()


def test_cold(t):
    d.stop('boxd stops on SIGTERM (to change hot_pause_s)')
    d.config['plugin.libvirt']['hot_pause_s'] = '0'
    with clock('boxd restart (hot_pause_s=0)'):
        d.start()
    t.eq(d.log_lines('hot pause 0 s')[:1] != [], True, 'boxd runs with cold pauses only')
    s = d.create_sandbox(KEY, {'name': 'coldie'})
    pid = seed('coldie', 'coldie')
    t.ok(pid is not None and pid.isdigit(), 'coldie runs a background process')
    dom = d.domain_of(s['id'])
    running = vmtest.qemu_pid(dom)
    with clock('pause (cold: snapshot file, QEMU ends)'):
        r = d.request('POST', '/v1/sandboxes/coldie/pause', token=KEY, timeout=300)
    t.status(r, 200, 'pause coldie')
    t.ok(running is not None and not os.path.exists('/proc/%d' % running),
         'the QEMU that ran coldie ended', running)
    t.ok(os.path.exists(d.vm_path(s['id'], 'cold.mig')), 'its snapshot is a file')
    # a standby domain waits for its wake (box-libvirt-standby.c): QEMU's
    # own memory, not the guest's
    end = time.time() + 120
    while time.time() < end and not d.log_lines(s['id'], 'standby domain for its cold wake'):
        time.sleep(0.2)
    standby = vmtest.qemu_pid(dom)
    t.ok(standby is not None and standby != running and dom in vmtest.running_domains(),
         'a standby QEMU waits for the wake of coldie', standby)
    rss = d.qemu_rss_mib(s['id'])
    t.ok(rss is not None and rss < 100, 'the standby holds no guest RAM (RSS %s MiB)' % rss)

    standbys = len(d.log_lines(s['id'], 'standby domain for its cold wake'))
    lost = d.request('GET', '/v1/sandboxes/lost-run', token=KEY)[2]
    t.eq(lost.get('state'), 'running', 'lost-run is running')
    d.kill9()
    t.ok(True, 'boxd killed with SIGKILL')
    kill_qemu(t, lost['id'], 'lost-run, while boxd is down')
    with clock('boxd restart after SIGKILL'):
        d.start()
    t.eq(state(d, KEY, 'coldie'), 'paused', 'coldie still paused after the restart')
    # the restart ended the standby and made another
    end = time.time() + 120
    while time.time() < end and vmtest.qemu_pid(dom) in (None, standby):
        time.sleep(0.2)
    again = vmtest.qemu_pid(dom)
    t.ok(again is not None and again != standby and not os.path.exists('/proc/%d' % standby),
         'the restart ended the standby of coldie and made another', again)
    end = time.time() + 120
    while time.time() < end and len(d.log_lines(s['id'], 'standby domain for its cold wake')) <= standbys:
        time.sleep(0.2)
    with clock('wake (cold)'):
        r = d.request('POST', '/v1/sandboxes/coldie/wake', token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake coldie: 200 running', r[3][:300])
    t.eq(vmtest.qemu_pid(dom), again, 'coldie woke in its standby QEMU')
    f = facts('coldie')
    t.eq(f, {'status': 200, 'pid': pid, 'tmp': 'coldie', 'disk': 'coldie'},
         'coldie wakes from its cold snapshot with its process and files')

    st = state(d, KEY, 'lost-run')
    t.comment('lost-run after the restart: %s' % st)
    t.eq(st, 'stopped', 'a running sandbox whose VM vanished while boxd was down: back to its disk, '
                        'stopped (reconciled at start)')
    t.ok(d.log_lines(lost['id'], 'reconcil') != [], 'boxd logs the reconciliation',
         '\n'.join(d.log_lines(lost['id'])))
    f = facts('lost-run', timeout=300)
    t.eq(f, {'status': 200, 'pid': '', 'tmp': 'NO-TMP', 'disk': 'lost-run'},
         'exec/run boots lost-run on its disk: the disk file is there')


def test_cleanup(t):
    vmtest.delete_all_and_stop(t, d, KEY)


if __name__ == '__main__':
    vmtest.main(t, clock, test_boxd_kill9, test_qemu_killed_running, test_qemu_killed_paused, test_cold,
                test_cleanup)
