#!/usr/bin/env python3
# edge_echo.py: the HTTP server behind the edge in the edge tests (standard
# library only): it answers what it received as JSON (method, path,
# headers, the connection's client address as conn; for a POST the length
# and SHA-256 of the body), /big/N with N bytes, /chunked with a chunked
# answer, /close with Connection: close, /drop (then closes without
# saying so), /nolength (a body that ends when it closes), and echoes the
# raw bytes of an upgraded connection.  CLOSED: the client addresses of
# the connections that ended.  tests/e2e/test_edge.py imports it (on the host);
# tests/e2e-vm/test_edge.py and bench/edge-bench copy it into the guest
# and run it there: python3 edge_echo.py PORT [ADDRESS].

import hashlib
import http.server
import json
import socketserver
import sys
import threading

CLOSED = set()


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    # a head and a body are two writes: without this the body would wait
    # for the delayed ACK of the head (the edge's own Nagle is what e2e-edge
    # checks)
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def conn_name(self):
        return '%s:%d' % self.client_address[:2]

    def finish(self):
        super().finish()
        CLOSED.add(self.conn_name())

    def reply(self, obj, status=200):
        obj['conn'] = self.conn_name()
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        if self.path != '/nolength':
            self.send_header('Content-Length', str(len(data)))
        if self.path == '/close':
            self.send_header('Connection', 'close')
        self.end_headers()
        self.wfile.write(data)
        if self.path in ('/nolength', '/drop'):
            self.close_connection = True

    def do_GET(self):
        if self.headers.get('Upgrade'):
            self.send_response(101)
            self.send_header('Upgrade', self.headers['Upgrade'])
            self.send_header('Connection', 'Upgrade')
            self.end_headers()
            self.wfile.flush()
            conn = self.connection
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                conn.sendall(data)
            self.close_connection = True
            return
        if self.path.startswith('/big/'):
            n = int(self.path[5:])
            self.send_response(200)
            self.send_header('Content-Length', str(n))
            self.end_headers()
            chunk = b'x' * 65536
            while n > 0:
                self.wfile.write(chunk[:min(n, len(chunk))])
                n -= min(n, len(chunk))
            return
        if self.path.startswith('/chunked'):
            self.send_response(200)
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            for part in (b'hello ', b'chunked ', b'world'):
                self.wfile.write(b'%x\r\n%s\r\n' % (len(part), part))
            self.wfile.write(b'0\r\n\r\n')
            return
        self.reply({'method': 'GET', 'path': self.path, 'headers': self.headers.items()})

    def do_HEAD(self):
        # the length of a body that is not sent: the edge must not wait for it
        self.send_response(200)
        self.send_header('Content-Length', '1000')
        self.end_headers()

    def do_POST(self):
        h = hashlib.sha256()
        if self.headers.get('Transfer-Encoding') == 'chunked':
            total = 0
            while True:
                size = int(self.rfile.readline().strip(), 16)
                data = self.rfile.read(size + 2)[:size]
                if size == 0:
                    break
                h.update(data)
                total += size
            self.reply({'method': 'POST', 'path': self.path, 'length': total,
                        'sha256': h.hexdigest(), 'headers': self.headers.items()})
            return
        n = int(self.headers.get('Content-Length', '0'))
        left = n
        while left > 0:
            data = self.rfile.read(min(left, 65536))
            if not data:
                break
            h.update(data)
            left -= len(data)
        self.reply({'method': 'POST', 'path': self.path, 'length': n - left,
                    'sha256': h.hexdigest(), 'headers': self.headers.items()})


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(port, address='127.0.0.1'):
    srv = Server((address, port), Echo)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


if __name__ == '__main__':
    Server((sys.argv[2] if len(sys.argv) > 2 else '127.0.0.1', int(sys.argv[1])),
           Echo).serve_forever()
