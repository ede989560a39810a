#!/usr/bin/env python3
# vm: streaming exec and sessions on real microVMs, over the WebSocket API
# as a client would drive it: the frames (started, stdout/stderr tags,
# stdin and its EOF, tty, resize, signal, exit then 1000, error instead of
# started), the refusals before the upgrade (plain HTTP errors), SIGHUP on
# close, detachable sessions (survive the socket, a pause and the wake;
# attach with offsets, replay of an exited session), the sessions list and
# the signal route.  Two sandboxes: one for everything that leaves it
# running, one that gets paused.

import json
import os
import time

import streamtest
from streamtest import (Frames, RE_SESSION, SESSION_FIELDS, attach_ws, exec_ws, read_until,
                        refused, session_of, sessions, stdin, stdin_eof, wait_session)
import vmtest
from vmtest import Tap, VmBoxd
import boxtest

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
OTHER = vmtest.setup_or_bail(d, lambda: d.project_with_key('beta'))
with clock('create two sandboxes'):
    SB = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'stream-box'}))
    PB = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'pause-box'}))

# sessions other tests come back to
FIRST = {}


def test_exec_frames(t):
    with clock('exec: socket to exit frame'):
        w = exec_ws(d, KEY, 'stream-box', ['sh', '-c', 'echo out; echo err >&2; exit 3'])
        f = Frames(w)
    started = f.controls[0] if f.controls else {}
    t.eq(set(started.keys()), {'type', 'session', 'pid'}, 'first frame: {type, session, pid}')
    t.eq(started.get('type'), 'started', 'first frame is started')
    t.match(RE_SESSION, started.get('session'), 'session id is s- and 10 characters')
    t.ok(isinstance(started.get('pid'), int) and started['pid'] > 1, 'pid is the process id',
         repr(started))
    t.eq((f.out(1), f.out(2)), (b'out\n', b'err\n'), 'stdout tagged 1, stderr tagged 2')
    t.eq(f.controls[-1:], [{'type': 'exit', 'code': 3}], 'last frame {type: exit, code: 3}')
    t.eq(f.close_code, 1000, 'then the socket closes with 1000')
    t.eq(f.order[-1], ('ctl', {'type': 'exit', 'code': 3}), 'nothing after the exit frame')
    FIRST['session'] = started.get('session')

    w = exec_ws(d, KEY, 'stream-box', ['cat'])
    first = w.recv_json(30)
    chunks = [bytes(range(256)) * 4, b'second line\n', b'\x00\x04 tag bytes inside data\n']
    for c in chunks:
        stdin(w, c)
    stdin_eof(w)
    f = Frames(w)
    t.eq(first.get('type'), 'started', 'cat: started')
    t.ok(f.out(1) == b''.join(chunks) and f.exit_code() == 0 and f.close_code == 1000,
         'stdin (tag 0) reaches cat, the single byte 4 is EOF: all bytes back, exit 0, 1000',
         f.describe())

    w = exec_ws(d, KEY, 'stream-box', ['sh', '-c', 'printf "%s|" "$1" "$2" "$PWD" "$FOO" "$(id -un)"',
                                       'sh', 'a b', ''],
                cwd='/tmp', env=['FOO=x=y', 'BAR=1'], user='root')
    f = Frames(w)
    t.eq(f.out(1), b'a b||/tmp|x=y|root|', 'cmd repeated in order, cwd, env K=V (= in V), user')
    w = exec_ws(d, KEY, 'stream-box', ['id', '-un'])
    t.eq(Frames(w).out(1), b'box\n', 'user defaults to box')


def test_error_frames(t):
    for desc, cmd, params in (
            ('an unknown user', ['true'], {'user': 'nobody-here'}),
            ('an executable not found', ['no-such-program-xyz'], {}),
            ('a cwd that does not exist', ['true'], {'cwd': '/no/such/dir'})):
        w = exec_ws(d, KEY, 'stream-box', cmd, **params)
        f = Frames(w)
        err = f.controls[0] if f.controls else {}
        t.ok(len(f.controls) == 1 and err.get('type') == 'error' and
             set(err.keys()) == {'type', 'error'} and
             set((err.get('error') or {}).keys()) == {'code', 'message'} and
             err['error']['code'] == 'invalid' and not f.data and f.close_code == 1000,
             '%s: {type: error, error: {code: invalid, message}} instead of started, then 1000' % desc,
             f.describe())


def test_refusals(t):
    r = d.request('GET', '/v1/sandboxes/stream-box/exec?cmd=true', token=KEY)
    t.error(r, 400, 'invalid', 'a plain GET on exec (no upgrade)')
    r = d.request('GET', '/v1/sandboxes/stream-box/exec/sessions/%s' % FIRST.get('session'), token=KEY)
    t.error(r, 400, 'invalid', 'a plain GET on a session (no upgrade)')
    t.error(refused(d, None, '/v1/sandboxes/stream-box/exec', cmd='true'), 401, 'unauthorized',
            'upgrade without a key', message='a valid API key is required')
    t.error(refused(d, 'box_' + 'a' * 32, '/v1/sandboxes/stream-box/exec', cmd='true'), 401,
            'unauthorized', 'upgrade with a wrong key')
    t.error(refused(d, KEY, '/v1/sandboxes/no-such-box/exec', cmd='true'), 404, 'not_found',
            'upgrade for an unknown sandbox')
    t.error(refused(d, OTHER, '/v1/sandboxes/stream-box/exec', cmd='true'), 404, 'not_found',
            'upgrade for another project\'s sandbox')
    t.error(refused(d, KEY, '/v1/sandboxes/stream-box/exec'), 400, 'invalid', 'upgrade without cmd')
    for bad in ({'tty': 'maybe'}, {'cols': '0'}, {'rows': 'x'}, {'cwd': 'relative'},
                {'env': 'NOEQUALS'}, {'env': '1BAD=x'}, {'detachable': 'yes please'},
                {'tty': '1'}, {'tty': ''}, {'detachble': 'true'}, {'ttty': 'true'},
                {'cwd': '/', 'user': 'root', 'detachable': 'true', 'Detachable': 'true'}):
        t.error(refused(d, KEY, '/v1/sandboxes/stream-box/exec', cmd='true', **bad), 400, 'invalid',
                'upgrade with %r' % bad)
    t.error(refused(d, KEY, '/v1/sandboxes/stream-box/exec/sessions/s-aaaaaaaaaa'), 404, 'not_found',
            'attach to a session the sandbox does not have')
    t.error(refused(d, KEY, '/v1/sandboxes/stream-box/exec/sessions/%s' % FIRST.get('session'),
                    offset='-1'), 400, 'invalid', 'attach with offset=-1')
    t.error(refused(d, KEY, '/v1/sandboxes/stream-box/exec/sessions/%s' % FIRST.get('session'),
                    ofset='3'), 400, 'invalid', 'attach with an unknown parameter',
            message_contains='unknown query parameter ofset')


def test_tty(t):
    w = exec_ws(d, KEY, 'stream-box', ['sh', '-c', 'stty size; tty >/dev/null && echo is-a-tty; '
                                                   'echo to-stderr >&2; read x; stty size'],
                tty=True, cols=100, rows=30)
    f1 = read_until(w, lambda f: b'to-stderr' in f.out(1))
    w.send_json({'type': 'resize', 'cols': 120, 'rows': 40})
    time.sleep(0.3)
    stdin(w, '\n')
    f2 = Frames(w)
    t.ok(b'30 100' in f1.out(1) and b'is-a-tty' in f1.out(1),
         'tty=true with cols/rows: the command has a terminal of that size', f1.describe())
    t.ok(set(f1.data) | set(f2.data) == {1} and b'to-stderr' in f1.out(1),
         'with a TTY all output is tag 1 (stderr too)', f1.describe() + f2.describe())
    t.ok(b'40 120' in f2.out(1) and f2.exit_code() == 0,
         '{type: resize} changes the terminal size (stty size)', f2.describe())


def test_signal_frame(t):
    w = exec_ws(d, KEY, 'stream-box', ['sleep', '1000'])
    w.recv_json(30)
    w.send_json({'type': 'signal', 'signal': 'TERM'})
    f = Frames(w)
    t.ok(f.exit_code() == 143 and f.close_code == 1000,
         '{type: signal, signal: TERM} ends sleep: exit 143 (128 + 15), 1000', f.describe())
    w = exec_ws(d, KEY, 'stream-box', ['sh', '-c', 'sleep 1000 & sleep 1000; echo not-here'])
    w.recv_json(30)
    w.send_json({'type': 'signal', 'signal': 'KILL'})
    f = Frames(w)
    t.ok(f.exit_code() == 137 and b'not-here' not in f.out(1),
         'KILL goes to the process group: exit 137', f.describe())


def test_sighup_on_close(t):
    w = exec_ws(d, KEY, 'stream-box', ['sh', '-c', 'trap "" TERM; echo ready; exec sleep 1000'])
    started = w.recv_json(30)
    read_until(w, lambda f: b'ready' in f.out(1))
    sid, pid = started.get('session'), started.get('pid')
    s = session_of(d, KEY, 'stream-box', sid)
    t.ok(s is not None and s.get('attached') is True and s.get('exited') is False,
         'while the socket is open the session is listed attached and running', repr(s))
    w.close()
    s = wait_session(d, KEY, 'stream-box', sid, lambda s: s.get('exited'))
    t.ok(s is not None and s.get('exited') is True and s.get('exit_code') == 129,
         'closing the socket of a non-detachable session: SIGHUP, exit code 129', repr(s))
    r = vmtest.run(d, KEY, 'stream-box', ['sh', '-c', 'kill -0 %d' % pid])
    t.ok(r.status == 200 and r.exit_code != 0, 'its process is gone', r.describe())
    w = exec_ws(d, KEY, 'stream-box', ['sleep', '1000'])
    sid2 = w.recv_json(30).get('session')
    w.abort()
    s = wait_session(d, KEY, 'stream-box', sid2, lambda s: s.get('exited'))
    t.ok(s is not None and s.get('exit_code') == 129,
         'a dropped connection (no close frame) hangs up the same way', repr(s))


def test_detachable(t):
    total = 10 + 7 + 1200000 + 4    # seq, got-zz, the a's, END
    w = exec_ws(d, KEY, 'stream-box', ['sh', '-c', 'seq 1 5; read x; echo got-$x; '
                                                   'head -c 1200000 /dev/zero | tr "\\0" a; echo END; '
                                                   'exec sleep 1000'], detachable=True)
    sid = w.recv_json(30).get('session')
    FIRST['detached'] = sid
    read_until(w, lambda f: f.out(1) == b'1\n2\n3\n4\n5\n')
    w.close()
    s = wait_session(d, KEY, 'stream-box', sid, lambda s: s.get('attached') is False)
    t.ok(s is not None and s.get('exited') is False and s.get('attached') is False,
         'detachable: closing the socket leaves it running, unattached', repr(s))

    w = attach_ws(d, KEY, 'stream-box', sid, offset=0)
    f = read_until(w, lambda f: f.out(1) == b'1\n2\n3\n4\n5\n', timeout=10)
    t.eq(f.controls[:1], [{'type': 'attached', 'session': sid, 'offset': 0}],
         'attach offset=0: first frame {type: attached, session, offset: 0}')
    t.eq(f.out(1), b'1\n2\n3\n4\n5\n', 'then the replay from the start')
    w.close()

    w = attach_ws(d, KEY, 'stream-box', sid, offset=4)
    f = read_until(w, lambda f: f.out(1) == b'3\n4\n5\n', timeout=10)
    t.eq(f.controls[:1], [{'type': 'attached', 'session': sid, 'offset': 4}],
         'attach offset=4: {type: attached, offset: 4}')
    t.eq(f.out(1), b'3\n4\n5\n', 'replay from byte 4 of the output')
    stdin(w, 'zz\n')
    f = read_until(w, lambda f: f.out(1).endswith(b'END\n'))
    t.ok(f.out(1).startswith(b'got-zz\n') and f.out(1)[7:].startswith(b'aaaa') and
         len(f.out(1)) == total - 10,
         'then live output (all of it); stdin works on an attached socket', f.describe()[:300])
    w.close()

    # wait for the whole output, then attach from the start: it is older
    # than the 1 MiB kept
    time.sleep(1)
    w = attach_ws(d, KEY, 'stream-box', sid, offset=0)
    f = read_until(w, lambda f: f.out(1).endswith(b'END\n'), timeout=30)
    w.close()
    att = f.controls[0] if f.controls else {}
    kept = len(f.out(1))
    t.ok(att.get('type') == 'attached' and att.get('offset', 0) > 0 and
         att['offset'] + kept == total and kept <= 1024 * 1024 and kept >= 1024 * 1024 - 65536,
         'offset older than the 1 MiB kept: the first frame says where the replay really starts '
         '(offset + replay = all output)', 'attached %r, %d bytes replayed, %d written' % (att, kept, total))
    w = attach_ws(d, KEY, 'stream-box', sid)
    f = read_until(w, lambda f: f.out(1).endswith(b'END\n'), timeout=30)
    w.close()
    t.ok(f.controls[:1] == [att] and len(f.out(1)) == kept,
         'attach without offset replays everything kept', repr(f.controls[:1]))


def test_exited_attach_and_list(t):
    sid = FIRST.get('session')
    w = attach_ws(d, KEY, 'stream-box', sid)
    f = Frames(w, timeout=10)
    t.eq(f.controls, [{'type': 'attached', 'session': sid, 'offset': 0}, {'type': 'exit', 'code': 3}],
         'attach to an exited session: attached, the replay, exit at once')
    t.eq([x for x in f.order if x[0] != 'ctl'], [(1, b'out\n'), (2, b'err\n')],
         'the replay keeps stdout and stderr apart, in write order')
    t.eq(f.close_code, 1000, 'then 1000')

    r, by_id = sessions(d, KEY, 'stream-box')
    t.status(r, 200, 'GET exec/sessions')
    t.fields(r[2], {'sessions'}, 'answer is {sessions: [...]}')
    s = by_id.get(sid) or {}
    t.fields(s, SESSION_FIELDS | {'exit_code'}, 'an exited session: id, cmd, tty, pid, started_at, '
             'exited, exit_code, attached')
    t.eq((s.get('cmd'), s.get('tty'), s.get('exited'), s.get('exit_code'), s.get('attached')),
         (['sh', '-c', 'echo out; echo err >&2; exit 3'], False, True, 3, False),
         'its values: cmd as given, tty false, exited, exit_code 3, not attached')
    t.ok(boxtest.is_utc_ts(s.get('started_at')), 'started_at is RFC 3339 UTC', repr(s.get('started_at')))
    running = by_id.get(FIRST.get('detached')) or {}
    t.fields(running, SESSION_FIELDS, 'a running session has no exit_code')
    t.error(d.request('GET', '/v1/sandboxes/no-such-box/exec/sessions', token=KEY), 404, 'not_found',
            'sessions of an unknown sandbox')
    t.error(d.request('GET', '/v1/sandboxes/stream-box/exec/sessions', token=OTHER), 404, 'not_found',
            'sessions of another project\'s sandbox')


def test_signal_route(t):
    sid = FIRST.get('detached')
    path = '/v1/sandboxes/stream-box/exec/sessions/%s/signal' % sid
    r = d.request('POST', path, {'signal': 'TERM'}, token=KEY)
    t.status(r, 204, 'POST signal {signal: TERM} to a running session')
    s = wait_session(d, KEY, 'stream-box', sid, lambda s: s.get('exited'))
    t.ok(s is not None and s.get('exit_code') == 143, 'the session ends: exit_code 143', repr(s))
    t.error(d.request('POST', path, {'signal': 'TERM'}, token=KEY), 409, 'conflict',
            'signal to an exited session')
    t.error(d.request('POST', '/v1/sandboxes/stream-box/exec/sessions/s-aaaaaaaaaa/signal',
                      {'signal': 'TERM'}, token=KEY), 404, 'not_found', 'signal to an unknown session')
    t.error(d.request('POST', '/v1/sandboxes/stream-box/exec/sessions/bogus/signal',
                      {'signal': 'TERM'}, token=KEY), 404, 'not_found', 'signal to a malformed session id')
    t.error(d.request('POST', path, {'signal': 'TERM', 'extra': 1}, token=KEY), 400, 'invalid',
            'signal with an unknown field', message='bad request body: json: unknown field extra')
    t.error(d.request('POST', path, {}, token=KEY), 400, 'invalid', 'signal without a signal')
    w = exec_ws(d, KEY, 'stream-box', ['sleep', '1000'], detachable=True)
    sid2 = w.recv_json(30).get('session')
    t.error(d.request('POST', '/v1/sandboxes/stream-box/exec/sessions/%s/signal' % sid2,
                      {'signal': 'NOTASIGNAL'}, token=KEY), 400, 'invalid', 'an unknown signal name')
    r = d.request('POST', '/v1/sandboxes/stream-box/exec/sessions/%s/signal' % sid2,
                  {'signal': 'HUP'}, token=KEY)
    f = Frames(w)
    t.ok(r[0] == 204 and f.exit_code() == 129 and f.close_code == 1000,
         'a signal through the route reaches an attached socket\'s session: exit frame 129',
         '%s %s' % (r[0], f.describe()))


def test_pause(t):
    dw = exec_ws(d, KEY, 'pause-box', ['sh', '-c', 'echo before; read x; echo after-$x'],
                 detachable=True)
    dsid = dw.recv_json(30).get('session')
    read_until(dw, lambda f: f.out(1) == b'before\n')
    nw = exec_ws(d, KEY, 'pause-box', ['sleep', '1000'])
    nsid = nw.recv_json(30).get('session')
    with clock('pause with two sockets attached'):
        r = d.request('POST', '/v1/sandboxes/pause-box/pause', {}, token=KEY, timeout=120)
    t.status(r, 200, 'pause with sockets attached')
    fd, fn = Frames(dw, timeout=10), Frames(nw, timeout=10)
    t.ok(fd.close_code == 1011 and 'exit' not in fd.types(),
         'pause: the detachable session\'s socket closes with 1011, no exit frame', fd.describe())
    t.ok(fn.close_code == 1011 and 'exit' not in fn.types(),
         'pause: the other socket closes with 1011, no exit frame', fn.describe())
    t.eq(vmtest.state(d, KEY, 'pause-box'), 'paused', 'the sandbox is paused')

    with clock('attach to a paused sandbox (wakes it)'):
        w = attach_ws(d, KEY, 'pause-box', dsid)
        f = read_until(w, lambda f: f.out(1) == b'before\n', timeout=30)
    t.ok(f.controls[:1] == [{'type': 'attached', 'session': dsid, 'offset': 0}] and
         f.out(1) == b'before\n',
         'the detachable session survived the pause: attach (which wakes the sandbox) replays it',
         f.describe())
    t.eq(vmtest.state(d, KEY, 'pause-box'), 'running', 'attach woke the sandbox')
    stdin(w, '7\n')
    f = Frames(w)
    t.ok(f.out(1) == b'after-7\n' and f.exit_code() == 0 and f.close_code == 1000,
         'it goes on where it was: stdin, output, exit 0, 1000', f.describe())
    s = wait_session(d, KEY, 'pause-box', nsid, lambda s: s.get('exited'))
    t.ok(s is not None and s.get('exited') is True and s.get('exit_code') == 129,
         'the non-detachable session ended with its socket (SIGHUP, 129)', repr(s))

    w = exec_ws(d, KEY, 'pause-box', ['sleep', '1000'])
    w.recv_json(30)
    r = d.request('POST', '/v1/sandboxes/pause-box/stop', {}, token=KEY, timeout=120)
    f = Frames(w, timeout=10)
    t.ok(r[0] == 200 and f.close_code == 1011 and 'exit' not in f.types(),
         'stop: the socket closes with 1011, no exit frame', '%s %s' % (r[0], f.describe()))
    w = exec_ws(d, KEY, 'pause-box', ['sleep', '1000'])
    started = w.recv_json(60)
    r = d.request('DELETE', '/v1/sandboxes/pause-box', token=KEY, timeout=120)
    f = Frames(w, timeout=10)
    t.ok(started.get('type') == 'started' and r[0] == 204 and f.close_code == 1011 and
         'exit' not in f.types(),
         'a stopped sandbox wakes for exec; delete closes its socket with 1011', '%s %s %s' % (
             started, r[0], f.describe()))


def test_insandbox(t):
    """The same routes from inside the sandbox, on /run/box/api.sock (no
    key, no /v1/sandboxes/{sandbox} prefix)."""
    with open(os.path.join(streamtest.SOURCE_ROOT, 'tests', 'e2e', 'wsclient.py')) as f:
        prog = f.read() + r'''
import json, socket
s = socket.socket(socket.AF_UNIX)
s.connect('/run/box/api.sock')
w = connect('localhost', 0, '/exec?cmd=sh&cmd=-c&cmd=echo+inside%3B+echo+e+%3E%262%3B+exit+4', sock=s)
out = []
while True:
    op, data = w.recv(30)
    if op == OP_CLOSE:
        break
    out.append(json.loads(data) if op == OP_TEXT else [data[0], data[1:].decode()])
print(json.dumps({'frames': out, 'close': w.close_code}))
'''
    r = vmtest.run(d, KEY, 'stream-box', ['python3', '-'], stdin=prog)
    try:
        got = json.loads(r.out)
    except ValueError:
        got = {}
    frames = got.get('frames') or []
    t.ok(len(frames) == 4 and frames[0].get('type') == 'started' and frames[1:3] == [[1, 'inside\n'], [2, 'e\n']]
         and frames[3] == {'type': 'exit', 'code': 4} and got.get('close') == 1000,
         'an exec WebSocket on the in-sandbox socket: started, output, exit 4, 1000', r.describe())
    r = vmtest.run(d, KEY, 'stream-box', ['curl', '-s', '--unix-socket', '/run/box/api.sock',
                                          'http://localhost/exec/sessions'])
    ids = [s.get('id') for s in (json.loads(r.out or '{}').get('sessions') or [])]
    t.ok(frames[:1] and frames[0].get('session') in ids,
         'GET /exec/sessions on the in-sandbox socket lists it', r.describe())


vmtest.main(t, clock, test_exec_frames, test_error_frames, test_refusals, test_tty,
            test_signal_frame, test_sighup_on_close, test_detachable, test_exited_attach_and_list,
            test_signal_route, test_insandbox, test_pause)
