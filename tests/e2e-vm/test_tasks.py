#!/usr/bin/env python3
# vm: tasks on a real microVM (one sandbox, idle timeout 30 s, action pause):
# the in-sandbox socket's /tasks routes from inside the guest (curl
# --unix-socket as the user box, no key); a task declared from inside keeps
# the sandbox running well past its idle timeout, and once the task is
# deleted the idle rule pauses it; the task routes neither wake it nor
# count as activity (64 live tasks then 409 on the paused sandbox); expiry;
# a stop ends every task.

import time

import vmtest
from vmtest import VmBoxd, Tap, state, reason_of

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('tasks'))
IDLE_S = 30
TASKS = '/v1/sandboxes/tk/tasks'


def inside(args):
    """curl on /run/box/api.sock in the guest as box: (status, json or text)."""
    return vmtest.insandbox_api(d, KEY, 'tk', args)


def names(resp):
    return [x.get('name') for x in ((resp[2] or {}).get('tasks') or [])]


def test_socket_and_idle(t):
    ev = d.events(KEY)
    t.ok(ev.wait_connected(5) and ev.status == 200, 'event stream open')
    with clock('create (may build the template snapshot)'):
        sb = d.create_sandbox(KEY, {'name': 'tk', 'idle': {'timeout_s': IDLE_S, 'action': 'pause'}})

    status, body = inside('-X PUT -d \'{"expire_s": 600}\' "http://x/tasks/job%2F1"')
    t.eq((status, body if status != 200 else None), (200, None), 'PUT /tasks/job%2F1 from inside: 200')
    t.ok(isinstance(body, dict) and sorted(body) == ['expires_at', 'name', 'started_at']
         and body.get('name') == 'job/1', 'the Task, its name decoded', body)
    status, body = inside('"http://x/tasks"')
    t.eq((status, [x.get('name') for x in (body or {}).get('tasks', [])]), (200, ['job/1']),
         'GET /tasks from inside lists it')
    status, body = inside('"http://x/tasks/job%2F1"')
    t.eq((status, (body or {}).get('name')), (200, 'job/1'), 'GET /tasks/job%2F1 from inside')
    status, body = inside('-X PUT -d \'{"expire_s": 0}\' "http://x/tasks/other"')
    t.eq((status, ((body or {}).get('error') or {}).get('code')), (400, 'invalid'),
         'expire_s 0 from inside: 400 invalid')
    status, body = inside('-X PUT "http://x/tasks/"')
    t.eq((status, ((body or {}).get('error') or {}).get('code')), (400, 'invalid'),
         'the empty name from inside: 400 invalid')
    status, body = inside('-X DELETE "http://x/tasks/nope"')
    t.eq((status, ((body or {}).get('error') or {}).get('code')), (404, 'not_found'),
         'DELETE of an absent task from inside: 404')
    t.eq(names(d.request('GET', TASKS, token=KEY)), ['job/1'], 'the API sees the task made inside')
    last_use = time.time()   # the exec/run above was the last activity

    # the task holds it: still running well past the idle timeout
    time.sleep(max(0, IDLE_S + 15 - (time.time() - last_use)))
    t.eq(state(d, KEY, 'tk'), 'running', 'a live task keeps it running %d s after its last use '
         '(idle timeout %d s)' % (int(time.time() - last_use), IDLE_S))
    paused_early = ev.wait_for(lambda e: e.get('event') == 'sandbox.paused'
                               and (e.get('data') or {}).get('sandbox') == sb['id'], 0.1)
    t.ok(paused_early is None, 'no sandbox.paused while the task is live', paused_early)

    # deleted from outside (no wake, no activity): paused at the next ticks
    deleted_at = time.time()
    t.status(d.request('DELETE', TASKS + '/job%2F1', token=KEY), 204, 'DELETE the task')
    e = vmtest.wait_event(ev, sb['id'], 'sandbox.paused', 60)
    t.ok(e is not None, 'the sandbox pauses once its task is gone')
    t.eq(reason_of(e), 'idle', 'sandbox.paused reason idle')
    clock.add('task deleted to sandbox.paused', time.time() - deleted_at)
    t.ok(time.time() - deleted_at < 30, 'paused soon after the delete, not a full timeout later '
         '(%.1f s)' % (time.time() - deleted_at))
    ev.close()


def test_records_do_not_wake(t):
    t.eq(state(d, KEY, 'tk'), 'paused', 'tk is paused')
    for i in range(64):
        r = d.request('PUT', TASKS + '/n%d' % i, body={'expire_s': 120}, token=KEY)
        if r[0] != 200:
            t.status(r, 200, 'PUT task n%d' % i)
            break
    t.error(d.request('PUT', TASKS + '/n64', token=KEY), 409, 'conflict', 'a 65th live task: 409 conflict')
    t.eq(len(names(d.request('GET', TASKS, token=KEY))), 64, '64 live tasks listed')
    r = d.request('PUT', TASKS + '/short', body={'expire_s': 1}, token=KEY)
    t.error(r, 409, 'conflict', 'still 409 for another name')
    t.status(d.request('DELETE', TASKS + '/n0', token=KEY), 204, 'one deleted')
    t.status(d.request('PUT', TASKS + '/short', body={'expire_s': 2}, token=KEY), 200,
             'a 2 s task in the freed place')
    time.sleep(3)
    t.error(d.request('GET', TASKS + '/short', token=KEY), 404, 'not_found', 'expired: 404')
    t.ok('short' not in names(d.request('GET', TASKS, token=KEY)), 'expired: not listed')
    t.eq(state(d, KEY, 'tk'), 'paused', 'no task call woke the sandbox')

    t.status(d.request('POST', '/v1/sandboxes/tk/stop', token=KEY), 200, 'stop')
    t.eq(names(d.request('GET', TASKS, token=KEY)), [], 'a stop ended every task')


vmtest.main(t, clock, test_socket_and_idle, test_records_do_not_wake)
vmtest.delete_all_and_stop(t, d, KEY)
