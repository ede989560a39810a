#!/usr/bin/env python3
# e2e: deadlines and the idle rule fire on their own (dummy hypervisor).

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


def test_idle(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        ev = d.events(key)
        t.ok(ev.wait_connected(5) and ev.status == 200, 'event stream open')
        ip = d.create_sandbox(key, {'name': 'idle-pause', 'idle': {'timeout_s': 30, 'action': 'pause'}})
        ist = d.create_sandbox(key, {'name': 'idle-stop', 'idle': {'timeout_s': 30, 'action': 'stop'}})
        inone = d.create_sandbox(key, {'name': 'idle-none', 'idle': {'timeout_s': 30, 'action': 'none'}})
        slow = d.create_sandbox(key, {'name': 'idle-slow', 'idle': {'timeout_s': 3600, 'action': 'pause'}})
        t0 = time.time()
        want = {ip['id']: 'sandbox.paused', ist['id']: 'sandbox.stopped'}
        got = {}
        other = []
        end = t0 + 70
        while time.time() < end and len(got) < 2:
            e = ev.next(max(0.1, end - time.time()))
            if e is None:
                break
            sid = (e.get('data') or {}).get('sandbox')
            if sid in want and e.get('event') == want[sid]:
                got[sid] = (e, time.time() - t0)
            else:
                other.append(e)
        for sid, etype in want.items():
            e, after = got.get(sid, (None, None))
            t.ok(e is not None, 'idle rule fires: %s' % etype)
            t.eq(reason_of(e), 'idle', '%s reason idle' % etype)
            t.ok(after is not None and after >= 29, '%s not before 30 s of idleness' % etype, after)
        extra = other + ev.collect(2)
        t.eq([(x.get('event'), (x.get('data') or {}).get('sandbox')) for x in extra
              if (x.get('data') or {}).get('sandbox') in (inone['id'], slow['id'])
              and x.get('event') not in ('sandbox.created', 'sandbox.running')], [],
             'idle action none and a long timeout: no pause or stop event')
        states = {x['name']: x['state'] for x in d.request('GET', '/v1/sandboxes', token=key)[2]['sandboxes']}
        t.eq(states, {'idle-pause': 'paused', 'idle-stop': 'stopped', 'idle-none': 'running',
                      'idle-slow': 'running'}, 'states after the idle timeout')
        ev.close()
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_deadlines, test_idle)
