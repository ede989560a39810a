#!/usr/bin/env python3
# e2e: boxd --help and where the admin token comes from.

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile

import boxtest
from boxtest import Boxd, Tap


def test_help(t):
    p = subprocess.run([boxtest.BOXD, '--help'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    out = p.stdout.decode('utf-8', 'replace')
    t.eq(p.returncode, 0, 'boxd --help exits 0')
    t.ok('--data-dir' in out, 'boxd --help lists --data-dir', out[:1500])
    t.ok('--listen' in out, 'boxd --help lists --listen', out[:1500])
    p = subprocess.run([boxtest.BOXD, '--no-such-option'], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=20)
    t.ok(p.returncode != 0, 'boxd with an unknown option exits non-zero', p.returncode)


def token_file(data_dir):
    return os.path.join(data_dir, 'admin-token')


def test_env_token_wins(t):
    d = Boxd(t)
    os.makedirs(d.data_dir, mode=0o700)
    file_token = 'from-file-' + boxtest.random_token()
    fd = os.open(token_file(d.data_dir), os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, (file_token + '\n').encode())
    os.close(fd)
    d.start()
    try:
        t.status(d.admin('GET', '/v1/projects'), 200, 'BOX_ADMIN_TOKEN works')
        t.error(d.request('GET', '/v1/projects', token=file_token), 401, 'unauthorized',
                'the token file is not used when BOX_ADMIN_TOKEN is set')
        t.error(d.request('GET', '/v1/projects', token=d.admin_token + 'x'), 401, 'unauthorized',
                'a longer token is refused')
        t.error(d.request('GET', '/v1/projects', token=d.admin_token[:-1]), 401, 'unauthorized',
                'a prefix of the token is refused')
    finally:
        d.stop()


def test_short_token_refused(t):
    """A guessable admin token stops boxd at start (not a warning)."""
    for token, where in [('short-token-15c', 'BOX_ADMIN_TOKEN'), ('a' * 15, 'BOX_ADMIN_TOKEN')]:
        d = Boxd(t, admin_token=token)
        d.start(wait=False)
        try:
            rc = d.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            rc = None
        t.ok(rc is not None and rc != 0, 'boxd refuses a %d-character admin token from %s' % (len(token), where),
             'exit: %r' % (rc,))
        t.ok('shorter than 16 characters' in d.log_text(), 'the log says why', d.log_text()[-600:])
        t.ok(d.port is not None and not port_open(d.port), 'nothing listens after the refusal')
        d.proc = None
        d.logf.close()
    # in the token file: refused as well, and the file is named
    d = Boxd(t, env_token=False)
    os.makedirs(d.data_dir, mode=0o700)
    fd = os.open(token_file(d.data_dir), os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, b'tooshort\n')
    os.close(fd)
    d.start(wait=False)
    try:
        rc = d.proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        rc = None
    t.ok(rc is not None and rc != 0, 'boxd refuses a short token from its token file', 'exit: %r' % (rc,))
    t.ok(token_file(d.data_dir) in d.log_text(), 'the log names the token file', d.log_text()[-600:])
    d.proc = None
    d.logf.close()
    # 16 characters is enough
    d = Boxd(t, admin_token='sixteen-chars-ok').start()
    try:
        t.status(d.admin('GET', '/v1/projects'), 200, 'a 16-character admin token works')
    finally:
        d.stop()


def port_open(port):
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=0.5):
            return True
    except OSError:
        return False


def test_generated_token(t):
    d = Boxd(t, env_token=False).start()
    path = token_file(d.data_dir)
    try:
        t.ok(os.path.isfile(path), 'without BOX_ADMIN_TOKEN a token file is generated into the data dir', path)
        mode = stat.S_IMODE(os.stat(path).st_mode) if os.path.exists(path) else None
        t.eq(mode, 0o600, 'token file mode 0600')
        with open(path) as f:
            tok = f.read().strip()
        t.ok(len(tok) >= 20, 'generated token is long enough', len(tok))
        t.status(d.request('GET', '/v1/projects', token=tok), 200, 'generated token works')
        t.error(d.request('GET', '/v1/projects', token=d.admin_token), 401, 'unauthorized',
                'a random other token is refused')
        r = d.request('POST', '/v1/projects', {'name': 'alpha'}, token=tok)
        t.status(r, 201, 'generated token creates a project')
    finally:
        d.stop()
    d.start()
    try:
        with open(path) as f:
            tok2 = f.read().strip()
        t.eq(tok2, tok, 'token file kept across a restart')
        t.status(d.request('GET', '/v1/projects/alpha', token=tok), 200, 'the same token works after a restart')
    finally:
        d.stop()


FIRST_KEY = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools', 'setup-first-key.sh')


def test_setup_first_key(t):
    """tools/setup.sh's first key: the admin token never on a command line."""
    curl = shutil.which('curl')
    if curl is None or shutil.which('jq') is None:
        t.skip('setup-first-key.sh', 'curl or jq not installed')
        return
    d = Boxd(t).start()
    wrap = tempfile.mkdtemp(prefix='box-e2e-curl-')
    argv_log = os.path.join(wrap, 'argv.log')
    with open(os.path.join(wrap, 'curl'), 'w') as f:
        # logs every argument, NUL-separated, then runs the real curl
        f.write('#!/bin/sh\nprintf "%%s\\0" "$@" >>"%s"\nprintf "\\n" >>"%s"\nexec %s "$@"\n'
                % (argv_log, argv_log, curl))
    os.chmod(os.path.join(wrap, 'curl'), 0o755)
    env = dict(os.environ, PATH=wrap + os.pathsep + os.environ.get('PATH', ''))
    try:
        p = subprocess.run([FIRST_KEY, 'http://127.0.0.1:%d' % d.port], input=(d.admin_token + '\n').encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
        key = p.stdout.decode().strip()
        t.ok(p.returncode == 0, 'setup-first-key.sh exits 0', p.stderr.decode()[-500:])
        t.status(d.request('GET', '/v1/whoami', token=key), 200, 'the key it printed works')
        with open(argv_log, 'rb') as f:
            calls = f.read()
        t.ok(calls.count(b'\n') >= 2, 'it ran curl (twice)', calls[:300])
        t.ok(d.admin_token.encode() not in calls, 'the admin token is on no curl command line')
        headers = [a for a in calls.replace(b'\n', b'\0').split(b'\0') if a.startswith(b'@')]
        t.ok(headers and all(not os.path.exists(h[1:].decode()) for h in headers),
             'the header file is gone afterwards', headers)
        p = subprocess.run([FIRST_KEY, 'http://127.0.0.1:%d' % d.port], input=b'',
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
        t.ok(p.returncode != 0, 'without a token on stdin it fails', p.returncode)
    finally:
        shutil.rmtree(wrap, ignore_errors=True)
        d.stop()


def test_with_curl(t):
    curl = shutil.which('curl')
    if curl is None:
        t.skip('curl drives boxd', 'curl not installed')
        return
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        base = 'http://127.0.0.1:%d' % d.port

        def run(*args):
            p = subprocess.run([curl, '-sS', '-w', '\n%{http_code}'] + list(args), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, timeout=30)
            out = p.stdout.decode('utf-8', 'replace')
            body, _, code = out.rpartition('\n')
            try:
                parsed = json.loads(body) if body else None
            except ValueError:
                parsed = None
            return code, parsed, body

        # curl -d sends application/x-www-form-urlencoded: still read as JSON
        code, body, raw = run('-H', 'Authorization: Bearer ' + key, '-d', '{"name": "curled"}',
                              base + '/v1/sandboxes')
        t.eq(code, '201', 'curl -d \'{"name": "curled"}\' /v1/sandboxes -> 201')
        t.eq((body or {}).get('name'), 'curled', 'curl: the sandbox is named curled')
        code, body, raw = run('-H', 'Authorization: Bearer ' + key, base + '/v1/sandboxes/curled')
        t.eq(code, '200', 'curl GET /v1/sandboxes/curled -> 200')
        code, body, raw = run(base + '/v1/sandboxes')
        t.eq(code, '401', 'curl without a key -> 401')
        t.eq(body, {'error': {'code': 'unauthorized', 'message': 'a valid API key is required'}},
             'curl without a key: the error body')
        code, body, raw = run('-X', 'DELETE', '-H', 'Authorization: Bearer ' + key, base + '/v1/sandboxes/curled')
        t.eq(code, '204', 'curl -X DELETE -> 204')
        code, body, raw = run('-H', 'Authorization: Bearer ' + key, '-H', 'Content-Type: application/xml',
                              '-d', '{}', base + '/v1/sandboxes')
        t.eq(code, '400', 'curl with Content-Type application/xml -> 400')
        t.eq(((body or {}).get('error') or {}).get('code'), 'invalid', 'code invalid for a non-JSON type')
        t.eq(d.sandbox_ids(key), [], 'nothing left behind')
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_help, test_env_token_wins, test_short_token_refused, test_generated_token,
                 test_setup_first_key, test_with_curl)
