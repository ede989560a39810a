#!/usr/bin/env python3
# vm: file watches (WebSocket change frames create/write/remove/rename/chmod,
# recursive, refusals before the upgrade, 1011 on pause, a watch holds the
# sandbox awake) and the in-sandbox socket /run/box/api.sock from inside the
# guest (curl --unix-socket as the unprivileged user box, no key): GET /self,
# /exec/run, /fs/..., WebSockets through it, 404 naming every route that is
# not served, and each sandbox speaking only for itself; an identity token
# got inside the guest and verified on the host (PyJWT against the JWKS).

import base64
import json
import os
import threading
import time

import filetest  # noqa: F401  (first: puts tests/e2e-vm and tests/e2e on sys.path)
import vmtest  # noqa: E402
from vmtest import VmBoxd, Tap  # noqa: E402
from filetest import Fs, guest, query
import jwtcheck
import wsclient

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
# [boxd] http_stream_unwritten_max: small, so that a stalled fs/watch reader
# is dropped soon (test_watch_slow_reader), but above what boxd may queue at
# once for a reader that reads: the agent reads up to 64 KiB of inotify
# events at a time, ~75 KiB of frames for this test's 240-byte names, all
# sent before boxd's next write (a 64 KiB cap dropped the reading watch too
# once, on a quiet machine whose guest created the files fast)
SLOW_CAP = 256 << 10
d = VmBoxd(t, config={'boxd': {'http_stream_unwritten_max': str(SLOW_CAP)}})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('inside'))
with clock('create (first, may build the template snapshot)'):
    SB = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'in-box'}))
with clock('create a second sandbox'):
    SB2 = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'in-other'}))
fs = Fs(d, KEY, 'in-box')


def sh(script, sandbox='in-box', **kw):
    return guest(d, KEY, sandbox, script, **kw)


def frames(ws, seconds):
    """The text frames that arrive within @seconds, decoded."""
    out = []
    end = time.time() + seconds
    while time.time() < end:
        try:
            op, data = ws.recv(timeout=max(0.1, end - time.time()))
        except (TimeoutError, OSError):
            break
        except wsclient.ConnectionClosed:
            break
        if op == wsclient.OP_TEXT:
            out.append(json.loads(data))
        elif op == wsclient.OP_CLOSE:
            break
    return out


def refused(path, key=KEY, **params):
    try:
        w = wsclient.connect('127.0.0.1', d.port, '/v1/sandboxes/in-box/fs/watch' + query(path=path, **params),
                             headers={'Authorization': 'Bearer ' + key} if key else {})
    except wsclient.HTTPRefused as e:
        return (e.status, e.headers, e.json, e.body)
    w.abort()
    return (101, {}, None, b'')


def test_watch(t):
    sh('rm -rf /tmp/w; mkdir -p /tmp/w/sub')
    t.error(refused('/tmp/w', key=None), 401, 'unauthorized', 'a watch without a key is refused before the upgrade')
    t.error(refused('/tmp/nowhere'), 404, 'not_found', 'a watch of a missing path is 404 before the upgrade')
    t.error(refused('relative'), 400, 'invalid', 'a relative path is 400 before the upgrade')
    t.error(refused('/tmp/w', recursive='yes'), 400, 'invalid', 'recursive=yes is 400')
    t.error(fs.request('GET', '/fs/watch', path='/tmp/w'), 400, 'invalid',
            'a plain GET (no upgrade) on fs/watch is 400 invalid')

    ws = fs.watch('/tmp/w')
    sh('echo a > /tmp/w/f; chmod 600 /tmp/w/f; mv /tmp/w/f /tmp/w/g; echo deep > /tmp/w/sub/deep; rm /tmp/w/g')
    got = frames(ws, 4)
    pairs = [(f.get('type'), f.get('path')) for f in got]
    t.ok(all(set(f) == {'type', 'path'} for f in got), 'frames are {type, path}', got)
    want = [('create', '/tmp/w/f'), ('write', '/tmp/w/f'), ('chmod', '/tmp/w/f'), ('rename', '/tmp/w/f'),
            ('create', '/tmp/w/g'), ('remove', '/tmp/w/g')]
    t.eq([p for p in pairs if p in want], want, 'create, write, chmod, rename (old name, then create of '
         'the new), remove, in order')
    t.ok(('create', '/tmp/w/sub/deep') not in pairs, 'without recursive, changes below a subdirectory are not seen')
    ws.close()

    ws = fs.watch('/tmp/w', recursive=True)
    sh('echo deep > /tmp/w/sub/deep2; mkdir /tmp/w/later; sleep 0.5; echo x > /tmp/w/later/inner')
    pairs = [(f.get('type'), f.get('path')) for f in frames(ws, 4)]
    t.ok(('create', '/tmp/w/sub/deep2') in pairs, 'recursive: a file created in a subdirectory', pairs)
    t.ok(('create', '/tmp/w/later/inner') in pairs, 'recursive: a directory made later is watched too', pairs)

    r = d.request('POST', '/v1/sandboxes/in-box/pause', {}, token=KEY)
    t.eq(r[0], 200, 'pause while watching')
    frames(ws, 10)
    t.eq(ws.close_code, 1011, 'the watch closes with 1011 when the sandbox pauses')
    sh('true')   # wakes it

    sh('mkdir -p /tmp/gone')
    ws = fs.watch('/tmp/gone')
    sh('rmdir /tmp/gone')
    got = [(f.get('type'), f.get('path')) for f in frames(ws, 5)]
    t.ok(('remove', '/tmp/gone') in got and ws.close_code == 1000,
         'removing the watched path: a remove frame, then close 1000', '%r %r' % (got, ws.close_code))


def test_watch_slow_reader(t):
    """A watch whose reader stopped reading is closed at the cap (1008
    slow_reader); a watch that reads goes on and sees every change."""
    # ~300-byte frames: 1.2 MB, well past the cap and the stalled socket's buffers
    n = 4000
    name = 'f' * 240
    sh('rm -rf /tmp/slow; mkdir -p /tmp/slow')
    fast = fs.watch('/tmp/slow')
    slow = wsclient.connect('127.0.0.1', d.port, fs.prefix + '/fs/watch' + query(path='/tmp/slow'),
                            headers=fs.headers(), rcvbuf=4096)
    seen = []
    written = threading.Event()

    def read_fast():
        end = time.time() + 600
        while time.time() < end:
            try:
                op, data = fast.recv(timeout=5)
            except (TimeoutError, OSError):
                if written.is_set():
                    return   # 5 s without a frame after the last change
                continue
            except wsclient.ConnectionClosed:
                return
            if op == wsclient.OP_CLOSE:
                return
            if op == wsclient.OP_TEXT:
                seen.append(json.loads(data))

    reader = threading.Thread(target=read_fast, daemon=True)
    reader.start()
    sh('cd /tmp/slow && i=1; while [ $i -le %d ]; do : > %s$i; i=$((i+1)); done' % (n, name), timeout=600)
    written.set()
    dropped = 'is more than %d bytes behind; dropped' % SLOW_CAP
    end = time.time() + 60
    while dropped not in d.log_text() and time.time() < end:
        time.sleep(0.5)
    t.ok(dropped in d.log_text(), 'boxd dropped the stalled watch')
    got = 0
    end = time.time() + 60
    while time.time() < end:
        try:
            op, _data = slow.recv(timeout=5)
        except (TimeoutError, OSError, wsclient.ConnectionClosed):
            break
        if op == wsclient.OP_CLOSE:
            break
        got += 1
    t.eq((slow.close_code, slow.close_reason), (1008, 'slow_reader'),
         'the stalled watch closes with 1008 slow_reader (after %d frames)' % got)
    t.ok(got < n, 'it did not get every change', got)
    slow.abort()
    reader.join(600)
    paths = {f.get('path') for f in seen if f.get('type') == 'create'}
    t.ok(all('/tmp/slow/%s%d' % (name, i) in paths for i in range(1, n + 1)) and fast.close_code is None,
         'the reading watch goes on and sees all %d creates' % n, '%d creates, close %r' % (len(paths), fast.close_code))
    fast.close()


# The hold check waits out a 30 s idle timeout: its watch is opened first
# and the other sections (other sandboxes) run during the wait.
HOLD = {}


def test_watch_holds_open(t):
    d.create_sandbox(KEY, {'name': 'idle-watch', 'idle': {'timeout_s': 30, 'action': 'pause'}})
    HOLD['watch'] = Fs(d, KEY, 'idle-watch').watch('/tmp')
    HOLD['at'] = time.time()


def test_watch_holds(t):
    w = HOLD.get('watch')
    if w is None:
        t.ok(False, 'the idle-watch sandbox and its watch were set up')
        return
    time.sleep(max(0.0, HOLD['at'] + 45 - time.time()))
    t.eq(vmtest.state(d, KEY, 'idle-watch'), 'running', 'an open watch holds the sandbox awake past its '
         '30 s idle timeout')
    w.close()
    end = time.time() + 90
    while time.time() < end and vmtest.state(d, KEY, 'idle-watch') != 'paused':
        time.sleep(2)
    t.eq(vmtest.state(d, KEY, 'idle-watch'), 'paused', 'once the watch is closed the idle rule pauses it')
    d.request('DELETE', '/v1/sandboxes/idle-watch', token=KEY)


def api(script_args, sandbox='in-box', user='box'):
    """curl on the in-sandbox socket inside the guest: (status, json or text)."""
    return vmtest.insandbox_api(d, KEY, sandbox, script_args, user=user)


def not_found(t, res, route, desc):
    status, body = res
    msg = 'no route %s on the in-sandbox socket' % route
    t.ok(status == 404 and isinstance(body, dict) and body.get('error') == {'code': 'not_found', 'message': msg},
         desc, repr(res))


def test_socket(t):
    r = sh('stat -c %a /run/box/api.sock')
    t.eq(r.out.strip(), '666', 'the socket is mode 0666')
    st, body = api('http://x/self')
    t.eq((st, (body or {}).get('id'), (body or {}).get('name'), (body or {}).get('state')),
         (200, SB['id'], 'in-box', 'running'), 'GET /self as user box, no key: this sandbox\'s record')
    t.eq(set(body or {}), set(SB), 'GET /self has the fields of a Sandbox')
    st, body = api('http://any-host.example:1234/self')
    t.eq((st, (body or {}).get('id')), (200, SB['id']), 'the host name is ignored')
    st, body = api('-H "Authorization: Bearer box_nonsense" http://x/self')
    t.eq(st, 200, 'a bogus Authorization header does not matter')
    st, body = api('http://x/self', sandbox='in-other')
    t.eq((st, (body or {}).get('id')), (200, SB2['id']), 'the other sandbox\'s socket speaks for the other sandbox')

    st, body = api('-d \'{"cmd": ["id", "-un"]}\' http://x/exec/run')
    out = base64.b64decode((body or {}).get('stdout', '')) if isinstance(body, dict) else None
    t.eq((st, out, (body or {}).get('exit_code')), (200, b'box\n', 0), 'POST /exec/run through the socket')
    st, body = api('-d \'{"cmd": ["true"], "bogus": 1}\' http://x/exec/run')
    t.eq((st, (body or {}).get('error', {}).get('code')), (400, 'invalid'), 'the same body rules (unknown field: 400)')
    st, body = api('"http://x/fs/stat?path=/etc/hostname"')
    t.eq((st, (body or {}).get('path'), (body or {}).get('type')), (200, '/etc/hostname', 'file'),
         'GET /fs/stat through the socket')
    st, body = api('-X PUT --data-binary "inside" "http://x/fs/file?path=/tmp/from-inside"')
    t.eq((st, (body or {}).get('size')), (200, 6), 'PUT /fs/file through the socket')
    t.eq(fs.get('/tmp/from-inside')[3], b'inside', 'the host reads what was written from inside')
    t.eq(sh('stat -c %U /tmp/from-inside').out.strip(), 'root', 'without user= the socket writes as root too '
         '(same parameters as the API)')
    st, body = api('"http://x/fs/file?path=/tmp/from-inside"')
    t.eq((st, body), (200, 'inside'), 'GET /fs/file through the socket')
    st, body = api('"http://x/fs/file?path=/root/x&user=box" -X PUT -d x')
    t.eq((st, (body or {}).get('error', {}).get('code')), (403, 'permission_denied'),
         'user=box through the socket: the same 403')
    st, body = api('"http://x/fs/list?path=/tmp"')
    t.ok(st == 200 and any(e.get('name') == 'from-inside' for e in (body or {}).get('entries', [])),
         'GET /fs/list through the socket')
    st, body = api('http://x/exec/sessions')
    t.eq((st, sorted(body or {})), (200, ['sessions']), 'GET /exec/sessions through the socket')
    st, body = api('http://x/ports')
    t.eq((st, sorted(body or {})), (200, ['ports']), 'GET /ports through the socket')

    not_found(t, api('http://x/checkpoints'), 'GET /checkpoints', 'GET /checkpoints: 404 naming the route')
    not_found(t, api('http://x/v1/sandboxes'), 'GET /v1/sandboxes', 'anything under /v1: 404')
    not_found(t, api('"http://x/v1/sandboxes/%s/fs/stat?path=/"' % SB['id']),
              'GET /v1/sandboxes/%s/fs/stat' % SB['id'], 'the prefixed path too: 404')
    not_found(t, api('-X POST http://x/pause'), 'POST /pause', 'pause: 404')
    not_found(t, api('-X POST http://x/stop'), 'POST /stop', 'stop: 404')
    not_found(t, api('-X DELETE http://x/'), 'DELETE /', 'delete: 404')
    not_found(t, api('-X DELETE http://x/self'), 'DELETE /self', 'DELETE /self: 404')
    not_found(t, api('http://x/nothing/here'), 'GET /nothing/here', 'an unknown path: 404 naming it')
    not_found(t, api('-X POST "http://x/fs/stat?path=/"'), 'POST /fs/stat', 'a known path with another method: 404')


def test_identity_token(t):
    # a token from inside a real guest, verified on the host by PyJWT
    # against the JWKS (tests/e2e/jwtcheck.py)
    aud = 'https://svc.example/in-guest'
    st, body = api('"http://x/identity/token?audience=%s&ttl_s=300"' % aud)
    t.eq((st, sorted(body or {}) if isinstance(body, dict) else body), (200, ['expires_at', 'token']),
         'GET /identity/token inside the guest, as user box, no key')
    issuer = (d.request('GET', '/.well-known/openid-configuration')[2] or {}).get('issuer')
    jwks = d.request('GET', '/.well-known/jwks.json')[2] or {}
    try:
        claims, _header = jwtcheck.verify(jwks, (body or {}).get('token', ''), aud, issuer=issuer)
    except Exception as e:  # noqa: BLE001 - the check fails with the reason
        claims = {}
        t.ok(False, 'the guest\'s token verifies against the JWKS', repr(e))
    t.eq((claims.get('sub'), claims.get('sandbox'), claims.get('sandbox_name'),
          claims.get('project'), claims.get('exp', 0) - claims.get('iat', 0)),
         ('project:inside:sandbox:%s' % SB['id'], SB['id'], 'in-box', 'inside', 300),
         'the guest\'s token verifies and names this sandbox')
    st, body = api('"http://x/identity/token?audience=%s"' % aud, sandbox='in-other')
    claims2, _h = jwtcheck.verify(jwks, (body or {}).get('token', ''), aud)
    t.eq(claims2.get('sandbox'), SB2['id'], 'the other sandbox\'s socket gets the other sandbox\'s token')
    st, body = api('"http://x/identity/token?ttl_s=60"')
    t.eq((st, (body or {}).get('error', {}).get('code')), (400, 'invalid'), 'no audience: 400')
    st, body = api('"http://x/identity/token?audience=a&ttl_s=3601"')
    t.eq((st, (body or {}).get('error', {}).get('code')), (400, 'invalid'), 'ttl_s=3601: 400')


def test_socket_bulk(t):
    # bytes both ways through the socket's channel (an upload into the
    # sandbox's own API from inside, and the download back), with credit
    # flow control on both legs
    sh('head -c 24000000 /dev/urandom > /tmp/bulk-src && chmod 644 /tmp/bulk-src')
    r = sh('curl -s -f --unix-socket /run/box/api.sock -T /tmp/bulk-src "http://x/fs/file?path=/tmp/bulk-dst" '
           '> /tmp/bulk-put.json && curl -s -f --unix-socket /run/box/api.sock "http://x/fs/file?path=/tmp/bulk-dst" '
           '| sha256sum && sha256sum < /tmp/bulk-src && cat /tmp/bulk-put.json', user='box', timeout=600)
    sums = [line.split()[0] for line in r.out.splitlines()[:2]]
    t.ok(r.exit_code == 0 and len(sums) == 2 and sums[0] == sums[1] and '"size":24000000' in r.out,
         '24 MB PUT and GET through the in-sandbox socket come back intact', r.describe())


def test_socket_after_restart(t):
    # a stopped sandbox boots again with a new agent connection: the socket
    # is served from it too
    r = d.request('POST', '/v1/sandboxes/in-other/stop', {}, token=KEY)
    t.eq(r[0], 200, 'stop the second sandbox')
    st, body = api('http://x/self', sandbox='in-other')   # the exec wakes it (a fresh boot)
    t.eq((st, (body or {}).get('id')), (200, SB2['id']), 'after stop and a fresh boot the socket answers again')
    r = d.request('POST', '/v1/sandboxes/in-box/pause', {}, token=KEY)
    t.eq(r[0], 200, 'pause the first sandbox')
    st, body = api('"http://x/fs/stat?path=/"')
    t.eq((st, (body or {}).get('type')), (200, 'dir'), 'after a pause and a wake the socket answers again')


GUEST_WS = r'''
import json, socket, sys
sys.path.insert(0, '/tmp')
import wsclient
def conn(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect('/run/box/api.sock')
    return wsclient.connect('x', 0, path, sock=s, timeout=30)
out = {}
w = conn('/exec?cmd=sh&cmd=-c&cmd=echo%20hi-from-ws')
msgs = []
while True:
    op, data = w.recv(timeout=30)
    if op == wsclient.OP_CLOSE:
        break
    msgs.append(json.loads(data) if op == wsclient.OP_TEXT else list(data[:1]) + [data[1:].decode()])
out['exec'] = msgs
out['exec_close'] = w.close_code
w = conn('/fs/watch?path=/tmp/iw')
import subprocess
subprocess.run(['touch', '/tmp/iw/x'])
op, data = w.recv(timeout=30)
out['watch'] = json.loads(data)
w.close()
try:
    conn('/fs/watch?path=/tmp/none')
except wsclient.HTTPRefused as e:
    out['refused'] = [e.status, e.json]
print(json.dumps(out))
'''


def test_socket_websockets(t):
    with open(os.path.join(os.path.dirname(os.path.abspath(wsclient.__file__)), 'wsclient.py'), 'rb') as f:
        fs.put('/tmp/wsclient.py', f.read(), mode='0644')
    fs.put('/tmp/guest-ws.py', GUEST_WS.encode())
    sh('mkdir -p /tmp/iw && chmod 777 /tmp/iw')
    r = sh('python3 /tmp/guest-ws.py', user='box')
    try:
        out = json.loads(r.out)
    except ValueError:
        out = {}
        t.ok(False, 'the guest WebSocket script ran', r.describe())
    msgs = out.get('exec') or []
    t.ok(len(msgs) >= 3 and msgs[0].get('type') == 'started' and [1, 'hi-from-ws\n'] in msgs
         and msgs[-1] == {'type': 'exit', 'code': 0} and out.get('exec_close') == 1000,
         'GET /exec as a WebSocket through the socket: started, stdout, exit 0, close 1000', msgs)
    t.eq(out.get('watch'), {'type': 'create', 'path': '/tmp/iw/x'}, 'GET /fs/watch through the socket')
    t.eq((out.get('refused') or [None])[0], 404, 'a refused upgrade through the socket is a plain 404')


vmtest.main(t, clock, test_watch_holds_open, test_watch, test_watch_slow_reader, test_socket,
            test_identity_token, test_socket_websockets, test_socket_bulk, test_watch_holds, test_socket_after_restart)
