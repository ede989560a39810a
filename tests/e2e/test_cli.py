#!/usr/bin/env python3
# e2e: boxd --help and where the admin token comes from.

import json
import os
import shutil
import stat
import subprocess

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
    boxtest.main(Tap(), test_help, test_env_token_wins, test_generated_token, test_with_curl)
