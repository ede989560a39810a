#!/usr/bin/env python3
# e2e: keep-alive connections (box-http-keepalive.c).
#
# boxd keeps connections open between requests and closes the idle ones
# itself: when the client hangs up (libsoup 3.2 alone would leak the
# socket), after [boxd] http_idle_timeout_s, and past http_max_idle idle
# connections.  Measured by boxd's open descriptors (/proc/<pid>/fd).

import json
import os
import socket
import tempfile
import time

import boxtest
from boxtest import Boxd, Tap

IDLE_TIMEOUT_S = 2
MAX_IDLE = 8


def fd_count(d):
    return len(os.listdir('/proc/%d/fd' % d.proc.pid))


def wait_fds(d, want, timeout=5.0):
    """Waits until boxd has at most `want` descriptors; returns the last count."""
    deadline = time.time() + timeout
    n = fd_count(d)
    while n > want and time.time() < deadline:
        time.sleep(0.05)
        n = fd_count(d)
    return n


class Conn:
    """One raw HTTP/1.1 connection, several requests on it."""

    def __init__(self, d, timeout=10):
        self.sock = socket.create_connection(('127.0.0.1', d.port), timeout=timeout)
        self.buf = b''

    def send(self, method, path, token=None, extra=''):
        req = '%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n' % (method, path)
        if token is not None:
            req += 'Authorization: Bearer %s\r\n' % token
        self.sock.sendall((req + extra + '\r\n').encode('ascii'))

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError('connection closed by boxd')
        self.buf += chunk

    def head(self):
        while b'\r\n\r\n' not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b'\r\n\r\n', 1)
        lines = head.decode('iso-8859-1').split('\r\n')
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, v = line.split(':', 1)
            headers[k.strip().lower()] = v.strip()
        return status, headers

    def response(self):
        """(status, headers, json) of a response with a Content-Length."""
        status, headers = self.head()
        n = int(headers.get('content-length', '0'))
        while len(self.buf) < n:
            self._fill()
        body, self.buf = self.buf[:n], self.buf[n:]
        return status, headers, (json.loads(body) if body else None)

    def closed_by_server(self, timeout):
        """True when boxd closes the connection within `timeout` s."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b''
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


def test_keepalive(t):
    conf_dir = tempfile.mkdtemp(prefix='box-e2e-ka-')
    conf = os.path.join(conf_dir, 'boxd.conf')
    with open(conf, 'w') as f:
        f.write('[boxd]\nhttp_idle_timeout_s=%d\nhttp_max_idle=%d\n' % (IDLE_TIMEOUT_S, MAX_IDLE))
    d = Boxd(t, extra_args=['--config', conf]).start()
    try:
        key = d.project_with_key('alpha')
        sb = d.create_sandbox(key, {'name': 'ka1'})
        time.sleep(0.3)
        base = fd_count(d)
        t.comment('baseline: %d descriptors' % base)

        # several requests on one connection, none of them closes it
        c = Conn(d)
        answers = []
        for path in ('/v1/whoami', '/v1/sandboxes/ka1', '/v1/sandboxes', '/v1/whoami'):
            c.send('GET', path, token=key)
            answers.append(c.response())
        t.eq([a[0] for a in answers], [200, 200, 200, 200], 'four requests answered on one connection')
        t.eq([a[1].get('connection', '').lower() for a in answers], ['', '', '', ''],
             'no answer says "Connection: close"')
        t.eq(answers[1][2].get('id'), sb['id'], 'GET /v1/sandboxes/{id} on a reused connection')
        c.send('GET', '/v1/whoami')
        st, _, body = c.response()
        t.ok(st == 401 and body['error']['code'] == 'unauthorized',
             'a refused request keeps the connection usable', (st, body))
        c.send('GET', '/v1/whoami', token=key)
        t.eq(c.response()[0], 200, 'and the next request on it is answered')
        t.ok(fd_count(d) >= base + 1, 'the idle connection is open in boxd')
        c.close()
        t.ok(wait_fds(d, base) <= base, 'client closes an idle connection: boxd closes its end',
             'fds %d, baseline %d' % (fd_count(d), base))

        # many clients come and go
        conns = []
        for i in range(MAX_IDLE):
            k = Conn(d)
            for _ in range(3):
                k.send('GET', '/v1/sandboxes/ka1', token=key)
                k.response()
            conns.append(k)
        t.ok(fd_count(d) >= base + MAX_IDLE, '%d idle keep-alive connections are kept' % MAX_IDLE,
             'fds %d, baseline %d' % (fd_count(d), base))
        for k in conns:
            k.close()
        t.ok(wait_fds(d, base) <= base, 'all %d closed by the clients: back to the baseline' % MAX_IDLE,
             'fds %d, baseline %d' % (fd_count(d), base))

        # the bound on idle connections: the oldest go first
        conns = []
        for i in range(MAX_IDLE + 4):
            k = Conn(d)
            k.send('GET', '/v1/whoami', token=key)
            k.response()
            conns.append(k)
        t.ok(all(k.closed_by_server(2) for k in conns[:4]),
             'past http_max_idle=%d the 4 oldest idle connections are closed' % MAX_IDLE)
        t.ok(wait_fds(d, base + MAX_IDLE) <= base + MAX_IDLE,
             'boxd holds at most %d idle connections' % MAX_IDLE,
             'fds %d, baseline %d' % (fd_count(d), base))
        for k in conns:
            k.close()
        t.ok(wait_fds(d, base) <= base, 'and none after the clients close',
             'fds %d, baseline %d' % (fd_count(d), base))

        # the idle bound
        c = Conn(d)
        c.send('GET', '/v1/whoami', token=key)
        c.response()
        time.sleep(IDLE_TIMEOUT_S / 2.0)
        c.send('GET', '/v1/whoami', token=key)
        t.eq(c.response()[0], 200, 'a connection idle for less than the bound is still served')
        started = time.time()
        closed = c.closed_by_server(IDLE_TIMEOUT_S + 3)
        waited = time.time() - started
        t.ok(closed and IDLE_TIMEOUT_S - 0.5 <= waited <= IDLE_TIMEOUT_S + 2,
             'an idle connection is closed by boxd after http_idle_timeout_s=%d' % IDLE_TIMEOUT_S,
             'closed %r after %.1f s' % (closed, waited))
        c.close()
        t.ok(wait_fds(d, base) <= base, 'its descriptor is gone',
             'fds %d, baseline %d' % (fd_count(d), base))

        # pipelined requests, Connection: close, HTTP/1.0
        c = Conn(d)
        c.sock.sendall(('GET /v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n'
                        'GET /v1/sandboxes/ka1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n'
                        % (key, key)).encode('ascii'))
        first, second = c.response(), c.response()
        t.eq((first[0], second[0], second[2].get('name')), (200, 200, 'ka1'),
             'two pipelined requests are both answered, in order')
        c.send('GET', '/v1/whoami', token=key, extra='Connection: close\r\n')
        st, headers, _ = c.response()
        t.ok(st == 200 and c.closed_by_server(2),
             '"Connection: close" from the client: answered, then closed', (st, headers))
        c.close()
        c = Conn(d)
        c.sock.sendall(('GET /v1/whoami HTTP/1.0\r\nAuthorization: Bearer %s\r\n\r\n' % key).encode())
        t.ok(c.response()[0] == 200 and c.closed_by_server(2), 'HTTP/1.0 without keep-alive: closed')
        c.close()

        # a stream on a connection that served requests before
        c = Conn(d, timeout=10)
        c.send('GET', '/v1/whoami', token=key)
        t.eq(c.response()[0], 200, 'a request, then on the same connection...')
        c.send('GET', '/v1/events', token=key)
        st, headers = c.head()
        t.ok(st == 200 and headers.get('content-type', '').startswith('text/event-stream'),
             '...GET /v1/events streams (Server-Sent Events)', (st, headers))
        time.sleep(IDLE_TIMEOUT_S + 1)
        t.status(d.request('POST', '/v1/sandboxes/ka1/pause', token=key), 200, 'pause ka1')
        deadline = time.time() + 5
        while b'sandbox.paused' not in c.buf and time.time() < deadline:
            c._fill()
        t.ok(b'sandbox.paused' in c.buf,
             'an open stream is not idle: its event arrives after more than the idle bound')
        c.close()
        # boxd learns that a stream's client left when it next writes to it
        # (an event, or the ": keep-alive" comment every 15 s), as before
        t.status(d.request('POST', '/v1/sandboxes/ka1/wake', token=key), 200, 'wake ka1')
        t.ok(wait_fds(d, base) <= base, 'stream closed by the client: back to the baseline',
             'fds %d, baseline %d' % (fd_count(d), base))

        # a client that goes away in the middle of a request
        c = Conn(d)
        c.sock.sendall(b'GET /v1/whoami HTTP/1.1\r\nHost: x\r\n')
        time.sleep(0.2)
        c.close()
        t.ok(wait_fds(d, base) <= base, 'a client gone in the middle of its headers: closed',
             'fds %d, baseline %d' % (fd_count(d), base))
        t.status(d.request('GET', '/v1/whoami', token=key), 200, 'boxd still answers')
    finally:
        d.stop()
        d.cleanup()


def test_bad_config(t):
    conf_dir = tempfile.mkdtemp(prefix='box-e2e-ka-')
    conf = os.path.join(conf_dir, 'boxd.conf')
    with open(conf, 'w') as f:
        f.write('[boxd]\nhttp_idle_timeout_s=soon\n')
    d = Boxd(t, extra_args=['--config', conf]).start(wait=False)
    try:
        rc = d.proc.wait(20)
        d.logf.close()
        t.ok(rc != 0, 'boxd refuses http_idle_timeout_s=soon', rc)
        t.ok('http_idle_timeout_s' in d.log_text(), 'and says which key', d.log_text()[-300:])
    finally:
        d.proc = None
        d.cleanup()


if __name__ == '__main__':
    boxtest.main(Tap(), test_keepalive, test_bad_config)
