# wsclient.py: a small RFC 6455 WebSocket client for the tests (standard
# library only).  Shared by every test that drives a WebSocket route (exec,
# sessions, ports/{port}/connect, fs/watch); import it with tests/e2e on
# sys.path:
#
#     import wsclient
#     try:
#         ws = wsclient.connect('127.0.0.1', port, '/v1/sandboxes/x/exec?cmd=ls',
#                               headers={'Authorization': 'Bearer ' + key})
#     except wsclient.HTTPRefused as e:      # the server answered without upgrading
#         print(e.status, e.json)             # e.g. 401 {'error': {...}}
#     ws.send_binary(b'\x00hello')
#     op, data = ws.recv(timeout=10)          # (OP_TEXT, str) / (OP_BINARY, bytes)
#                                             # / (OP_CLOSE, None) at the end
#     ws.close_code, ws.close_reason          # set once the server's close arrives
#     ws.close()                              # sends close 1000, waits for the reply
#
# recv() answers pings itself, reassembles fragmented messages, and returns
# (OP_CLOSE, None) once when the peer's close frame arrives (it is echoed back
# as the protocol asks); after that, or when the TCP stream ended without a
# close frame (close_code stays None, `eof` is True), it raises
# ConnectionClosed.  A recv that times out raises socket.timeout (TimeoutError).
#
# Helpers: text_json() decodes a text frame; recv_json()/recv_binary() expect
# one kind; the `sock` attribute is the raw socket (tests of slow readers may
# set SO_RCVBUF before connect() with rcvbuf=).

import base64
import hashlib
import json
import os
import socket
import struct

GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11'

OP_CONT = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA


class HTTPRefused(Exception):
    """The server answered the upgrade request with an ordinary HTTP response."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body
        try:
            self.json = json.loads(body.decode('utf-8')) if body else None
        except ValueError:
            self.json = None
        super().__init__('HTTP %d: %r' % (status, body[:200]))


class ConnectionClosed(Exception):
    pass


class ProtocolError(Exception):
    pass


def _read_http_head(sock):
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionClosed('connection closed during the HTTP response head: %r' % data)
        data += chunk
        if len(data) > 65536:
            raise ProtocolError('HTTP response head too long')
    head, rest = data.split(b'\r\n\r\n', 1)
    lines = head.decode('iso-8859-1').split('\r\n')
    parts = lines[0].split(' ', 2)
    if len(parts) < 2 or not parts[0].startswith('HTTP/'):
        raise ProtocolError('bad status line %r' % lines[0])
    status = int(parts[1])
    headers = {}
    for line in lines[1:]:
        if ':' in line:
            k, v = line.split(':', 1)
            headers[k.strip().lower()] = v.strip()
    return status, headers, rest


def _read_http_body(sock, headers, rest):
    """The body of a refused upgrade (Content-Length, chunked or until EOF)."""
    if 'content-length' in headers:
        n = int(headers['content-length'])
        while len(rest) < n:
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
        return rest[:n]
    if headers.get('transfer-encoding', '').lower() == 'chunked':
        body = b''
        buf = rest
        while True:
            while b'\r\n' not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    return body
                buf += chunk
            line, buf = buf.split(b'\r\n', 1)
            size = int(line.split(b';')[0], 16)
            if size == 0:
                return body
            while len(buf) < size + 2:
                chunk = sock.recv(65536)
                if not chunk:
                    return body + buf[:size]
                buf += chunk
            body += buf[:size]
            buf = buf[size + 2:]
    while True:
        try:
            chunk = sock.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        rest += chunk
    return rest


def connect(host, port, path, headers=None, timeout=30, rcvbuf=None, key=None, sock=None):
    """Open a WebSocket; raise HTTPRefused when the server does not upgrade.

    `key` overrides the Sec-WebSocket-Key (tests of bad handshakes); `sock`
    is an already connected stream socket (a Unix socket, say)."""
    if sock is None:
        sock = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET,
                             socket.SOCK_STREAM)
        if rcvbuf is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.settimeout(timeout)
        sock.connect((host, port))
    else:
        sock.settimeout(timeout)
    ws_key = key if key is not None else base64.b64encode(os.urandom(16)).decode('ascii')
    hdrs = {
        'Host': '%s:%d' % (host, port) if port else host,
        'Upgrade': 'websocket',
        'Connection': 'Upgrade',
        'Sec-WebSocket-Key': ws_key,
        'Sec-WebSocket-Version': '13',
    }
    for k, v in (headers or {}).items():
        if v is None:
            hdrs.pop(k, None)
        else:
            hdrs[k] = v
    req = 'GET %s HTTP/1.1\r\n' % path
    req += ''.join('%s: %s\r\n' % (k, v) for k, v in hdrs.items()) + '\r\n'
    sock.sendall(req.encode('iso-8859-1'))
    status, rheaders, rest = _read_http_head(sock)
    if status != 101:
        body = _read_http_body(sock, rheaders, rest)
        sock.close()
        raise HTTPRefused(status, rheaders, body)
    accept = base64.b64encode(hashlib.sha1((ws_key + GUID).encode('ascii')).digest()).decode()
    if rheaders.get('sec-websocket-accept') != accept:
        sock.close()
        raise ProtocolError('bad Sec-WebSocket-Accept %r' % rheaders.get('sec-websocket-accept'))
    return WebSocket(sock, rest, rheaders)


class WebSocket:
    def __init__(self, sock, buffered=b'', headers=None):
        self.sock = sock
        self.headers = headers or {}
        self._buf = bytearray(buffered)
        self.close_code = None
        self.close_reason = None
        self.closed = False        # the peer's close frame arrived
        self.eof = False           # the TCP stream ended
        self._sent_close = False
        self._frag_op = None
        self._frag = bytearray()

    # -- sending --------------------------------------------------------------

    def _send_frame(self, op, payload, fin=True):
        header = bytearray()
        header.append((0x80 if fin else 0) | op)
        n = len(payload)
        if n < 126:
            header.append(0x80 | n)
        elif n < 65536:
            header.append(0x80 | 126)
            header += struct.pack('!H', n)
        else:
            header.append(0x80 | 127)
            header += struct.pack('!Q', n)
        mask = os.urandom(4)
        header += mask
        # XOR as one big integer: a byte loop in Python would cap a
        # client's upload at a few MiB/s
        key = (mask * (n // 4 + 1))[:n]
        data = (int.from_bytes(payload, 'little') ^ int.from_bytes(key, 'little')).to_bytes(n, 'little')
        self.sock.sendall(bytes(header) + data)

    def send_text(self, text):
        self._send_frame(OP_TEXT, text.encode('utf-8'))

    def send_json(self, obj):
        self.send_text(json.dumps(obj))

    def send_binary(self, data):
        self._send_frame(OP_BINARY, bytes(data))

    def ping(self, data=b''):
        self._send_frame(OP_PING, data)

    # -- receiving ------------------------------------------------------------

    def _fill(self, n):
        while len(self._buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self._buf)))
            if not chunk:
                self.eof = True
                raise ConnectionClosed('the TCP stream ended (close code %r)' % self.close_code)
            self._buf += chunk

    def _take(self, n):
        self._fill(n)
        out = bytes(self._buf[:n])
        del self._buf[:n]
        return out

    def _read_frame(self):
        b0, b1 = self._take(2)
        fin = bool(b0 & 0x80)
        if b0 & 0x70:
            raise ProtocolError('reserved bits set')
        op = b0 & 0x0F
        if b1 & 0x80:
            raise ProtocolError('the server masked a frame')
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack('!H', self._take(2))[0]
        elif n == 127:
            n = struct.unpack('!Q', self._take(8))[0]
        return fin, op, self._take(n)

    def recv(self, timeout=None):
        """The next message: (OP_TEXT, str), (OP_BINARY, bytes) or (OP_CLOSE, None)."""
        if self.closed or self.eof:
            raise ConnectionClosed('closed (code %r)' % self.close_code)
        if timeout is not None:
            self.sock.settimeout(timeout)
        while True:
            fin, op, payload = self._read_frame()
            if op == OP_PING:
                self._send_frame(OP_PONG, payload)
                continue
            if op == OP_PONG:
                continue
            if op == OP_CLOSE:
                self.closed = True
                if len(payload) >= 2:
                    self.close_code = struct.unpack('!H', payload[:2])[0]
                    self.close_reason = payload[2:].decode('utf-8', 'replace')
                else:
                    self.close_code = 1005
                    self.close_reason = ''
                if not self._sent_close:
                    self._sent_close = True
                    try:
                        self._send_frame(OP_CLOSE, payload[:2])
                    except OSError:
                        pass
                return OP_CLOSE, None
            if op == OP_CONT:
                if self._frag_op is None:
                    raise ProtocolError('continuation without a start')
                self._frag += payload
                if not fin:
                    continue
                op, payload = self._frag_op, bytes(self._frag)
                self._frag_op = None
                self._frag = bytearray()
            elif not fin:
                if op not in (OP_TEXT, OP_BINARY):
                    raise ProtocolError('fragmented control frame')
                self._frag_op = op
                self._frag = bytearray(payload)
                continue
            if op == OP_TEXT:
                return OP_TEXT, payload.decode('utf-8')
            if op == OP_BINARY:
                return OP_BINARY, payload
            raise ProtocolError('unknown opcode %d' % op)

    def recv_json(self, timeout=None):
        op, data = self.recv(timeout)
        if op != OP_TEXT:
            raise ProtocolError('expected a text frame, got op %d: %r' % (op, data))
        return json.loads(data)

    def recv_binary(self, timeout=None):
        op, data = self.recv(timeout)
        if op != OP_BINARY:
            raise ProtocolError('expected a binary frame, got op %d: %r' % (op, data))
        return data

    def recv_all(self, timeout=30):
        """Every message until the close frame (or the stream's end), as a list."""
        out = []
        while True:
            try:
                op, data = self.recv(timeout)
            except ConnectionClosed:
                return out
            if op == OP_CLOSE:
                return out
            out.append((op, data))

    def close(self, code=1000, reason='', wait=5):
        """Send a close frame (once) and wait up to `wait` s for the peer's."""
        if not self._sent_close and not self.eof:
            self._sent_close = True
            try:
                self._send_frame(OP_CLOSE, struct.pack('!H', code) + reason.encode('utf-8'))
            except OSError:
                pass
        if wait and not self.closed and not self.eof:
            try:
                while True:
                    op, _ = self.recv(wait)
                    if op == OP_CLOSE:
                        break
            except (ConnectionClosed, OSError, ProtocolError):
                pass
        self.abort()

    def abort(self):
        """Drop the TCP connection without a close handshake."""
        try:
            self.sock.close()
        except OSError:
            pass


def text_json(message):
    """The JSON of a (op, data) text message, or None for a binary one."""
    op, data = message
    return json.loads(data) if op == OP_TEXT else None
