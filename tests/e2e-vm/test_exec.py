#!/usr/bin/env python3
# vm: POST /v1/sandboxes/{sandbox}/exec/run in a real microVM, every rule of
# the spec's "Exec: one-shot": argv, stdin then EOF, cwd, env layering,
# user, timeout_s, exit codes of signals, stderr, the 16 MiB cut, and the
# 400 invalid answers.  One sandbox serves every check (none changes it).

import time

import vmtest
from vmtest import VmBoxd, Tap, run, sh

RUN_FIELDS = {'exit_code', 'stdout', 'stderr', 'timed_out'}
SANDBOX_ENV = {'LAYER_A': 'sandbox', 'LAYER_B': 'sandbox', 'USER': 'from-sandbox-env',
               'SPACED': 'a b  c'}

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
with clock('create (first, may build the template snapshot)'):
    SB = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'exec-box', 'env': SANDBOX_ENV}))


def test_argv_stdin_output(t):
    r = run(d, KEY, 'exec-box', ['true'])
    t.status(r.resp, 200, 'exec/run true')
    t.fields(r.body, RUN_FIELDS, 'answer has exactly exit_code, stdout, stderr, timed_out (no truncated)')
    t.eq((r.exit_code, r.timed_out, r.stdout, r.stderr), (0, False, b'', b''), 'true: exit 0, no output')
    times = []
    for _ in range(5):
        times.append(run(d, KEY, 'exec-box', ['true']).seconds)
    clock.add('exec/run true (best of 5)', min(times))

    r = run(d, KEY, 'exec-box', ['echo', '$HOME;', 'a  b', '*', '`id`'])
    t.eq((r.status, r.stdout), (200, b'$HOME; a  b * `id`\n'), 'argv is not a shell line: no expansion')

    r = run(d, KEY, 'exec-box', ['printf', '%s|', 'x y', '', 'z'])
    t.eq(r.stdout, b'x y||z|', 'empty and spaced arguments are passed as they are')

    data = bytes(range(256)) * 40 + b'\nend'
    r = run(d, KEY, 'exec-box', ['cat'], stdin=data)
    t.ok(r.status == 200 and r.exit_code == 0 and r.stdout == data,
         'stdin (binary, base64) reaches the command, then EOF (cat ends)', r.describe())
    r = run(d, KEY, 'exec-box', ['wc', '-c'], stdin=b'')
    t.eq((r.status, r.out.strip()), (200, '0'), 'empty stdin: EOF at once')
    r = run(d, KEY, 'exec-box', ['cat'], timeout_s=10)
    t.ok(r.status == 200 and r.exit_code == 0 and r.stdout == b'' and r.timed_out is False,
         'no stdin given: the command reads EOF (cat ends, no timeout)', r.describe())

    r = sh(d, KEY, 'exec-box', 'echo to-stdout; echo to-stderr >&2; exit 3')
    t.eq((r.status, r.exit_code, r.stdout, r.stderr, r.timed_out),
         (200, 3, b'to-stdout\n', b'to-stderr\n', False),
         'exit 3: 200 with exit_code 3, stderr captured apart from stdout')
    r = run(d, KEY, 'exec-box', ['false'])
    t.eq((r.status, r.exit_code), (200, 1), 'false: 200 with exit_code 1')

    r = run(d, KEY, 'exec-box', ['python3', '-c', 'import sys; sys.stdout.buffer.write(bytes(range(256)))'])
    t.eq(r.stdout, bytes(range(256)), 'binary output comes back byte for byte')


def test_cwd_user_env(t):
    r = run(d, KEY, 'exec-box', ['pwd'])
    t.eq((r.status, r.out), (200, '/home/box\n'), 'cwd defaults to the home of box (/home/box)')
    r = run(d, KEY, 'exec-box', ['pwd'], user='root')
    t.eq((r.status, r.out), (200, '/root\n'), 'cwd defaults to the home of root (/root)')
    r = run(d, KEY, 'exec-box', ['pwd'], cwd='/tmp')
    t.eq((r.status, r.out), (200, '/tmp\n'), 'cwd given: /tmp')
    r = run(d, KEY, 'exec-box', ['pwd'], cwd='/usr/share', user='root')
    t.eq((r.status, r.out), (200, '/usr/share\n'), 'cwd given for root')

    r = run(d, KEY, 'exec-box', ['id', '-u'])
    t.eq((r.status, r.out), (200, '1000\n'), 'default user is box (uid 1000)')
    r = run(d, KEY, 'exec-box', ['id', '-un'], user='box')
    t.eq((r.status, r.out), (200, 'box\n'), 'user box')
    r = run(d, KEY, 'exec-box', ['id', '-u'], user='root')
    t.eq((r.status, r.out), (200, '0\n'), 'user root: uid 0')
    r = run(d, KEY, 'exec-box', ['id', '-un'], user='daemon')
    t.eq((r.status, r.out), (200, 'daemon\n'), 'another account on the disk (daemon)')
    r = run(d, KEY, 'exec-box', ['pwd'], user='daemon')
    t.eq((r.status, r.out), (200, '/usr/sbin\n'), 'cwd defaults to that account\'s home (/usr/sbin)')
    r = run(d, KEY, 'exec-box', ['id', '-un'], user='nobody', cwd='/tmp')
    t.eq((r.status, r.out), (200, 'nobody\n'), 'an account whose home does not exist, with a cwd (nobody)')
    r = run(d, KEY, 'exec-box', ['sudo', '-n', 'id', '-u'])
    t.eq((r.status, r.out), (200, '0\n'), 'box has passwordless sudo')
    t.error(run(d, KEY, 'exec-box', ['id'], user='no-such-user').resp, 400, 'invalid', 'unknown user')

    passwd = run(d, KEY, 'exec-box', ['getent', 'passwd', 'box', 'root']).out.splitlines()
    shells = {line.split(':')[0]: line.split(':')[6] for line in passwd if line.count(':') == 6}
    t.ok(set(shells) == {'box', 'root'}, 'getent passwd box root', passwd)

    r = run(d, KEY, 'exec-box', ['env'], env={'LAYER_B': 'call', 'LAYER_C': 'call', 'HOME': '/nowhere',
                                              'LOGNAME': 'call-logname'})
    env = dict(line.split('=', 1) for line in r.out.splitlines() if '=' in line)
    t.eq({k: env.get(k) for k in ('LAYER_A', 'LAYER_B', 'LAYER_C', 'SPACED')},
         {'LAYER_A': 'sandbox', 'LAYER_B': 'call', 'LAYER_C': 'call', 'SPACED': 'a b  c'},
         'env: the sandbox env, then the call env on top')
    t.eq({k: env.get(k) for k in ('HOME', 'USER', 'LOGNAME', 'SHELL')},
         {'HOME': '/home/box', 'USER': 'box', 'LOGNAME': 'box', 'SHELL': shells.get('box')},
         'env: HOME, USER, LOGNAME, SHELL of the user over both')
    t.eq({k: env.get(k) for k in ('DEBIAN_FRONTEND', 'LANG')},
         {'DEBIAN_FRONTEND': 'noninteractive', 'LANG': 'C.UTF-8'}, 'the image environment is there')
    t.ok('/usr/bin' in env.get('PATH', ''), 'PATH is set', env.get('PATH'))

    r = run(d, KEY, 'exec-box', ['env'], user='root', env={'LAYER_C': 'root-call'})
    env = dict(line.split('=', 1) for line in r.out.splitlines() if '=' in line)
    t.eq({k: env.get(k) for k in ('LAYER_A', 'LAYER_C', 'HOME', 'USER', 'LOGNAME', 'SHELL')},
         {'LAYER_A': 'sandbox', 'LAYER_C': 'root-call', 'HOME': '/root', 'USER': 'root',
          'LOGNAME': 'root', 'SHELL': shells.get('root')}, 'env for root')
    r = run(d, KEY, 'exec-box', ['printenv', 'LAYER_C'])
    t.eq((r.status, r.exit_code, r.out), (200, 1, ''), 'a call env does not outlive its call')


def test_invalid(t):
    t.error(run(d, KEY, 'exec-box', ['no-such-program-e2e']).resp, 400, 'invalid',
            'executable not in PATH')
    t.error(run(d, KEY, 'exec-box', ['/no/such/dir/prog']).resp, 400, 'invalid', 'no such executable path')
    t.error(run(d, KEY, 'exec-box', ['printenv'], env={'PATH': '/nowhere'}).resp, 400, 'invalid',
            'executable not in the PATH the call gives')
    for bad in (0, -1, 3601, 100000):
        t.error(run(d, KEY, 'exec-box', ['true'], timeout_s=bad).resp, 400, 'invalid',
                'timeout_s %d' % bad)
    for good in (1, 3600):
        r = run(d, KEY, 'exec-box', ['true'], timeout_s=good)
        t.eq((r.status, r.exit_code), (200, 0), 'timeout_s %d accepted' % good)
    t.error(d.request('POST', '/v1/sandboxes/exec-box/exec/run', {}, token=KEY), 400, 'invalid',
            'cmd missing')
    t.error(d.request('POST', '/v1/sandboxes/exec-box/exec/run', {'cmd': []}, token=KEY), 400, 'invalid',
            'cmd empty')
    t.error(d.request('POST', '/v1/sandboxes/exec-box/exec/run', {'cmd': 'true'}, token=KEY), 400,
            'invalid', 'cmd a string, not an array')
    t.error(d.request('POST', '/v1/sandboxes/exec-box/exec/run', {'cmd': ['true'], 'shell': True},
                      token=KEY), 400, 'invalid', 'unknown field',
            message='bad request body: json: unknown field shell')
    t.error(d.request('POST', '/v1/sandboxes/exec-box/exec/run', {'cmd': ['cat'], 'stdin': '%%%'},
                      token=KEY), 400, 'invalid', 'stdin not base64')
    t.error(d.request('POST', '/v1/sandboxes/exec-box/exec/run', {'cmd': ['true'], 'env': {'1X': 'y'}},
                      token=KEY), 400, 'invalid', 'bad env name')
    t.error(d.request('POST', '/v1/sandboxes/no-such-box/exec/run', {'cmd': ['true']}, token=KEY), 404,
            'not_found', 'exec in a sandbox that does not exist')
    t.error(d.request('POST', '/v1/sandboxes/exec-box/exec/run', {'cmd': ['true']}), 401, 'unauthorized',
            'exec without a key')
    r = run(d, KEY, 'exec-box', ['true'])
    t.eq((r.status, r.exit_code), (200, 0), 'the sandbox still runs commands after the refusals')


def test_timeout_and_signals(t):
    r = run(d, KEY, 'exec-box', ['sleep', '30'], timeout_s=1)
    t.eq((r.status, r.timed_out, r.exit_code), (200, True, 137),
         'sleep 30 with timeout_s=1: timed_out true, exit_code 137')
    t.ok(r.seconds < 10, 'killed about when timeout_s ends (%.2f s)' % r.seconds, r.describe())
    clock.add('exec/run sleep 30, timeout_s 1', r.seconds)

    r = sh(d, KEY, 'exec-box', 'echo before; sleep 30 & sleep 30; echo after', timeout_s=2)
    t.eq((r.status, r.timed_out, r.exit_code, r.stdout), (200, True, 137, b'before\n'),
         'a timed-out shell with a background child: killed, output so far kept')
    t.ok(r.seconds < 12, 'its children do not hold the answer back (%.2f s)' % r.seconds, r.describe())
    r = run(d, KEY, 'exec-box', ['pgrep', '-f', 'sleep 30'])
    t.eq((r.status, r.exit_code, r.out), (200, 1, ''), 'nothing of the timed-out commands is left running')

    r = sh(d, KEY, 'exec-box', 'kill -TERM $$')
    t.eq((r.status, r.exit_code, r.timed_out), (200, 143, False), 'killed by SIGTERM: exit_code 143')
    r = sh(d, KEY, 'exec-box', 'kill -KILL $$')
    t.eq((r.status, r.exit_code, r.timed_out), (200, 137, False), 'killed by SIGKILL: exit_code 137, not timed out')
    r = sh(d, KEY, 'exec-box', 'kill -INT $$; sleep 5')
    t.eq((r.status, r.exit_code), (200, 130), 'killed by SIGINT: exit_code 130')
    r = sh(d, KEY, 'exec-box', 'exit 200')
    t.eq((r.status, r.exit_code), (200, 200), 'exit 200 is exit_code 200')


def test_output_limit(t):
    r = run(d, KEY, 'exec-box', ['head', '-c', '20000000', '/dev/zero'], timeout=300)
    t.status(r.resp, 200, '20 MB on stdout')
    t.eq(r.truncated, True, 'truncated: true')
    t.ok(r.stdout is not None and len(r.stdout) == vmtest.MIB16, 'stdout exactly 16 MiB',
         None if r.stdout is None else len(r.stdout))
    t.ok(r.stdout is not None and r.stdout.count(b'\0') == len(r.stdout), 'stdout is what was written')
    t.eq((r.exit_code, r.timed_out, r.stderr), (0, False, b''), 'the command ends normally, stderr empty')
    clock.add('exec/run 20 MB of output', r.seconds)

    r = sh(d, KEY, 'exec-box', 'head -c 17000000 /dev/zero | tr "\\0" e >&2; echo small', timeout=300)
    t.eq((r.status, r.truncated, r.stdout), (200, True, b'small\n'), 'stderr over 16 MiB: truncated, stdout whole')
    t.ok(r.stderr is not None and len(r.stderr) == vmtest.MIB16 and r.stderr[:3] == b'eee',
         'stderr exactly 16 MiB', None if r.stderr is None else len(r.stderr))
    clock.add('exec/run 17 MB on stderr', r.seconds)

    r = run(d, KEY, 'exec-box', ['head', '-c', str(vmtest.MIB16), '/dev/zero'], timeout=300)
    t.ok(r.status == 200 and len(r.stdout or b'') == vmtest.MIB16 and 'truncated' not in (r.body or {}),
         'exactly 16 MiB is not cut (no truncated field)',
         (r.status, len(r.stdout or b''), sorted((r.body or {}).keys())))


def test_keepalive_streams(t):
    """A WebSocket and a chunked download on connections that served
    requests before (boxd keeps connections alive)."""
    import http.client
    import wsclient
    from test_keepalive import Conn
    c = Conn(d, timeout=60)
    for _ in range(2):
        c.send('GET', '/v1/sandboxes/exec-box', token=KEY)
        t.eq(c.response()[0], 200, 'GET the sandbox on a kept-alive connection')
    w = wsclient.connect('127.0.0.1', d.port, '/v1/sandboxes/exec-box/exec?cmd=echo&cmd=kept-alive',
                         headers={'Authorization': 'Bearer ' + KEY}, sock=c.sock, timeout=60)
    out = b''
    while True:
        try:
            op, data = w.recv(60)
        except (wsclient.ConnectionClosed, OSError):
            break
        if op == wsclient.OP_CLOSE:
            break
        if op == wsclient.OP_BINARY:
            out += data[1:]
    t.ok(b'kept-alive' in out, 'exec WebSocket upgraded on that connection', out[:200])
    w.close()

    conn = http.client.HTTPConnection('127.0.0.1', d.port, timeout=60)
    hdrs = {'Authorization': 'Bearer ' + KEY}
    bodies, socks = [], []
    for _ in range(2):
        conn.request('GET', '/v1/sandboxes/exec-box/fs/file?path=/proc/self/status', headers=hdrs)
        resp = conn.getresponse()
        bodies.append((resp.status, resp.getheader('transfer-encoding'), resp.read()))
        socks.append(conn.sock)
    conn.close()
    t.ok(all(st == 200 and te == 'chunked' and b'Name:' in body for st, te, body in bodies),
         'two chunked downloads (/proc/self/status) on one connection', [b[:2] for b in bodies])
    t.ok(socks[0] is not None and socks[0] is socks[1], 'the second reused the first\'s connection')


def test_cleanup(t):
    with clock('delete'):
        t.status(d.request('DELETE', '/v1/sandboxes/exec-box', token=KEY), 204, 'delete the sandbox')
    d.stop()


if __name__ == '__main__':
    vmtest.main(t, clock, test_argv_stdin_output, test_cwd_user_env, test_invalid, test_timeout_and_signals,
                test_output_limit, test_keepalive_streams, test_cleanup)
