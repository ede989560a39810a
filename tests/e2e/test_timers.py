#!/usr/bin/env python3
# e2e: deadlines fire on their own, on boxd's real clock (dummy hypervisor).
#
# The timer rules themselves (deadlines, the idle rule, holds and activity,
# restarts) are tested on the engine's manual clock in milliseconds:
# tests/engine/engine-timers-test.c and engine-reconcile-test.c.  This file
# only shows that the real clock drives them in boxd, through HTTP and the
# event stream, in ~5 s.  The one slow end-to-end check of real timers is
# tests/e2e-vm/test_timers.py (real VMs: the 30 s idle rule with a call in
# flight, a deadline pause during an exec).

import time

import boxtest
from boxtest import Boxd, Tap


def reason_of(e):
    return ((e or {}).get('data') or {}).get('detail', {}).get('reason') if e else None


def test_deadlines(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        ev = d.events(key)
        t.ok(ev.wait_connected(5) and ev.status == 200, 'event stream open')
        at = boxtest.future(4)
        sp = d.create_sandbox(key, {'name': 'dl-pause', 'deadline': {'at': at, 'action': 'pause'},
                                    'idle': {'timeout_s': 3600, 'action': 'none'}})
        ss = d.create_sandbox(key, {'name': 'dl-stop', 'deadline': {'at': at, 'action': 'stop'},
                                    'idle': {'timeout_s': 3600, 'action': 'none'}})
        sd = d.create_sandbox(key, {'name': 'dl-delete', 'deadline': {'at': at, 'action': 'delete'},
                                    'protected': True})
        later = d.create_sandbox(key, {'name': 'dl-later', 'deadline': {'at': boxtest.future(3600),
                                                                          'action': 'delete'}})
        cleared = d.create_sandbox(key, {'name': 'dl-cleared', 'deadline': {'at': at, 'action': 'delete'}})
        t.status(d.request('PATCH', '/v1/sandboxes/dl-cleared', {'deadline': None}, token=key), 200,
                 'clear one deadline')

        want = {sp['id']: 'sandbox.paused', ss['id']: 'sandbox.stopped', sd['id']: 'sandbox.deleted'}
        got = {}
        end = time.time() + 20
        while time.time() < end and len(got) < 3:
            e = ev.next(max(0.1, end - time.time()))
            if e is None:
                break
            sid = (e.get('data') or {}).get('sandbox')
            if sid in want and e.get('event') == want[sid]:
                got[sid] = e
        for sid, etype in want.items():
            e = got.get(sid)
            t.ok(e is not None, 'deadline fires: %s for %s' % (etype, sid))
            t.eq(reason_of(e), 'deadline', '%s reason deadline' % etype)
            if e is not None:
                fired = boxtest.parse_ts(e['data'].get('at'))
                t.ok(fired is not None and fired >= boxtest.parse_ts(at),
                     '%s not before the deadline' % etype, (e['data'].get('at'), at))

        r = d.request('GET', '/v1/sandboxes/dl-pause', token=key)
        t.eq((r[2] or {}).get('state'), 'paused', 'deadline pause: state paused')
        t.ok((r[2] or {}).get('deadline', 'x') is None, 'a fired deadline is cleared', (r[2] or {}).get('deadline'))
        r = d.request('GET', '/v1/sandboxes/dl-stop', token=key)
        t.eq((r[2] or {}).get('state'), 'stopped', 'deadline stop: state stopped')
        t.error(d.request('GET', '/v1/sandboxes/dl-delete', token=key), 404, 'not_found',
                'deadline delete removed the (protected) sandbox')
        r = d.request('GET', '/v1/sandboxes/dl-later', token=key)
        t.eq((r[2] or {}).get('state'), 'running', 'a later deadline has not fired')
        r = d.request('GET', '/v1/sandboxes/dl-cleared', token=key)
        t.eq((r[2] or {}).get('state'), 'running', 'a cleared deadline does not fire')
        t.status(d.request('POST', '/v1/sandboxes/dl-pause/wake', token=key), 200, 'wake after the deadline')
        time.sleep(1.5)
        r = d.request('GET', '/v1/sandboxes/dl-pause', token=key)
        t.eq((r[2] or {}).get('state'), 'running', 'a woken sandbox is not paused again by the old deadline')
        t.ok(later and cleared, 'fixtures')
        ev.close()
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_deadlines)
