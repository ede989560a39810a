#!/usr/bin/env python3
# vm: the ports of a sandbox on real microVMs: the listener list (with the
# pid and session that started it), the watch (Server-Sent Events: opened
# for what already listens, then opened/closed as listeners change; not
# activity, and it ends when the sandbox pauses), the connect WebSocket (a
# raw TCP stream to 127.0.0.1:{port} in the sandbox; 502 port_closed before the upgrade), the end of port streams with
# 1011 on pause and stop, and the access settings (records only: they do
# not wake a paused sandbox).

import os
import threading
import time

import streamtest
from streamtest import Sse, exec_ws, refused, ws
import vmtest
from vmtest import Tap, VmBoxd

ECHO = r'''
import socket, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 9000))
s.listen(16)
def serve(c):
    while True:
        b = c.recv(65536)
        if not b:
            break
        c.sendall(b)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'''
LISTENER_FIELDS = {'port', 'address', 'pid', 'session'}

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
OTHER = vmtest.setup_or_bail(d, lambda: d.project_with_key('beta'))
with clock('create two sandboxes'):
    # (egress rules are refused until issue 16 enforces them; then this
    # sandbox gets deny-all egress again: ports are reached all the same)
    SB = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'ports-box'}))
    IB = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {
        'name': 'idle-box', 'idle': {'timeout_s': 30, 'action': 'pause'}}))
# a watch on idle-box from the start: it must not keep the sandbox awake
IDLE_WATCH = Sse(d, KEY, '/v1/sandboxes/idle-box/ports/watch')
IDLE_T0 = time.time()
S = {}


def start_detached(sandbox, cmd):
    """A detachable session left running unattached: (session, pid)."""
    w = exec_ws(d, KEY, sandbox, cmd, detachable=True)
    started = w.recv_json(30)
    w.close()
    return started.get('session'), started.get('pid')


def listeners(sandbox='ports-box', key=None):
    r = d.request('GET', '/v1/sandboxes/%s/ports' % sandbox, token=key or KEY)
    return r, {(p.get('port'), p.get('address')): p for p in ((r[2] or {}).get('ports') or [])}


def wait_port(port, present=True, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        _r, by = listeners()
        hit = [p for (n, _a), p in by.items() if n == port]
        if bool(hit) == present:
            return hit[0] if hit else None
        time.sleep(0.2)
    return 'timeout'


def test_list(t):
    r, by = listeners()
    t.status(r, 200, 'GET ports')
    t.fields(r[2], {'ports'}, 'answer is {ports: [...]}')
    S['echo'], S['echo_pid'] = start_detached('ports-box', ['python3', '-c', ECHO])
    p = wait_port(9000)
    t.ok(isinstance(p, dict), 'the echo server started by a session is listed', repr(p))
    p = p if isinstance(p, dict) else {}
    t.fields(p, LISTENER_FIELDS, 'a listener: port, address, pid, session')
    t.eq((p.get('port'), p.get('address'), p.get('pid'), p.get('session')),
         (9000, '127.0.0.1', S['echo_pid'], S['echo']),
         'port 9000 on 127.0.0.1, the pid and the session that started it')
    t.error(d.request('GET', '/v1/sandboxes/no-such-box/ports', token=KEY), 404, 'not_found',
            'ports of an unknown sandbox')
    t.error(d.request('GET', '/v1/sandboxes/ports-box/ports', token=OTHER), 404, 'not_found',
            'ports of another project\'s sandbox')


def test_watch(t):
    w = Sse(d, KEY, '/v1/sandboxes/ports-box/ports/watch')
    w.connected.wait(30)
    t.eq((w.status, (w.headers.get('content-type') or '').split(';')[0]), (200, 'text/event-stream'),
         'GET ports/watch: 200 text/event-stream')
    e, seen = w.wait_for(lambda e: e.get('event') == 'opened', 10)
    t.ok(e is not None and e['data'].get('port') == 9000 and seen == [],
         'first an opened event for the listener already there', repr((e, seen)))
    t.ok(e is not None and set(e['data']) == LISTENER_FIELDS and e['data'].get('session') == S['echo']
         and e['data'].get('pid') == S['echo_pid'],
         'its data: {port, address, pid, session}', repr(e))
    t0 = time.time()
    S['http'], S['http_pid'] = start_detached('ports-box', ['python3', '-m', 'http.server', '8000'])
    e, seen = w.wait_for(lambda e: e.get('event') == 'opened', 15)
    t.ok(e is not None and e['data'].get('port') == 8000 and e['data'].get('session') == S['http'] and
         e['data'].get('pid') == S['http_pid'],
         'python3 -m http.server 8000 started in a session: opened with its pid and session', repr(e))
    clock.add('watch: listener start to opened event', (e or {}).get('at', time.time()) - t0)
    r = d.request('POST', '/v1/sandboxes/ports-box/exec/sessions/%s/signal' % S['http'],
                  {'signal': 'TERM'}, token=KEY)
    t0 = time.time()
    e, seen = w.wait_for(lambda e: e.get('event') in ('closed', 'opened'), 10)
    t.ok(r[0] == 204 and e is not None and e['event'] == 'closed' and e['data'].get('port') == 8000,
         'killing it: a closed event for port 8000', repr((r[0], e, seen)))
    clock.add('watch: kill to closed event', (e or {}).get('at', time.time()) - t0)
    t.ok(not w.ended.is_set(), 'the watch goes on')
    S['watch'] = w
    r = refused(d, KEY, '/v1/sandboxes/no-such-box/ports/watch')
    t.error(d.request('GET', '/v1/sandboxes/no-such-box/ports/watch', token=KEY), 404, 'not_found',
            'watch of an unknown sandbox')


def test_connect(t):
    w = ws(d, KEY, '/v1/sandboxes/ports-box/ports/9000/connect')
    w.send_binary(b'hello')
    got = w.recv_binary(10)
    t.eq(got, b'hello', 'connect: binary frames to the port, its answer back (echo)')
    blob = os.urandom(8 * 1024 * 1024)

    def send_all():
        for i in range(0, len(blob), 65536):
            w.send_binary(blob[i:i + 65536])

    t0 = time.time()
    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    back = bytearray()
    while len(back) < len(blob):
        back += w.recv_binary(60)
    seconds = time.time() - t0
    sender.join(10)
    clock.add('connect: 8 MiB echoed (%.1f MiB/s each way)' % (8 / seconds), seconds)
    t.ok(back == blob, '8 MiB of random bytes sent while the echo comes back: intact, in order',
         '%d bytes back' % len(back))
    w.close()
    t.eq(w.close_code, 1000, 'a client close is answered with 1000')

    w = ws(d, KEY, '/v1/sandboxes/ports-box/ports/9000/connect')
    w2 = ws(d, KEY, '/v1/sandboxes/ports-box/ports/9000/connect')
    w.send_binary(b'one')
    w2.send_binary(b'two')
    t.eq((w.recv_binary(10), w2.recv_binary(10)), (b'one', b'two'), 'two connections at once')
    w.close()
    w2.close()

    # the client's half-close: a text frame {"type": "eof"}; the echo server
    # reads to its end of file, and what it sends until it closes still comes
    w = ws(d, KEY, '/v1/sandboxes/ports-box/ports/9000/connect')
    sent = os.urandom(300000)
    w.send_binary(sent)
    w.send_json({'type': 'eof'})
    back = streamtest.read_to_close(w, 30)
    t.ok(back == sent and w.close_code == 1000,
         'half-close: the server got its end of file after all the bytes, its answer came, then 1000',
         repr((len(back), len(sent), w.close_code)))

    S['http2'], _pid = start_detached('ports-box', ['python3', '-m', 'http.server', '8001'])
    wait_port(8001)
    w = ws(d, KEY, '/v1/sandboxes/ports-box/ports/8001/connect')
    w.send_binary(b'GET / HTTP/1.0\r\nHost: x\r\n\r\n')
    answer = streamtest.read_to_close(w, 10)
    t.ok(answer.startswith(b'HTTP/1.0 200') and w.close_code == 1000,
         'an HTTP request through connect; the server closing its side ends the socket with 1000',
         repr((answer[:80], w.close_code)))

    t.error(refused(d, KEY, '/v1/sandboxes/ports-box/ports/9999/connect'), 502, 'port_closed',
            'connect to a port nothing listens on (before the upgrade)')
    t.error(d.request('GET', '/v1/sandboxes/ports-box/ports/9000/connect', token=KEY), 400, 'invalid',
            'a plain GET on connect')
    for bad in ('0', '65536', 'abc'):
        t.error(refused(d, KEY, '/v1/sandboxes/ports-box/ports/%s/connect' % bad), 400, 'invalid',
                'connect to port %s' % bad)
    t.error(refused(d, KEY, '/v1/sandboxes/no-such-box/ports/9000/connect'), 404, 'not_found',
            'connect in an unknown sandbox')
    t.error(refused(d, None, '/v1/sandboxes/ports-box/ports/9000/connect'), 401, 'unauthorized',
            'connect without a key')


def test_pause_and_settings(t):
    w = ws(d, KEY, '/v1/sandboxes/ports-box/ports/9000/connect')
    w.send_binary(b'x')
    w.recv_binary(10)
    watch = S.get('watch')
    r = d.request('POST', '/v1/sandboxes/ports-box/pause', {}, token=KEY, timeout=120)
    t.status(r, 200, 'pause')
    f = streamtest.Frames(w, timeout=10)
    t.eq(f.close_code, 1011, 'pause ends the port stream with 1011')
    ended = watch.ended.wait(10) if watch is not None else False
    t.ok(ended, 'pause ends the port watch (the event stream completes)')

    url = 'https://3000--ports-box--alpha.%s' % vmtest.boxtest.SANDBOX_DOMAIN
    r = d.request('PUT', '/v1/sandboxes/ports-box/ports/3000', {'access': 'public'}, token=KEY)
    t.eq((r[0], r[2]), (200, {'port': 3000, 'access': 'public', 'url': url}),
         'PUT ports/3000 {access: public} -> {port, access, url} (nothing listens there)')
    r = d.request('PUT', '/v1/sandboxes/ports-box/ports/80', {'access': 'private'}, token=KEY)
    t.status(r, 200, 'PUT ports/80 {access: private}')
    r = d.request('GET', '/v1/sandboxes/ports-box/ports/settings', token=KEY)
    t.eq((r[0], r[2]), (200, {'ports': [
        {'port': 80, 'access': 'private', 'url': 'https://80--ports-box--alpha.%s' % vmtest.boxtest.SANDBOX_DOMAIN},
        {'port': 3000, 'access': 'public', 'url': url}]}),
        'GET ports/settings: only the ports whose access was set, by port')
    r = d.request('PUT', '/v1/sandboxes/ports-box/ports/3000', {'access': 'private'}, token=KEY)
    t.eq((r[0], (r[2] or {}).get('access')), (200, 'private'), 'PUT again replaces the access')
    t.eq(vmtest.state(d, KEY, 'ports-box'), 'paused', 'PUT and GET settings did not wake the sandbox')
    for body, desc in (({'access': 'secret'}, 'an access other than private/public'),
                       ({}, 'no access'), ({'access': 'public', 'x': 1}, 'an unknown field')):
        t.error(d.request('PUT', '/v1/sandboxes/ports-box/ports/3000', body, token=KEY), 400, 'invalid',
                'PUT with %s' % desc)
    for bad in ('0', '65536', 'x'):
        t.error(d.request('PUT', '/v1/sandboxes/ports-box/ports/%s' % bad, {'access': 'public'}, token=KEY),
                400, 'invalid', 'PUT ports/%s' % bad)
    t.error(d.request('PUT', '/v1/sandboxes/no-such-box/ports/3000', {'access': 'public'}, token=KEY),
            404, 'not_found', 'PUT in an unknown sandbox')
    t.error(d.request('GET', '/v1/sandboxes/ports-box/ports/settings', token=OTHER), 404, 'not_found',
            'settings of another project\'s sandbox')
    r = d.request('GET', '/v1/sandboxes/idle-box/ports/settings', token=KEY)
    t.eq((r[0], r[2]), (200, {'ports': []}), 'a sandbox with no setting: {ports: []}')

    w = Sse(d, KEY, '/v1/sandboxes/ports-box/ports/watch')
    e, seen = w.wait_for(lambda e: e.get('event') == 'opened', 60)
    t.ok(e is not None and vmtest.state(d, KEY, 'ports-box') == 'running',
         'a watch wakes a paused sandbox; the detachable servers are still there', repr((e, seen)))
    c = ws(d, KEY, '/v1/sandboxes/ports-box/ports/9000/connect')
    r = d.request('POST', '/v1/sandboxes/ports-box/stop', {}, token=KEY, timeout=120)
    f = streamtest.Frames(c, timeout=10)
    t.ok(r[0] == 200 and f.close_code == 1011 and w.ended.wait(10),
         'stop ends the port stream with 1011 and the watch', repr((r[0], f.close_code)))
    w.close()


def test_watch_is_not_activity(t):
    e, seen = IDLE_WATCH.wait_for(lambda e: e.get('end'), max(1, 60 - (time.time() - IDLE_T0)))
    waited = time.time() - IDLE_T0
    end = time.time() + 30
    while vmtest.state(d, KEY, 'idle-box') != 'paused' and time.time() < end:
        time.sleep(0.2)
    t.eq(vmtest.state(d, KEY, 'idle-box'), 'paused',
         'a sandbox whose ports are watched still pauses when idle (30 s)')
    t.ok(e is not None and waited >= 29,
         'its watch ended when it paused (after %.0f s)' % waited, repr((e, seen)))


vmtest.main(t, clock, test_list, test_watch, test_connect, test_pause_and_settings,
            test_watch_is_not_activity)
