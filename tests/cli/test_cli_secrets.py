#!/usr/bin/env python3
# cli-secrets: `box secrets`, `box secret put|get|delete`, `box create
# --secret` and `box fork --secret|--no-secrets` against the real boxd
# (dummy hypervisor): usage errors (exit 2, nothing asked of the API, the
# value never echoed), the value from standard input (one line end
# dropped, what the API would refuse refused before it leaves) and from a
# prompt on a pseudo-terminal with the echo off (and back on after, also
# after SIGINT), the API's own refusals changing nothing, 409 for a secret
# in use, another project's secret, and 501 on a deployment without a
# secret key.  The value is never printed back by any command.
#
# boxd never shows a secret's value, so what exactly box sends is seen by a
# small HTTP server of this test that records the PUT bodies it gets.

import json
import os
import select
import signal
import subprocess
import termios
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from clitest import BOX, Client, box, check, env_for
import boxtest
from boxtest import Boxd, Tap

t = Tap()
d = Boxd(t).start()
KEY = d.project_with_key('secrets')
OTHER_KEY = d.project_with_key('other')
c = Client(d, KEY)

VALUE = 'cli-VALUE-4be81d07c2aa-do-not-print'


def api(method, path, body=None, key=KEY):
    return d.request(method, path, body, token=key)


def no_value(t, r, desc, value=VALUE):
    t.ok(value not in r.out and value not in r.err, desc + ': the value is not printed',
         r.describe())


def test_usage(t):
    r = box(['--help'])
    t.ok(' secrets ' in r.out and ' secret put|get|delete' in r.out,
         'box --help lists secrets and secret', r.out)
    r = box(['secret', 'put', '--help'])
    check(t, r, 0, 'box secret put --help exits 0')
    for opt in ('--host', '--inject', '--prefix', '--json'):
        t.ok(opt in r.out, 'box secret put --help lists %s' % opt, r.out)
    t.ok('--value' not in r.out, 'there is no --value option', r.out)
    t.ok('standard input' in r.out and 'terminal' in r.out and 'once' in r.out,
         'the help says where the value comes from (stdin, or asked once on a terminal)', r.out)
    for args in (['secret', '--help'], ['help', 'secret'], ['secrets', '--help'],
                 ['secret', 'get', '--help'], ['secret', 'delete', '--help']):
        check(t, box(args), 0, 'box %s exits 0' % ' '.join(args))
    r = box(['create', '--help'])
    t.ok('--secret' in r.out, 'box create --help lists --secret', r.out)

    cases = [
        (['secret'], 'no action', 'put, get or delete'),
        (['secret', 'frob', 'X'], 'an unknown action', 'put, get or delete'),
        (['secret', 'put'], 'no name', 'Missing arguments'),
        (['secret', 'put', 'A', 'B', '--host', 'h.example.com'], 'two names', 'Unexpected'),
        (['secret', 'put', 'TOKEN'], 'no --host', '--host'),
        (['secret', 'put', 'lower', '--host', 'h.example.com'], 'a lowercase name', 'not a secret name'),
        (['secret', 'put', '1A', '--host', 'h.example.com'], 'a name starting with a digit',
         'not a secret name'),
        (['secret', 'put', 'A' * 65, '--host', 'h.example.com'], 'a name of 65', 'not a secret name'),
        (['secret', 'put', 'TOKEN', '--host', 'h.example.com', '--value', VALUE], '--value',
         'Unknown option'),
        (['secret', 'put', 'TOKEN', '--host', 'h.example.com', '--inject', 'Bearer {value}'],
         '--inject without a colon', 'HEADER: FORMAT'),
        (['secret', 'put', 'TOKEN', '--host', 'h.example.com', '--inject', ': Bearer {value}'],
         '--inject without a header', 'HEADER: FORMAT'),
        (['secret', 'put', 'TOKEN', '--host', 'h.example.com', '--inject', 'X Api: {value}'],
         '--inject with a space in the header', 'not a header name'),
        (['secret', 'put', 'TOKEN', '--host', 'h.example.com', '--inject', 'Authorization: Bearer'],
         '--inject without {value}', 'needs {value}'),
        (['secret', 'get'], 'get without a name', 'Missing arguments'),
        (['secret', 'get', 'A', 'B'], 'get with two names', 'Unexpected'),
        (['secret', 'delete'], 'delete without a name', 'Missing arguments'),
        (['secrets', 'X'], 'secrets with an argument', 'Unexpected'),
    ]
    for args, what, says in cases:
        r = box(args, stdin=VALUE + '\n')   # no key: a usage error comes first
        check(t, r, 2, 'usage error (%s): exit 2' % what)
        t.ok(r.out == '' and r.err.startswith('box: ') and says in r.err,
             'usage error (%s): "box: ... %s" on stderr only' % (what, says), r.describe())
        no_value(t, r, 'usage error (%s)' % what)
    r = box(['secret', 'put', 'TOKEN', '--host', 'h.example.com'], url=c.url, stdin=VALUE)
    check(t, r, 3, 'no key: exit 3 before the value is read', err_contains='BOX_KEY')
    no_value(t, r, 'no key')


def test_put_get_list(t):
    r = c('secret', 'put', 'GITHUB_TOKEN', '--host', 'api.github.com', '--host', '*.github.com/v3',
          stdin=VALUE + '\n')
    check(t, r, 0, 'secret put with the value on stdin')
    no_value(t, r, 'put')
    t.ok('__box_github_token__' in r.out, 'put prints the placeholder', r.out)
    lines = dict(l.split(':', 1) for l in r.out.splitlines() if ':' in l)
    t.eq({k: v.strip() for k, v in lines.items() if k in ('Name', 'Hosts', 'Placeholder')},
         {'Name': 'GITHUB_TOKEN', 'Hosts': 'api.github.com, *.github.com/v3',
          'Placeholder': '__box_github_token__'}, 'put prints name, hosts, placeholder')
    t.ok('Inject:' in r.out and 'Created:' in r.out and 'Updated:' in r.out,
         'put prints inject and the times', r.out)
    s = api('GET', '/v1/secrets/GITHUB_TOKEN')
    t.status(s, 200, 'the API has the secret')
    t.eq((s[2] or {}).get('hosts'), ['api.github.com', '*.github.com/v3'], 'hosts in order')
    t.eq((s[2] or {}).get('inject'), None, 'no --inject: inject null')

    r = c('secret', 'put', 'API_KEY', '--host', 'api.example.com', '--inject',
          'X-Api-Key:   Token {value}', '--prefix', 'ak_', '--json', stdin=VALUE)
    check(t, r, 0, 'secret put with --inject, --prefix and --json (no line end on stdin)')
    no_value(t, r, 'put --json')
    try:
        put = json.loads(r.out)
    except ValueError:
        put = None
    t.eq((put or {}).get('inject'), {'header': 'X-Api-Key', 'format': 'Token {value}'},
         '--inject "H:   F" -> {header: H, format: F} (the spaces after the colon dropped)')
    t.eq((put or {}).get('placeholder'), 'ak___box_api_key__', '--prefix goes before the placeholder')
    t.eq(put, api('GET', '/v1/secrets/API_KEY')[2], 'put --json prints what the API holds')

    r = c('secrets')
    check(t, r, 0, 'box secrets')
    no_value(t, r, 'secrets')
    rows = [l.split() for l in r.out.splitlines()]
    t.eq(rows[0] if rows else None, ['NAME', 'HOSTS', 'PLACEHOLDER', 'INJECT', 'UPDATED'],
         'the table\'s header')
    by_name = {row[0]: row for row in rows[1:]}
    t.eq(by_name.get('GITHUB_TOKEN', [])[1:4],
         ['api.github.com,*.github.com/v3', '__box_github_token__', '-'],
         'GITHUB_TOKEN\'s row: hosts, placeholder, no inject')
    t.eq(by_name.get('API_KEY', [])[1:5],
         ['api.example.com', 'ak___box_api_key__', 'X-Api-Key:', 'Token'],
         'API_KEY\'s row shows the inject header and format')
    t.ok('{value}' in r.out, '... with {value}', r.out)
    r = c('secrets', '--json')
    check(t, r, 0, 'box secrets --json')
    try:
        listed = json.loads(r.out)
    except ValueError:
        listed = None
    t.eq(listed, api('GET', '/v1/secrets')[2], 'secrets --json prints the API\'s {secrets: [...]}')
    no_value(t, r, 'secrets --json')

    r = c('secret', 'get', 'GITHUB_TOKEN')
    check(t, r, 0, 'box secret get')
    t.ok('__box_github_token__' in r.out and 'api.github.com' in r.out,
         'get shows placeholder and hosts', r.out)
    t.ok('none (the placeholder is replaced' in r.out, 'get says how a null inject works', r.out)
    r = c('secret', 'get', 'API_KEY', '--json')
    check(t, r, 0, 'box secret get --json')
    t.eq(json.loads(r.out) if r.rc == 0 else None, api('GET', '/v1/secrets/API_KEY')[2],
         'get --json prints the Secret')
    r = c('secret', 'get', 'NOPE')
    check(t, r, 1, 'get of an unknown secret: exit 1', err_contains='(not_found)')
    r = box(['secret', 'get', 'GITHUB_TOKEN'], url=c.url, key=OTHER_KEY)
    check(t, r, 1, 'another project\'s secret: not_found', err_contains='(not_found)')

    # a replace: created_at kept, the new hosts hold
    before = api('GET', '/v1/secrets/GITHUB_TOKEN')[2] or {}
    r = c('secret', 'put', 'GITHUB_TOKEN', '--host', 'api.github.com', stdin=VALUE + '-2\n')
    check(t, r, 0, 'put replaces')
    after = api('GET', '/v1/secrets/GITHUB_TOKEN')[2] or {}
    t.eq((after.get('hosts'), after.get('created_at')), (['api.github.com'], before.get('created_at')),
         'the replace set the hosts and kept created_at')


def test_value_checks(t):
    base = ['secret', 'put', 'CHECKED', '--host', 'h.example.com']
    cases = [
        (b'', 'an empty stdin', 'holds no value'),
        (b'\n', 'only a line end', 'holds no value'),
        (b'\r\n', 'only CR LF', 'holds no value'),
        (b'abc\ndef\n', 'a LF inside', 'CR, LF or NUL'),
        (b'abc\n\n', 'two line ends', 'CR, LF or NUL'),
        (b'abc\rdef', 'a CR inside', 'CR, LF or NUL'),
        (b'abc\r', 'a CR at the end without LF', 'CR, LF or NUL'),
        (b'abc\x00def', 'a NUL', 'CR, LF or NUL'),
        (b'x' * 8193, '8193 bytes', 'longer than 8192'),
        (b'x' * 8193 + b'\n', '8193 bytes and a line end', 'longer than 8192'),
        (b'x' * 1000000, 'a megabyte', 'longer than 8192'),
        (b'abc\xff\xfe', 'bytes that are not UTF-8', 'not UTF-8'),
    ]
    for data, what, says in cases:
        r = c(*base, stdin=data)
        check(t, r, 2, 'a value with %s: exit 2' % what, err_contains=says)
        t.ok(r.out == '' and 'nothing was changed' in r.err, '... nothing was changed (%s)' % what,
             r.describe())
    t.error(api('GET', '/v1/secrets/CHECKED'), 404, 'not_found', 'no refused value was stored')
    r = c(*base, stdin=b'y' * 8192 + b'\n')
    check(t, r, 0, 'a value of 8192 bytes and a line end is taken')
    r = c(*base, stdin='schlüssel-ключ')
    check(t, r, 0, 'a UTF-8 value is taken')

    # the API's own refusals: 400 invalid, shown as the API says, nothing changed
    before = api('GET', '/v1/secrets/CHECKED')[2]
    for args, what in ((['--host', 'https://h.example.com'], 'a host with a scheme'),
                       (['--host', 'h.example.com:8443'], 'a host with a port'),
                       (['--host', 'h.example.com', '--inject', 'Host: {value}'],
                        'an inject header that routes the request'),
                       (['--host', 'h.example.com', '--prefix', 'a b'], 'a prefix with a space')):
        r = c('secret', 'put', 'CHECKED', *args, stdin=VALUE)
        check(t, r, 1, 'the API refuses %s: exit 1' % what, err_contains='(invalid)')
        no_value(t, r, 'refused (%s)' % what)
    t.eq(api('GET', '/v1/secrets/CHECKED')[2], before, 'the refusals changed nothing')


def test_sandboxes_and_delete(t):
    r = c('create', '--name', 'user', '--secret', 'GITHUB_TOKEN', '--secret', 'API_KEY')
    check(t, r, 0, 'create --secret (twice)', out='user\n')
    t.eq((api('GET', '/v1/sandboxes/user')[2] or {}).get('secrets'), ['GITHUB_TOKEN', 'API_KEY'],
         'the sandbox uses both secrets')
    r = c('get', 'user')
    t.ok(any(l.startswith('Secrets:') and l.split(':', 1)[1].strip() == 'GITHUB_TOKEN, API_KEY'
             for l in r.out.splitlines()), 'box get shows the sandbox\'s secrets', r.out)
    r = c('create', '--name', 'nosuch', '--secret', 'NO_SUCH_SECRET')
    check(t, r, 1, 'create naming an unknown secret: exit 1', err_contains='(invalid)')
    r = c('create', '--name', 'clash', '--secret', 'API_KEY', '--env', 'API_KEY=x')
    check(t, r, 1, 'create with the secret\'s name in --env too: exit 1', err_contains='(invalid)')

    # forks: the source's secrets unless given
    check(t, c('fork', 'user', '--name', 'f-same'), 0, 'fork without --secret')
    check(t, c('fork', 'user', '--name', 'f-own', '--secret', 'GITHUB_TOKEN'), 0,
          'fork --secret')
    check(t, c('fork', 'user', '--name', 'f-none', '--no-secrets'), 0, 'fork --no-secrets')
    t.eq([(api('GET', '/v1/sandboxes/' + n)[2] or {}).get('secrets')
          for n in ('f-same', 'f-own', 'f-none')],
         [['GITHUB_TOKEN', 'API_KEY'], ['GITHUB_TOKEN'], []],
         'the forks have the source\'s secrets, their own, none')
    r = c('fork', 'user', '--secret', 'API_KEY', '--no-secrets')
    check(t, r, 2, 'fork --secret with --no-secrets: exit 2', err_contains='contradict')
    check(t, c('delete', 'f-same', 'f-own', 'f-none'), 0, 'the forks are deleted')

    r = c('secret', 'delete', 'API_KEY')
    check(t, r, 1, 'deleting a secret in use: exit 1', err_contains='(conflict)')
    t.ok('user' in r.err and 'first' in r.err, 'the conflict names the sandbox and what to do',
         r.err)
    t.status(api('GET', '/v1/secrets/API_KEY'), 200, 'the secret is still there')
    r = c('secret', 'delete', 'NOPE', 'CHECKED')
    check(t, r, 1, 'delete of an unknown and a known secret: exit 1 (the first failure)',
          err_contains='(not_found)')
    t.eq(r.out, 'CHECKED\n', '... the known one is deleted and named')
    t.error(api('GET', '/v1/secrets/CHECKED'), 404, 'not_found', 'CHECKED is gone')
    check(t, c('delete', 'user'), 0, 'the sandbox is deleted')
    r = c('secret', 'delete', 'API_KEY', 'GITHUB_TOKEN')
    check(t, r, 0, 'delete once no sandbox uses them', out='API_KEY\nGITHUB_TOKEN\n')
    r = c('secrets')
    check(t, r, 0, 'secrets with none left')
    t.eq(r.out.splitlines()[1:], [], 'only the header')


# ---- what exactly box sends ---------------------------------------------

class Recorder(BaseHTTPRequestHandler):
    bodies = []

    def do_PUT(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = json.loads(self.rfile.read(n))
        Recorder.bodies.append((self.path, body))
        name = self.path.rsplit('/', 1)[-1]
        answer = json.dumps({'name': name, 'hosts': body.get('hosts'),
                             'placeholder': '__box_%s__' % name.lower(),
                             'inject': body.get('inject'), 'created_at': '2026-01-01T00:00:00Z',
                             'updated_at': '2026-01-01T00:00:00Z'}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def test_what_is_sent(t):
    server = ThreadingHTTPServer(('127.0.0.1', 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = 'http://127.0.0.1:%d' % server.server_address[1]
    try:
        for data, want, what in ((b'abc\n', 'abc', 'one LF dropped'),
                                 (b'abc\r\n', 'abc', 'one CR LF dropped'),
                                 (b'abc', 'abc', 'no line end'),
                                 (b' a\tb ', ' a\tb ', 'spaces and tabs kept'),
                                 ('ключ\n'.encode(), 'ключ', 'UTF-8 kept')):
            Recorder.bodies.clear()
            r = box(['secret', 'put', 'SENT', '--host', 'a.example.com', '--host', '10.1.2.3'],
                    url=url, key=KEY, stdin=data)
            check(t, r, 0, 'put to the recorder (%s)' % what)
            body = Recorder.bodies[0][1] if Recorder.bodies else {}
            t.eq(body.get('value'), want, 'the value sent: %s' % what)
        t.eq(Recorder.bodies[0], ('/v1/secrets/SENT', {'value': 'ключ',
                                                       'hosts': ['a.example.com', '10.1.2.3']}),
             'the body holds only value and hosts without --inject or --prefix')
        Recorder.bodies.clear()
        r = box(['secret', 'put', 'SENT', '--host', 'a.example.com', '--inject',
                 'Authorization:Bearer {value}', '--prefix', 'p_'], url=url, key=KEY, stdin='v')
        check(t, r, 0, 'put with --inject and --prefix to the recorder')
        t.eq(Recorder.bodies[0][1] if Recorder.bodies else None,
             {'value': 'v', 'hosts': ['a.example.com'], 'placeholder_prefix': 'p_',
              'inject': {'header': 'Authorization', 'format': 'Bearer {value}'}},
             'the body holds inject and placeholder_prefix')
    finally:
        server.shutdown()
        server.server_close()


# ---- the prompt on a terminal -------------------------------------------

def read_until(fd, text=None, timeout=10):
    """What the terminal shows until @text appears (None: until it is
    quiet for 0.2 s), EOF or @timeout."""
    got = b''
    deadline = time.time() + timeout
    while (text is None or text.encode() not in got) and time.time() < deadline:
        if not select.select([fd], [], [], 0.2)[0]:
            if text is None:
                break
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        got += chunk
    return got.decode('utf-8', 'replace')


def echo_on(fd):
    return bool(termios.tcgetattr(fd)[3] & termios.ECHO)


def prompt_run(t, args, typed, desc):
    """box with stdin and stderr on a pseudo-terminal: waits for the prompt,
    checks the echo is off, types @typed (None: SIGINT instead); returns
    (exit status, stdout, what the terminal showed)."""
    master, slave = os.openpty()
    try:
        p = subprocess.Popen([BOX] + args, stdin=slave, stderr=slave, stdout=subprocess.PIPE,
                             env=env_for(c.url, KEY), start_new_session=True)
        shown = read_until(master, '(not shown')
        t.ok('Value of ' in shown, '%s: box prompts on the terminal' % desc, shown)
        t.ok(not echo_on(slave), '%s: the echo is off when the prompt shows' % desc)
        if typed is None:
            p.send_signal(signal.SIGINT)
        else:
            os.write(master, typed.encode() + b'\n')
        try:
            rc = p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        out = p.stdout.read().decode('utf-8', 'replace')
        p.stdout.close()
        shown += read_until(master)
        t.ok(echo_on(slave), '%s: the echo is on again afterwards' % desc)
        return rc, out, shown
    finally:
        os.close(master)
        os.close(slave)


def test_prompt(t):
    args = ['secret', 'put', 'PROMPTED', '--host', 'p.example.com']
    rc, out, shown = prompt_run(t, args, VALUE, 'a typed value')
    t.eq(rc, 0, 'a typed value: exit 0')
    t.ok(VALUE not in shown and VALUE not in out, 'the typed value is not shown nor printed',
         (shown, out))
    t.ok('__box_prompted__' in out, 'the secret is printed with its placeholder', out)
    t.status(api('GET', '/v1/secrets/PROMPTED'), 200, 'the API has the prompted secret')

    rc, out, shown = prompt_run(t, ['secret', 'put', 'EMPTY', '--host', 'p.example.com'], '',
                                'an empty line')
    t.eq(rc, 2, 'an empty line: exit 2')
    t.ok('No value was typed' in shown, 'an empty line: says so', shown)
    t.error(api('GET', '/v1/secrets/EMPTY'), 404, 'not_found', 'an empty line stores nothing')

    rc, out, shown = prompt_run(t, ['secret', 'put', 'LONG', '--host', 'p.example.com'],
                                'k' * 4094, 'a typed value of 4094 bytes')
    t.eq(rc, 0, 'a typed value of 4094 bytes: exit 0')
    rc, out, shown = prompt_run(t, ['secret', 'put', 'CUT', '--host', 'p.example.com'],
                                'k' * 5000, 'a typed line of 5000 bytes')
    t.eq(rc, 2, 'a typed line of 5000 bytes (cut by the terminal): exit 2')
    t.ok('may have been cut' in shown, '... says it may have been cut', shown[-300:])
    t.error(api('GET', '/v1/secrets/CUT'), 404, 'not_found', 'a cut value is not stored')

    rc, out, shown = prompt_run(t, ['secret', 'put', 'INTERRUPTED', '--host', 'p.example.com'],
                                None, 'SIGINT at the prompt')
    t.eq(rc, -signal.SIGINT, 'SIGINT at the prompt ends box by the signal')
    t.error(api('GET', '/v1/secrets/INTERRUPTED'), 404, 'not_found', 'an interrupted put stores nothing')
    check(t, c('secret', 'delete', 'PROMPTED', 'LONG'), 0, 'the prompted secrets are deleted')


# ---- a deployment without a secret key ---------------------------------

def test_no_secret_key(t):
    nd = Boxd(t, extra_args=['--no-secret-key']).start()
    try:
        key = nd.project_with_key('nokey')
        nc = Client(nd, key)
        for args, stdin in ((['secrets'], None),
                            (['secrets', '--json'], None),
                            (['secret', 'put', 'TOKEN', '--host', 'h.example.com'], VALUE),
                            (['secret', 'get', 'TOKEN'], None),
                            (['secret', 'delete', 'TOKEN'], None),
                            (['create', '--name', 'x', '--secret', 'TOKEN'], None)):
            r = nc(*args, stdin=stdin)
            check(t, r, 1, 'no secret key: box %s: exit 1 (unsupported)' % ' '.join(args),
                  err_contains='(unsupported)')
            no_value(t, r, 'no secret key: box %s' % ' '.join(args))
        check(t, nc('create', '--name', 'plain'), 0, 'no secret key: create without secrets works')
    finally:
        nd.stop()


boxtest.main(t, test_usage, test_put_get_list, test_value_checks, test_sandboxes_and_delete,
             test_what_is_sent, test_prompt, test_no_secret_key)
