# edgetest.py: the client side of the edge tests (tests/e2e/test_edge.py,
# tests/e2e-vm/test_edge_vm.py): a TLS client that checks the chain
# against boxd's CA and the host name, streamed uploads and downloads, and
# boxd's resident memory sampled while they run.

import hashlib
import http.client
import json
import os
import socket
import ssl
import threading
import time

import boxtest


class Edge:
    def __init__(self, port, cafile):
        self.port = port
        self.ctx = ssl.create_default_context(cafile=cafile)
        self.ctx.set_alpn_protocols(['http/1.1'])

    def conn(self, host, timeout=30):
        c = http.client.HTTPSConnection(host, self.port, context=self.ctx, timeout=timeout)
        c._create_connection = lambda addr, *a, **kw: socket.create_connection(
            ('127.0.0.1', addr[1]), *a, **kw)
        return c

    def handshake_fails(self, server_name, ctx=None, errors=(ssl.SSLCertVerificationError,)):
        """True when a TLS handshake naming @server_name, with @ctx
        (default: trusting boxd's CA only), fails with one of @errors."""
        raw = socket.create_connection(('127.0.0.1', self.port))
        try:
            (ctx or self.ctx).wrap_socket(raw, server_hostname=server_name).close()
            return False
        except errors:
            return True
        finally:
            raw.close()

    def upgrade(self, host, key):
        """An upgrade request (WebSocket) with @key as Bearer: (the TLS
        socket, the answer's head)."""
        s = self.ctx.wrap_socket(socket.create_connection(('127.0.0.1', self.port)),
                                 server_hostname=host)
        s.sendall(('GET /ws HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n'
                   'Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n'
                   'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n' % (host, key)).encode())
        s.settimeout(30)
        head = b''
        while b'\r\n\r\n' not in head:
            data = s.recv(1)
            if not data:
                break
            head += data
        return s, head

    def get(self, host, path='/', headers=None, method='GET', body=None, conn=None, sni=None,
            timeout=30):
        """sni: the TLS server name when it is not @host (then Host is @host)."""
        headers = dict(headers or {})
        if sni is not None:
            headers['Host'] = host
        c = conn or self.conn(sni or host, timeout=timeout)
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        data = r.read()
        if conn is None:
            c.close()
        parsed = None
        try:
            parsed = json.loads(data.decode())
        except (ValueError, UnicodeDecodeError):
            pass
        return r.status, {k.lower(): v for k, v in r.getheaders()}, parsed, data


class RssSampler:
    """boxd's VmRSS (KiB) sampled every 50 ms while it runs: the value
    when it started and the highest one seen."""

    def __init__(self, pid):
        self.pid = pid
        self.base = boxtest.rss_kib(pid) or 0
        self.peak = self.base
        self.running = True
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while self.running:
            self.peak = max(self.peak, boxtest.rss_kib(self.pid) or 0)
            time.sleep(0.05)

    def stop(self):
        self.running = False
        self.thread.join()
        return self.base, self.peak


def stream_upload(e, host, headers, n, chunk=1 << 20):
    """POSTs @n bytes (a repeated pseudo-random MiB, made as it is sent)
    with Content-Length: the echo's answer and the SHA-256 sent."""
    block = os.urandom(chunk)
    h = hashlib.sha256()
    c = e.conn(host, timeout=120)
    c.putrequest('POST', '/up')
    for k, v in dict(headers, **{'Content-Length': str(n)}).items():
        c.putheader(k, v)
    c.endheaders()
    left = n
    while left > 0:
        part = block[:min(left, chunk)]
        c.send(part)
        h.update(part)
        left -= len(part)
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        return r.status, json.loads(data.decode()), h.hexdigest()
    except ValueError:
        return r.status, None, h.hexdigest()


def stream_download(e, host, headers, n):
    """GET /big/@n read as it comes: (status, bytes received)."""
    c = e.conn(host, timeout=120)
    c.request('GET', '/big/%d' % n, headers=headers)
    r = c.getresponse()
    got = 0
    while True:
        data = r.read(1 << 20)
        if not data:
            break
        got += len(data)
    c.close()
    return r.status, got


def check_private(t, e, host, key, other, edge_port):
    """The access rules of a private URL at @host, as the client sees them
    and as the echo server behind it received them: 401 without the key
    and with @other's, the key as Bearer (stripped, other cookies kept),
    ?box_token= answering 302 to itself with the cookie exactly."""
    r = e.get(host)
    t.eq((r[0], (r[2] or {}).get('error', {}).get('code')), (401, 'unauthorized'),
         '%s private without the key: 401 unauthorized' % host)
    t.eq(e.get(host, headers={'Authorization': 'Bearer ' + other})[0], 401,
         'another project\'s key: 401')
    r = e.get(host, '/k', headers={'Authorization': 'Bearer ' + key, 'Cookie': 'a=1'})
    t.status(r, 200, 'the key as Bearer')
    t.eq(hdr(r[2], 'Authorization'), [], 'the server got no Authorization carrying the key')
    t.eq(hdr(r[2], 'Cookie'), ['a=1'], 'other cookies reach the server')
    r = e.get(host, '/page?a=1&box_token=%s&b=2' % key)
    t.eq(r[0], 302, 'box_token: 302')
    t.eq(r[1].get('location'), 'https://%s:%d/page?a=1&b=2' % (host, edge_port),
         'Location: the same URL on the same host without box_token, other parameters in order')
    t.eq(r[1].get('set-cookie'), 'box_token=%s; HttpOnly; Secure; SameSite=Lax; Path=/' % key,
         'Set-Cookie exactly (no Domain: for this host only)')
    return r


def hdr(echo, name):
    """The values of header @name the echo server received."""
    return [v for k, v in (echo or {}).get('headers', []) if k.lower() == name.lower()]


def echo_back(s, msg):
    """Sends @msg on @s and reads as many bytes back."""
    s.sendall(msg)
    got = b''
    while len(got) < len(msg):
        data = s.recv(65536)
        if not data:
            break
        got += data
    return got
