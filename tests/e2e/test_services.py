#!/usr/bin/env python3
# e2e: supervised services over the API (issue 14 items 1, 2, 5 and 6, host
# side), on the dummy hypervisor whose `agent =` option runs the real guest
# agent per sandbox on this host (plugins/dummy/box-dummy-agent.h) with a
# services directory of its own: the routes and the Service record, the
# host's checks (bad name, unknown field, missing or empty cmd, unknown
# need, a cycle named), stop/start/restart, delete, another project's
# sandbox 404, a stop then wake starting the services again with new PIDs;
# the logs route (tail, its bounds and errors, follow ended cleanly by a
# pause and by a stop, wake=false 409 leaving the sandbox paused, `box
# logs`) and a follow not keeping a sandbox with a 30 s idle timeout awake.
# Needs root (the agent switches to the service's user).

import json
import os
import tempfile
import time

import sys

import boxtest
from boxtest import Boxd, Tap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'cli'))
import clitest  # noqa: E402

BOX_AGENT = os.environ.get('BOX_AGENT', '')
FIELDS = {'name', 'cmd', 'user', 'needs', 'state', 'restarts'}


def alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as f:
            return f.read().split()[2] != 'Z'
    except OSError:
        return False


def start_boxd(t, what):
    """A boxd whose dummy hypervisor runs the real agent: (boxd, its
    temporary directory), or (None, None) after a skip."""
    if not os.access(BOX_AGENT, os.X_OK) or os.geteuid() != 0:
        t.skip(what + ' through the real agent', 'needs root and BOX_AGENT')
        return None, None
    tmp = tempfile.mkdtemp(prefix='box-e2e-services-')
    conf = os.path.join(tmp, 'boxd.conf')
    with open(conf, 'w') as f:
        f.write('[plugin.dummy]\nagent=%s\n' % BOX_AGENT)
    return Boxd(t, extra_args=['--config', conf]).start(), tmp


def test_services(t):
    d, tmp = start_boxd(t, 'services')
    if d is None:
        return
    key = d.project_with_key('svc')
    other = d.project_with_key('other')
    sdir = os.path.join(tmp, 'services')
    args = '--fd {fd} --services-dir %s --service-grace-ms 1000' % sdir
    d.create_sandbox(key, {'name': 'sv', 'env': {'BOX_DUMMY_AGENT_ARGS': args}})
    base = '/v1/sandboxes/sv/services'

    r = d.request('GET', base, token=key)
    t.status(r, 200, 'GET services')
    t.eq(r[2], {'services': []}, 'no services at first')

    r = d.request('PUT', base + '/db', {'cmd': ['sleep', '60'], 'user': 'root', 'http_port': 5432},
                  token=key)
    t.status(r, 200, 'PUT services/db')
    db = r[2] or {}
    t.ok(FIELDS <= set(db) and set(db) <= FIELDS | {'cwd', 'env', 'http_port', 'pid', 'started_at'},
         'a Service has the spec\'s fields', db)
    t.eq((db.get('name'), db.get('state'), db.get('needs'), db.get('restarts'), db.get('http_port')),
         ('db', 'running', [], 0, 5432), 'db runs')
    t.ok(isinstance(db.get('pid'), int) and alive(db['pid']), 'with a live pid', db)
    t.ok(boxtest.is_utc_ts(db.get('started_at', '')), 'started_at is RFC 3339 UTC', db)
    t.ok(os.path.exists(os.path.join(sdir, 'db.json')), 'the definition is on the sandbox disk')

    r = d.request('PUT', base + '/web', {'cmd': ['sleep', '60'], 'user': 'root', 'needs': ['db'],
                                         'env': {'A': 'b'}}, token=key)
    t.status(r, 200, 'PUT services/web needing db')
    t.eq(((r[2] or {}).get('state'), (r[2] or {}).get('needs'), (r[2] or {}).get('env')),
         ('running', ['db'], {'A': 'b'}), 'web runs after db')

    t.error(d.request('PUT', base + '/x', {'cmd': ['true'], 'needs': ['nope']}, token=key),
            400, 'invalid', 'an unknown need', message_contains='"nope"')
    t.error(d.request('PUT', base + '/db', {'cmd': ['true'], 'needs': ['web']}, token=key),
            400, 'invalid', 'a cycle', message_contains='db -> web -> db')
    t.error(d.request('PUT', base + '/x', {'cmd': ['true'], 'needs': ['x']}, token=key),
            400, 'invalid', 'a service needing itself', message_contains='cycle')
    t.error(d.request('PUT', base + '/-x', {'cmd': ['true']}, token=key),
            400, 'invalid', 'a bad name')
    t.error(d.request('PUT', base + '/x', {'cmd': ['true'], 'color': 'red'}, token=key),
            400, 'invalid', 'an unknown field', message_contains='color')
    t.error(d.request('PUT', base + '/x', {'user': 'root'}, token=key),
            400, 'invalid', 'no cmd', message_contains='cmd')
    t.error(d.request('PUT', base + '/x', {'cmd': []}, token=key),
            400, 'invalid', 'an empty cmd', message_contains='cmd')
    t.error(d.request('PUT', base + '/x', {'cmd': ['true'], 'http_port': 0}, token=key),
            400, 'invalid', 'http_port 0', message_contains='http_port')
    t.ok(not os.path.exists(os.path.join(sdir, 'x.json')), 'the refused ones wrote nothing')
    t.eq(((d.request('GET', base + '/db', token=key)[2]) or {}).get('needs'), [],
         'the refused cycle left db as it was')

    r = d.request('GET', base, token=key)
    t.eq(sorted(s['name'] for s in (r[2] or {}).get('services', [])), ['db', 'web'], 'both listed')
    t.error(d.request('GET', base + '/nope', token=key), 404, 'not_found', 'an absent service')
    t.error(d.request('GET', base, token=other), 404, 'not_found', "another project's sandbox")
    t.error(d.request('PUT', base + '/db', {'cmd': ['true']}, token=other), 404, 'not_found',
            "PUT into another project's sandbox")

    r = d.request('POST', base + '/web/stop', token=key)
    t.status(r, 200, 'POST stop')
    st = r[2] or {}
    t.ok(st.get('state') == 'stopped' and 'pid' not in st and 'started_at' not in st,
         'stopped, without pid and started_at', st)
    r = d.request('POST', base + '/web/start', token=key)
    t.eq((r[2] or {}).get('state'), 'running', 'POST start')
    web_pid = (r[2] or {}).get('pid')
    r = d.request('POST', base + '/web/restart', token=key)
    t.ok((r[2] or {}).get('state') == 'running' and r[2].get('pid') != web_pid and
         r[2].get('restarts') == 2, 'POST restart: a new pid, restarts 2', r[2])

    r = d.request('POST', '/v1/sandboxes/sv/stop', token=key)
    t.status(r, 200, 'the sandbox stops')
    r = d.request('GET', base + '/db', token=key)
    t.ok((r[2] or {}).get('state') == 'running' and r[2].get('pid') != db.get('pid'),
         'after stop and wake (a sub-API call wakes it) db runs again with a new pid', r[2])
    t.eq(((d.request('GET', '/v1/sandboxes/sv', token=key)[2]) or {}).get('state'), 'running',
         'the call woke the sandbox')

    # the CLI
    box = clitest.Client(d, key)
    r = box('service', 'put', 'sv', 'cli', '--needs', 'db', '--port', '8080', '--env', 'K=V',
            '--user', 'root', '--', 'sleep', '60')
    t.ok(r.rc == 0 and 'running' in r.out and 'sleep 60' in r.out, 'box service put', r.describe())
    rec = (d.request('GET', base + '/cli', token=key)[2]) or {}
    t.eq((rec.get('cmd'), rec.get('needs'), rec.get('http_port'), rec.get('env'), rec.get('user')),
         (['sleep', '60'], ['db'], 8080, {'K': 'V'}, 'root'), 'what box service put defined')
    r = box('services', 'sv')
    t.ok(r.rc == 0 and r.out.splitlines()[0].split()[:3] == ['NAME', 'STATE', 'PID'] and
         any(line.split()[:2] == ['cli', 'running'] for line in r.out.splitlines()),
         'box services lists it', r.describe())
    r = box('service', 'stop', 'sv', 'cli', '--json')
    t.ok(r.rc == 0 and json.loads(r.out or '{}').get('state') == 'stopped', 'box service stop --json',
         r.describe())
    r = box('service', 'delete', 'sv', 'cli')
    t.eq((r.rc, r.out), (0, ''), 'box service delete')
    r = box('service', 'frob', 'sv', 'cli')
    t.eq(r.rc, 2, 'box service with an unknown action is a usage error')
    r = box('service', 'put', 'sv', 'x')
    t.eq(r.rc, 2, 'box service put without a command is a usage error')
    r = box('service', 'start', 'sv', 'nope')
    t.ok(r.rc == 1 and 'not_found' in r.err, 'box service start of an absent service', r.describe())

    for name in ('web', 'db'):
        pid = ((d.request('GET', base + '/' + name, token=key)[2]) or {}).get('pid', 0)
        r = d.request('DELETE', base + '/' + name, token=key)
        t.status(r, 204, 'DELETE ' + name)
        t.ok(not alive(pid), name + '\'s process is gone')
    t.eq(d.request('GET', base, token=key)[2], {'services': []}, 'none left')
    t.ok(not os.listdir(sdir), 'and no definition left')


def test_service_logs(t):
    d, tmp = start_boxd(t, 'service logs')
    if d is None:
        return
    key = d.project_with_key('logs')
    other = d.project_with_key('other')
    sdir = os.path.join(tmp, 'services')
    trig = os.path.join(tmp, 'more')
    args = '--fd {fd} --services-dir %s --service-grace-ms 1000' % sdir
    d.create_sandbox(key, {'name': 'lg', 'env': {'BOX_DUMMY_AGENT_ARGS': args}})
    base = '/v1/sandboxes/lg/services'
    cmd = ('i=0; while [ $i -lt 300 ]; do echo line$i; i=$((i+1)); done; '
           'while :; do if [ -e %s ]; then rm %s; echo more; fi; sleep 0.05; done' % (trig, trig))
    r = d.request('PUT', base + '/talk', {'cmd': ['sh', '-c', cmd], 'user': 'root'}, token=key)
    t.status(r, 200, 'PUT services/talk')
    logfile = os.path.join(sdir, 'talk.log')
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if os.path.exists(logfile) and open(logfile, 'rb').read().endswith(b'line299\n'):
            break
        time.sleep(0.05)
    lines = lambda a, b: b''.join(b'line%d\n' % i for i in range(a, b))  # noqa: E731

    r = d.request('GET', base + '/talk/logs?tail=5', token=key)
    t.status(r, 200, 'GET logs?tail=5')
    t.ok(r[1].get('content-type', '').startswith('text/plain'), 'text/plain', r[1])
    t.eq(r[3], lines(295, 300), 'tail=5 gives the last 5 lines')
    t.eq(d.request('GET', base + '/talk/logs', token=key)[3], lines(200, 300),
         'the default is the last 100 lines')
    t.eq(d.request('GET', base + '/talk/logs?tail=10000&follow=false&wake=true', token=key)[3],
         lines(0, 300), 'tail beyond the file: all of it')
    t.eq(d.request('GET', base + '/talk/logs?tail=0', token=key)[3], b'', 'tail=0: nothing')
    for q, what in (('tail=abc', 'a tail that is no number'), ('tail=-1', 'a negative tail'),
                    ('tail=10001', 'a tail beyond 10000'), ('tail=+5', 'a signed tail'),
                    ('follow=yes', 'a follow that is no boolean'), ('wake=1', 'a bad wake'),
                    ('tail=1&tail=2', 'a repeated tail'), ('lines=3', 'an unknown parameter')):
        t.error(d.request('GET', base + '/talk/logs?' + q, token=key), 400, 'invalid', what)
    t.error(d.request('GET', base + '/nope/logs', token=key), 404, 'not_found', 'an unknown service')
    t.error(d.request('GET', base + '/-x/logs', token=key), 400, 'invalid', 'a bad service name')
    t.error(d.request('GET', base + '/talk/logs', token=other), 404, 'not_found',
            "another project's sandbox")

    # follow: new output streams, a pause ends the answer cleanly
    f = boxtest.Follow(d, base + '/talk/logs?tail=1&follow=true', key)
    t.eq(f.next(), ('line', b'line299\n'), 'follow starts with the tail')
    t.ok(f.headers.get('transfer-encoding') == 'chunked', 'chunked', f.headers)
    open(trig, 'w').close()
    t.eq(f.next(), ('line', b'more\n'), 'follow streams what the service writes next')
    open(trig, 'w').close()
    t.eq(f.next(), ('line', b'more\n'), 'and again')
    r = d.request('POST', '/v1/sandboxes/lg/pause', token=key)
    t.status(r, 200, 'pause')
    t.eq(f.next(), ('end', True), 'the pause ended the follow cleanly')
    f.close()

    # wake=false on a paused sandbox: 409, still paused; the default wakes it
    t.error(d.request('GET', base + '/talk/logs?wake=false', token=key), 409, 'conflict',
            'wake=false on a paused sandbox')
    t.eq((d.request('GET', '/v1/sandboxes/lg', token=key)[2] or {}).get('state'), 'paused',
         'and it stays paused')
    r = d.request('GET', base + '/talk/logs?tail=1', token=key)
    t.eq((r[0], r[3]), (200, b'more\n'), 'without wake=false the call wakes it')
    t.eq((d.request('GET', '/v1/sandboxes/lg', token=key)[2] or {}).get('state'), 'running',
         'it runs again')
    r = d.request('GET', base + '/talk/logs?tail=2&wake=false', token=key)
    t.eq((r[0], r[3]), (200, b'more\nmore\n'), 'wake=false on a running sandbox answers')

    # the CLI
    box = clitest.Client(d, key)
    r = box('logs', 'lg', 'talk', '--tail', '3')
    t.ok(r.rc == 0 and r.out.splitlines()[-3:] == ['line299', 'more', 'more'],
         'box logs --tail 3', r.describe())
    r = box('logs', 'lg', 'nope')
    t.ok(r.rc == 1 and 'not_found' in r.err, 'box logs of an absent service', r.describe())
    r = box('logs', 'lg')
    t.eq(r.rc, 2, 'box logs without a service is a usage error')

    # a stop ends a follow too
    f = boxtest.Follow(d, base + '/talk/logs?tail=0&follow=true', key)
    f.ready.wait(10)
    t.eq(f.status, 200, 'a second follow')
    t.status(d.request('POST', '/v1/sandboxes/lg/stop', token=key), 200, 'stop')
    t.eq(f.next(), ('end', True), 'the stop ended the follow cleanly')
    f.close()


def test_follow_lets_idle(t):
    """A follow does not keep a sandbox with a 30 s idle timeout awake."""
    d, tmp = start_boxd(t, 'following and the idle rule')
    if d is None:
        return
    key = d.project_with_key('idle')
    args = '--fd {fd} --services-dir %s' % os.path.join(tmp, 'services')
    d.create_sandbox(key, {'name': 'id', 'idle': {'timeout_s': 30, 'action': 'pause'},
                           'env': {'BOX_DUMMY_AGENT_ARGS': args}})
    base = '/v1/sandboxes/id/services'
    t.status(d.request('PUT', base + '/tick', {'cmd': ['sh', '-c', 'while :; do echo tick; sleep 0.5; done'],
                                               'user': 'root'}, token=key), 200, 'PUT a chatty service')
    f = boxtest.Follow(d, base + '/tick/logs?tail=1&follow=true', key)
    t.eq(f.next(), ('line', b'tick\n'), 'following it')
    start = time.monotonic()
    ended = None
    n = 0
    while time.monotonic() - start < 60:
        e = f.next(timeout=60)
        if e[0] != 'line':
            ended = e
            break
        n += 1
    took = time.monotonic() - start
    t.eq(ended, ('end', True), 'the follow ended cleanly (%d lines, %.0f s)' % (n, took))
    t.ok(25 <= took <= 60, 'when the idle rule paused the sandbox, about 30 s after its last call',
         '%.1f s' % took)
    t.eq((d.request('GET', '/v1/sandboxes/id', token=key)[2] or {}).get('state'), 'paused',
         'the sandbox is paused')
    f.close()

if __name__ == '__main__':
    boxtest.main(Tap(), test_services, test_service_logs, test_follow_lets_idle)
