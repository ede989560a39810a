#!/usr/bin/env python3
"""The test internet of the secrets broker suite (test_broker.py).

egress_world.World's namespaces and resolver (TEST-NET-2, nothing leaves
the host), with HTTPS servers of its own, each on its own address, port
443, a process started in the internet namespace with this file:

  echo   MODE=echo: every request's head and body are appended to LOG as
         JSON {id, server, sni, method, path, headers: [[name, value]...],
         body}; the answer is {id, server, sni, method} only, never the
         head (a broker refuses answers that carry a secret's value).
         Under /git/ it is a git smart HTTP server (git http-backend on
         GITROOT) that asks for Basic credentials (401) until it gets some.
  reflect  answers 200 with the value of the request's X-Reflect header in
         an X-Reflected header and as the body
  ws     a WebSocket echo: logs the upgrade head as echo does, then each
         message ({ws: payload}) and sends it back

The certificates: a test CA (the broker is told to trust it) and a leaf
for every name, and a rogue CA nobody trusts with a leaf for the "bad"
server.  `broker_world.py selftest` builds the world and drives each
server from the host (root; no boxd, no VM).  Standard library only.
"""

import base64
import hashlib
import json
import os
import socket
import socketserver
import ssl
import subprocess
import sys
import threading

from egress_world import World, _sh, tls_accept

D = 'br.example'
ADDR = {'echo': '198.51.100.30', 'reflect': '198.51.100.31', 'ws': '198.51.100.32',
        'bad': '198.51.100.33', 'plain': '198.51.100.34'}
# name -> the server (address) it points at
NAMES = {'echo': 'echo', 'pfx': 'echo', 'inj': 'echo', 'reflect': 'reflect', 'ws': 'ws',
         'bad': 'bad', 'plain': 'plain', 'nope': 'plain'}
WS_GUID = b'258EAFA5-E914-47DA-95CA-C5AB0DC11B85'
MAX_HEAD = 64 * 1024
MAX_BODY = 8 * 1024 * 1024


def host(name):
    return '%s.%s' % (name, D)


# ---- the servers ----------------------------------------------------------


def _read_head(rfile):
    """(method, path, [[name, value]...]) of the next request, or None."""
    line = rfile.readline(8192)
    if not line or not line.strip():
        return None
    parts = line.decode('latin-1').split()
    headers, size = [], len(line)
    while True:
        h = rfile.readline(8192)
        size += len(h)
        if h in (b'\r\n', b'\n', b'') or size > MAX_HEAD:
            break
        k, _, v = h.decode('latin-1').partition(':')
        headers.append([k.strip(), v.strip()])
    return (parts[0] if parts else '', parts[1] if len(parts) > 1 else '', headers)


def _get(headers, name):
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _read_body(rfile, headers):
    if (_get(headers, 'transfer-encoding') or '').lower() == 'chunked':
        out = b''
        while len(out) <= MAX_BODY:
            n = int(rfile.readline(100).split(b';')[0].strip() or b'0', 16)
            if n == 0:
                while rfile.readline(8192) not in (b'\r\n', b'\n', b''):
                    pass
                return out
            out += rfile.read(n)
            rfile.readline(10)
        raise ValueError('body too big')
    n = int(_get(headers, 'content-length') or 0)
    if n > MAX_BODY:
        raise ValueError('body too big')
    return rfile.read(n) if n else b''


def _git(gitroot, method, path, headers, body):
    """(status line, [[name, value]], body) of git http-backend for @path
    (under /git)."""
    p, _, query = path[len('/git'):].partition('?')
    env = {'GIT_PROJECT_ROOT': gitroot, 'GIT_HTTP_EXPORT_ALL': '1', 'PATH_INFO': p,
           'QUERY_STRING': query, 'REQUEST_METHOD': method, 'REMOTE_USER': 'test',
           'REMOTE_ADDR': '198.51.100.1', 'CONTENT_TYPE': _get(headers, 'content-type') or '',
           'CONTENT_LENGTH': str(len(body)), 'PATH': os.environ.get('PATH', '/usr/bin:/bin')}
    for name, var in (('content-encoding', 'HTTP_CONTENT_ENCODING'), ('git-protocol', 'GIT_PROTOCOL')):
        if _get(headers, name):
            env[var] = _get(headers, name)
    r = subprocess.run(['git', 'http-backend'], input=body, env=env, capture_output=True, timeout=60)
    head, _, out = r.stdout.partition(b'\r\n\r\n')
    status, hdrs = '200 OK', []
    for line in head.decode('latin-1').split('\r\n'):
        k, _, v = line.partition(':')
        if k.lower() == 'status':
            status = v.strip()
        elif k:
            hdrs.append([k, v.strip()])
    return status, hdrs, out


def _respond(wfile, status, headers, body):
    head = 'HTTP/1.1 %s\r\n' % status + ''.join('%s: %s\r\n' % (k, v) for k, v in headers)
    wfile.write(head.encode('latin-1') + b'Content-Length: %d\r\n\r\n' % len(body) + body)
    wfile.flush()


def _ws_frames(rfile, wfile, log):
    """Unmasks each client frame, logs it, sends it back unmasked."""
    while True:
        b = rfile.read(2)
        if len(b) < 2:
            return
        op, n = b[0] & 0x0F, b[1] & 0x7F
        if n == 126:
            n = int.from_bytes(rfile.read(2), 'big')
        elif n == 127:
            n = int.from_bytes(rfile.read(8), 'big')
        if n > MAX_BODY:
            return
        mask = rfile.read(4) if b[1] & 0x80 else b'\0\0\0\0'
        data = bytes(c ^ mask[i % 4] for i, c in enumerate(rfile.read(n)))
        if op == 8:
            wfile.write(b'\x88\x00')
            wfile.flush()
            return
        log({'ws': data.decode('latin-1'), 'op': op})
        hdr = bytes([0x80 | op]) + (bytes([len(data)]) if len(data) < 126 else
                                    b'\x7e' + len(data).to_bytes(2, 'big'))
        wfile.write(hdr + data)
        wfile.flush()


def serve(mode, bind, port, logpath, ready, cert, key, gitroot=''):
    lock = threading.Lock()
    counter = [0]

    def log(rec):
        with lock, open(logpath, 'a') as f:
            f.write(json.dumps(rec) + '\n')

    class Handler(socketserver.StreamRequestHandler):
        timeout = 30

        def handle(self):
            sni = self.server.sni_of.pop(id(self.connection), None)
            while True:
                req = _read_head(self.rfile)
                if req is None:
                    return
                method, path, headers = req
                try:
                    body = _read_body(self.rfile, headers)
                except ValueError:
                    return
                with lock:
                    counter[0] += 1
                    rid = counter[0]
                short = {'id': rid, 'server': bind, 'sni': sni, 'method': method}
                rec = dict(short, path=path, headers=headers, body=body.decode('latin-1'))
                log(rec)
                if mode == 'ws':
                    k = (_get(headers, 'sec-websocket-key') or '').encode()
                    acc = base64.b64encode(hashlib.sha1(k + WS_GUID).digest()).decode()
                    self.wfile.write(('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n'
                                      'Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n' % acc).encode())
                    self.wfile.flush()
                    _ws_frames(self.rfile, self.wfile, log)
                    return
                if mode == 'reflect':
                    v = _get(headers, 'x-reflect') or ''
                    _respond(self.wfile, '200 OK', [['X-Reflected', v], ['Content-Type', 'text/plain']],
                             v.encode('latin-1'))
                elif path.startswith('/git/') and not _get(headers, 'authorization'):
                    _respond(self.wfile, '401 Unauthorized', [['WWW-Authenticate', 'Basic realm="git"']], b'')
                elif path.startswith('/git/'):
                    _respond(self.wfile, *_git(gitroot, method, path, headers, body))
                else:
                    _respond(self.wfile, '200 OK', [['Content-Type', 'application/json']],
                             json.dumps(short).encode() + b'\n')

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True
        sni_of = {}

        def get_request(self):
            sock, addr = super().get_request()
            tls, sni = tls_accept(sock, cert, key)
            tls.settimeout(30)
            self.sni_of[id(tls)] = sni
            return tls, addr

        def handle_error(self, request, client_address):
            pass

    srv = Server((bind, int(port)), Handler)
    open(logpath, 'a').close()
    open(ready, 'w').close()
    srv.serve_forever()


# ---- the world -------------------------------------------------------------


class BrokerWorld(World):
    def _spawn(self, ns, *args):
        if args[0] != 'serve':
            return super()._spawn(ns, *args)
        p = subprocess.Popen(['ip', 'netns', 'exec', ns, sys.executable, os.path.abspath(__file__)]
                             + [str(a) for a in args],
                             stdout=subprocess.DEVNULL, stderr=open(self.path('servers.err'), 'a'))
        self.procs.append(p)

    def make(self):
        names = [host(n) for n, server in NAMES.items() if server != 'bad']
        self.make_certs(names, cn='box broker test CA')
        self.rogue_ca, rogue_cert, rogue_key = self.make_certs([host('bad')], tag='rogue-',
                                                               cn='box broker rogue CA')
        self.gitroot = self.path('git')
        self.make_repo()
        self.make_net(list(ADDR.values()))
        self.start_dns({host(n): {'a': [ADDR[server]], 'ttl': 60} for n, server in NAMES.items()})
        for server, addr in ADDR.items():
            mode = server if server in ('reflect', 'ws') else 'echo'
            cert, key = (rogue_cert, rogue_key) if server == 'bad' else (self.cert, self.key)
            self._spawn(self.ns_inet, 'serve', mode, addr, 443, self.path(server + '.log'),
                        self.path(server + '.ready'), cert, key, self.gitroot)
        for server in ADDR:
            self._wait(self.path(server + '.ready'))

    def make_repo(self):
        """A bare repository repo.git with one commit (file README: "hello")."""
        src = self.path('git-src')
        git = 'git -c user.name=t -c user.email=t@t -c init.defaultBranch=main'
        _sh('%s init -q %s && echo hello > %s/README && %s -C %s add README && '
            '%s -C %s commit -q -m one && %s clone -q --bare %s %s/repo.git'
            % (git, src, src, git, src, git, src, git, src, self.gitroot))

    def records(self, server):
        return self.log(server + '.log')


# ---- the self-test (host only) ----------------------------------------------


def _client(name, ca, req):
    """Sends @req (bytes) to @name's server over TLS from the host; the answer."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection((ADDR[NAMES[name]], 443), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host(name)) as s:
            s.sendall(req)
            out = b''
            while True:
                try:
                    d = s.recv(65536)
                except (socket.timeout, ssl.SSLError):
                    break
                if not d:
                    break
                out += d
                if req.startswith(b'GET /ws') and out.endswith(b'\x81\x02hi'):
                    break
            return out


def selftest():
    W = BrokerWorld('broker-selftest')
    World.sweep_dead()
    fails = []

    def check(cond, desc):
        print('%s - %s' % ('ok' if cond else 'not ok', desc))
        if not cond:
            fails.append(desc)
    try:
        W.make()
        out = _client('echo', W.ca, b'POST /p?q=1 HTTP/1.1\r\nHost: echo.br.example\r\nX-A: 1\r\n'
                      b'Content-Length: 3\r\nConnection: close\r\n\r\nabc')
        rec = W.records('echo')[-1]
        check(b'200 OK' in out and rec['path'] == '/p?q=1' and rec['body'] == 'abc'
              and ['X-A', '1'] in rec['headers'] and rec['sni'] == host('echo'), 'echo logs the head and body')
        check(b'X-A' not in out, 'echo does not answer with the head')
        out = _client('reflect', W.ca, b'GET / HTTP/1.1\r\nHost: r\r\nX-Reflect: zz9\r\nConnection: close\r\n\r\n')
        check(b'X-Reflected: zz9' in out and out.endswith(b'zz9'), 'reflect echoes X-Reflect')
        key = base64.b64encode(os.urandom(16))
        out = _client('ws', W.ca, b'GET /ws HTTP/1.1\r\nHost: ws\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
                      b'Sec-WebSocket-Key: ' + key + b'\r\nSec-WebSocket-Version: 13\r\n\r\n'
                      b'\x81\x82abcd' + bytes(c ^ b'abcd'[i] for i, c in enumerate(b'hi')))
        check(b'101' in out and out.endswith(b'\x81\x02hi') and W.records('ws')[-1].get('ws') == 'hi',
              'ws upgrades and echoes a message')
        try:
            _client('bad', W.ca, b'GET / HTTP/1.1\r\n\r\n')
            check(False, 'the bad server is refused under the test CA')
        except ssl.SSLError:
            check(True, 'the bad server is refused under the test CA')
        check(b'200 OK' in _client('bad', W.rogue_ca, b'GET / HTTP/1.1\r\nConnection: close\r\n\r\n'),
              'the bad server answers under its rogue CA')
        dst = W.path('clone')
        env = dict(os.environ, GIT_SSL_CAINFO=W.ca, GIT_TERMINAL_PROMPT='0')
        r = subprocess.run(['git', '-c', 'http.sslCAInfo=' + W.ca, '-c',
                            'http.curloptResolve=%s:443:%s' % (host('echo'), ADDR['echo']), 'clone', '-q',
                            'https://u:pw1@%s/git/repo.git' % host('echo'), dst],
                           env=env, capture_output=True, text=True, timeout=60)
        auths = [_get(x['headers'], 'authorization') for x in W.records('echo') if x['path'].startswith('/git/')]
        check(r.returncode == 0 and open(os.path.join(dst, 'README')).read() == 'hello\n',
              'git clone over the echo server (%s)' % r.stderr.strip()[-200:])
        check(None in auths and 'Basic ' + base64.b64encode(b'u:pw1').decode() in auths,
              'git was asked for credentials and sent them')
    finally:
        W.teardown()
    return 1 if fails else 0


if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'serve':
        serve(*args)
    elif cmd == 'selftest':
        sys.exit(selftest())
    else:
        sys.exit('unknown command %s' % cmd)
