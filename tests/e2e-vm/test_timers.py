#!/usr/bin/env python3
# vm: deadlines and the idle rule on real microVMs.  All sandboxes start
# together so the whole file waits for the idle timeout (30 s, the minimum)
# once:
#   dl-pause   deadline pause in 20 s                 -> paused, reason deadline
#   dl-busy    the same, with an exec/run in flight   -> paused at its time all the same;
#                                                         the call ends (at the latest once woken)
#   idle-stop  idle 30 s, action stop, left alone     -> stopped, reason idle
#   idle-pause idle 30 s, action pause, left alone    -> paused, reason idle
#   idle-busy  idle 30 s, action stop, `sleep 40` exec/run started at 0 s
#                                                      -> the call ends 200, still running

import threading
import time


import vmtest
from vmtest import boxtest
from vmtest import VmBoxd, Tap, run, sh, state, reason_of

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
NONE = {'timeout_s': 3600, 'action': 'none'}


def bg_run(cmd, sandbox, **kw):
    """exec/run in a thread; returns (thread, result holder)."""
    out = {}

    def go():
        out['start'] = time.time()
        try:
            out['run'] = run(d, KEY, sandbox, cmd, timeout=150, **kw)
        except Exception as e:   # noqa: BLE001 - reported by the test
            out['error'] = repr(e)
        out['end'] = time.time()

    th = threading.Thread(target=go, daemon=True)
    th.start()
    return th, out


def test_timers(t):
    ev = d.events(KEY)
    t.ok(ev.wait_connected(5) and ev.status == 200, 'event stream open')
    d.create_sandbox(KEY, {'name': 'warm-up'})   # the template snapshot, if it has to be made
    t.status(d.request('DELETE', '/v1/sandboxes/warm-up', token=KEY), 204, 'warm-up sandbox deleted')

    # idle-busy first, its call started at once ("at 0 s"); the deadline
    # sandboxes last, their deadline 20 s after the first of them (two creates
    # and a call take 5 s each at a load of 14), dl-busy's call (25 s) started at once so that it is in flight when the deadline fires
    t0 = time.time()
    ids = {}
    created = {}

    def create(name, body):
        body['name'] = name
        ids[name] = d.create_sandbox(KEY, body)['id']
        created[name] = time.time()

    create('idle-busy', {'idle': {'timeout_s': 30, 'action': 'stop'}})
    busy_idle, busy_idle_out = bg_run(['sleep', '40'], 'idle-busy')
    create('idle-stop', {'idle': {'timeout_s': 30, 'action': 'stop'}})
    create('idle-pause', {'idle': {'timeout_s': 30, 'action': 'pause'}})
    at = boxtest.future(20)
    at_dt = boxtest.parse_ts(at)
    create('dl-busy', {'deadline': {'at': at, 'action': 'pause'}, 'idle': NONE})
    busy_dl, busy_dl_out = bg_run(['sh', '-c', 'sleep 25; echo done'], 'dl-busy')
    create('dl-pause', {'deadline': {'at': at, 'action': 'pause'}, 'idle': NONE})
    clock.add('five creates', time.time() - t0)
    names = {v: k for k, v in ids.items()}
    ok_proc = sh(d, KEY, 'dl-pause', 'setsid sh -c "exec sleep 1818" </dev/null >/dev/null 2>&1 & echo ok')
    t.eq((ok_proc.status, ok_proc.out), (200, 'ok\n'), 'a background process in dl-pause')
    t.ok(time.time() < at_dt.timestamp() - 1 and busy_dl.is_alive(),
         'set-up done before the deadline, dl-busy\'s call in flight')

    want = {'dl-pause': 'sandbox.paused', 'dl-busy': 'sandbox.paused', 'idle-stop': 'sandbox.stopped',
            'idle-pause': 'sandbox.paused'}
    got = {}
    seen = []
    end = t0 + 75
    while time.time() < end and (len(got) < len(want) or busy_idle.is_alive()):
        e = ev.next(0.5)
        if e is None:
            continue
        sid = (e.get('data') or {}).get('sandbox')
        seen.append((time.time() - t0, names.get(sid, sid), e.get('event'), reason_of(e)))
        name = names.get(sid)
        if name in want and e.get('event') == want[name] and name not in got:
            got[name] = (e, time.time())
    busy_idle.join(5)
    busy_dl.join(5)
    for when, name, etype, reason in seen:
        t.comment('event at +%.1f s: %s %s reason %s' % (when, name, etype, reason))

    for name in ('dl-pause', 'dl-busy'):
        e, when = got.get(name, (None, None))
        t.ok(e is not None, 'deadline pause fires: %s' % name)
        t.eq(reason_of(e), 'deadline', '%s: sandbox.paused reason deadline' % name)
        if e is not None:
            fired = boxtest.parse_ts(e['data'].get('at'))
            late = (fired - at_dt).total_seconds() if fired is not None else None
            t.ok(late is not None and 0 <= late <= 5, '%s: paused at its deadline (%.1f s after it)'
                 % (name, late if late is not None else -1), (e['data'].get('at'), at))
            clock.add('%s: deadline to event' % name, when - at_dt.timestamp())
    # The spec does not say what a one-shot call in flight answers when its
    # sandbox is paused under it; it must end, though: at once, or (its
    # command frozen in the snapshot) once the sandbox is woken.
    if busy_dl.is_alive():
        t.comment('the exec/run in dl-busy has no answer %.0f s after the deadline pause; waking dl-busy'
                  % (time.time() - at_dt.timestamp()))
        r = d.request('POST', '/v1/sandboxes/dl-busy/wake', token=KEY)
        t.status(r, 200, 'wake dl-busy')
        busy_dl.join(30)
    r = busy_dl_out.get('run')
    t.comment('dl-busy exec/run answer: %s' % (r.describe() if r is not None else busy_dl_out.get('error')))
    t.ok(r is not None and (r.status == 200 and r.exit_code == 0 and r.out == 'done\n' or
                            (r.status >= 400 and isinstance(r.body, dict) and 'error' in r.body)),
         'the exec/run caught by the deadline pause ends (200 with its output, or an error answer)',
         r.describe() if r is not None else busy_dl_out.get('error'))
    t.eq(state(d, KEY, 'dl-pause'), 'paused', 'dl-pause: state paused')

    for name, etype in (('idle-stop', 'sandbox.stopped'), ('idle-pause', 'sandbox.paused')):
        e, when = got.get(name, (None, None))
        t.ok(e is not None, 'idle rule fires: %s %s' % (name, etype))
        t.eq(reason_of(e), 'idle', '%s: %s reason idle' % (name, etype))
        if when is not None:
            idle = when - created[name]
            t.ok(idle >= 29.5, '%s: not before 30 s of idleness (%.1f s after its create answered)' % (name, idle))
            t.ok(idle <= 45, '%s: within 15 s after the idle timeout (%.1f s)' % (name, idle))
            clock.add('%s: idle time to event' % name, idle)
    t.eq(state(d, KEY, 'idle-stop'), 'stopped', 'idle-stop: state stopped')
    t.eq(state(d, KEY, 'idle-pause'), 'paused', 'idle-pause: state paused')

    r = busy_idle_out.get('run')
    t.ok(r is not None and r.status == 200 and r.exit_code == 0 and r.timed_out is False,
         'sleep 40 exec/run in idle-busy completes 200 exit 0',
         r.describe() if r is not None else busy_idle_out.get('error'))
    t.ok(r is not None and r.seconds >= 39, 'it really ran 40 s (%.1f s)' % (r.seconds if r else -1))
    t.eq(state(d, KEY, 'idle-busy'), 'running', 'idle-busy still running at the end of the call')
    t.eq([x for x in seen if x[1] == 'idle-busy' and x[2] in ('sandbox.paused', 'sandbox.stopped')], [],
         'no pause or stop event for idle-busy while its call ran')

    # the sleepers wake with their state
    r = run(d, KEY, 'dl-pause', ['pgrep', '-f', '^sleep 1818$'])
    t.eq((r.status, r.exit_code), (200, 0), 'dl-pause woken by exec/run: its process is still there')
    r = d.request('GET', '/v1/sandboxes/dl-pause', token=KEY)
    t.ok((r[2] or {}).get('deadline', 'x') is None, 'a fired deadline is cleared', (r[2] or {}).get('deadline'))
    r = run(d, KEY, 'idle-stop', ['true'], timeout=300)
    t.eq((r.status, r.exit_code), (200, 0), 'idle-stop woken by exec/run')
    ev.close()
    for name in list(ids):
        t.status(d.request('DELETE', '/v1/sandboxes/%s' % name, token=KEY), 204, 'delete %s' % name)
    d.stop()


if __name__ == '__main__':
    vmtest.main(t, clock, test_timers)
