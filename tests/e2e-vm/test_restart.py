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
#      keeps for its domain).  The libvirt plugin keeps a snapshot only
#      while a sandbox is paused, so this one has none: the spec wants
#      `error` with sandbox.error reason reconciled, or (its "node lost" row)
#      paused/stopped with reason vm_lost and detail.snapshot_at.  Its disk
#      must survive: nothing acknowledged is lost.
#   3. the QEMU of a (hot) paused sandbox killed: the pause was acknowledged,
#      so its wake must bring its processes back, or the loss must show.
#   4. the same kill -9 of boxd with a cold pause (hot_pause_s=0: the
#      snapshot is a file and no QEMU runs), and a QEMU killed while boxd
#      is down (reconciliation at start).

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
    got = ((e or {}).get('event'), reason_of(e), st)
    spec_ok = (got == ('sandbox.error', 'reconciled', 'error') or
               (got[0] in ('sandbox.paused', 'sandbox.stopped') and got[1] == 'vm_lost'
                and got[2] == got[0].split('.')[1] and 'snapshot_at' in detail_of(e)))
    t.ok(spec_ok, 'no snapshot: error with reason reconciled, or paused/stopped with reason vm_lost '
                  'and detail.snapshot_at', 'got event %s reason %s, state %s, detail %r'
         % (got[0], got[1], got[2], detail_of(e)))
    if st in ('stopped', 'paused'):
        f = facts('runner', timeout=300)
        t.eq((f['status'], f['disk']), (200, 'runner'), 'woken again by exec/run: the disk file is there')
    else:
        r = run(d, KEY, 'runner', ['true'])
        t.comment('exec/run in the sandbox in error: %d %s' % (r.status, r.raw[:200]))
    ev.close()


def test_qemu_killed_paused(t):
    sid = d.request('GET', '/v1/sandboxes/sleeper', token=KEY)[2]['id']
    t.status(d.request('POST', '/v1/sandboxes/sleeper/pause', token=KEY), 200, 'pause sleeper (acknowledged)')
    ev = d.events(KEY)
    ev.wait_connected(5)
    kill_qemu(t, sid, 'paused sandbox')
    events = [x for x in ev.collect(3) if (x.get('data') or {}).get('sandbox') == sid]
    st = state(d, KEY, 'sleeper')
    t.comment('after the kill: state %s, events %r' % (st, [(x.get('event'), detail_of(x)) for x in events]))
    if st == 'error':
        # the spec's way: its memory snapshot is gone, so error (reconciled)
        t.eq([(x.get('event'), reason_of(x)) for x in events], [('sandbox.error', 'reconciled')],
             'a paused sandbox whose QEMU (its hot snapshot) was killed: error, event sandbox.error '
             'reason reconciled')
        t.error(d.request('POST', '/v1/sandboxes/sleeper/wake', token=KEY), 409, 'conflict',
                'wake of a sandbox in error')
        return
    r = d.request('POST', '/v1/sandboxes/sleeper/wake', token=KEY, timeout=300)
    t.comment('wake: %d %s' % (r[0], r[3][:200]))
    f = facts('sleeper', timeout=300)
    shows = st != 'paused' or any(x.get('event') in ('sandbox.stopped', 'sandbox.error') for x in events)
    t.ok(f['pid'] == d_pids.get('sleeper') or shows,
         'a paused sandbox whose QEMU was killed: its wake brings the processes back, or the loss shows '
         '(state and event)', 'state %s, events %r, after the wake: %r' % (st, events, f))
    t.eq(f['disk'], 'sleeper', 'its disk file is kept')
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
    with clock('pause (cold: snapshot file, QEMU ends)'):
        r = d.request('POST', '/v1/sandboxes/coldie/pause', token=KEY, timeout=300)
    t.status(r, 200, 'pause coldie')
    dom = d.domain_of(s['id'])
    t.ok(dom not in vmtest.running_domains(), 'no QEMU runs for a cold-paused sandbox', dom)
    t.ok(os.path.exists(d.vm_path(s['id'], 'cold.mig')), 'its snapshot is a file')

    lost = d.request('GET', '/v1/sandboxes/lost-run', token=KEY)[2]
    t.eq(lost.get('state'), 'running', 'lost-run is running')
    d.kill9()
    t.ok(True, 'boxd killed with SIGKILL')
    kill_qemu(t, lost['id'], 'lost-run, while boxd is down')
    with clock('boxd restart after SIGKILL'):
        d.start()
    t.eq(state(d, KEY, 'coldie'), 'paused', 'coldie still paused after the restart')
    with clock('wake (cold)'):
        r = d.request('POST', '/v1/sandboxes/coldie/wake', token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake coldie: 200 running', r[3][:300])
    f = facts('coldie')
    t.eq(f, {'status': 200, 'pid': pid, 'tmp': 'coldie', 'disk': 'coldie'},
         'coldie wakes from its cold snapshot with its process and files')

    st = state(d, KEY, 'lost-run')
    t.comment('lost-run after the restart: %s' % st)
    t.eq(st, 'error', 'a running sandbox whose VM vanished while boxd was down, without a snapshot: '
                      'error (reconciled)')
    t.ok(d.log_lines(lost['id'], 'reconcil') != [], 'boxd logs the reconciliation',
         '\n'.join(d.log_lines(lost['id'])))


def test_cleanup(t):
    r = d.request('GET', '/v1/sandboxes', token=KEY)
    for s in (r[2] or {}).get('sandboxes', []):
        t.status(d.request('DELETE', '/v1/sandboxes/%s' % s['name'], token=KEY), 204, 'delete %s' % s['name'])
    d.stop()
    t.eq(d.leftovers(), [], 'no VM, VM dir or tap left')


if __name__ == '__main__':
    vmtest.main(t, clock, test_boxd_kill9, test_qemu_killed_running, test_qemu_killed_paused, test_cold,
                test_cleanup)
