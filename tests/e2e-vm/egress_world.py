#!/usr/bin/env python3
"""The test internet of the egress attack suite (test_egress.py).

Everything lives on this machine: one "internet" network namespace joined
to the node by a veth, with TEST-NET-2 (198.51.100.0/24, RFC 5737) routed into
it, and one "LAN" namespace with a private address.  Nothing leaves the
host.  Servers (each a process started in its namespace with this file):

  dns BIND PORT ZONE READY     authoritative UDP+TCP DNS for the names in
                               ZONE (JSON: name -> {"a": [...], "aaaa":
                               [...], "ttl": N}); other names NXDOMAIN;
                               every question is appended to ZONE.log as
                               "<qtype> <name>" (for the cache checks)
  http BIND PORT LOG READY [CERT KEY]
                               HTTP/1.1 (HTTPS with CERT/KEY): each request
                               answers JSON {server, port, host, sni, path}
                               and is appended to LOG; /big/N answers N bytes
  hold BIND PORT READY         TCP: greets "hello\\n", then echoes lines and
                               keeps the connection open (for the PATCH
                               cases)
The World class builds and removes the namespaces, addresses, routes,
certificates (a test CA and one leaf for every test name) and servers.
Standard library only.
"""

import json
import os
import socket
import socketserver
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time

# ---- the servers ----------------------------------------------------------


def _name_of(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n == 0:
            return '.'.join(labels).lower(), off + 1
        if n & 0xC0:
            raise ValueError('compression in a question')
        labels.append(msg[off + 1:off + 1 + n].decode('ascii', 'replace'))
        off += 1 + n


def _dns_answer(query, zone, log):
    qid, flags, qd = struct.unpack('!HHH', query[:6])
    if qd != 1:
        return None
    name, off = _name_of(query, 12)
    qtype, qclass = struct.unpack('!HH', query[off:off + 4])
    question = query[12:off + 4]
    with open(log, 'a') as f:
        f.write('%d %s\n' % (qtype, name))
    entry = zone.get(name)
    rcode = 0 if entry is not None else 3
    rrs = []
    if entry is not None:
        ttl = int(entry.get('ttl', 60))
        if qtype == 1:
            rrs = [b'\xc0\x0c' + struct.pack('!HHIH', 1, 1, ttl, 4) + socket.inet_aton(a)
                   for a in entry.get('a', [])]
        elif qtype == 28:
            rrs = [b'\xc0\x0c' + struct.pack('!HHIH', 28, 1, ttl, 16) + socket.inet_pton(socket.AF_INET6, a)
                   for a in entry.get('aaaa', [])]
        elif qtype == 255:
            rrs = [b'\xc0\x0c' + struct.pack('!HHIH', 1, 1, ttl, 4) + socket.inet_aton(a)
                   for a in entry.get('a', [])]
    header = struct.pack('!HHHHHH', qid, 0x8400 | (flags & 0x0100) | rcode, 1, len(rrs), 0, 0)
    return header + question + b''.join(rrs)


class Zone(dict):
    """The zone file, read again when it changes (the test adds names that
    point at its sandboxes once it knows their addresses)."""

    def __init__(self, path):
        super().__init__()
        self.path, self.mtime = path, None

    def get(self, name, default=None):
        mtime = os.stat(self.path).st_mtime_ns
        if mtime != self.mtime:
            with open(self.path) as f:
                data = {k.lower(): v for k, v in json.load(f).items()}
            self.clear()
            self.update(data)
            self.mtime = mtime
        return super().get(name, default)


def serve_dns(bind, port, zone_path, ready):
    zone = Zone(zone_path)
    log = zone_path + '.log'
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((bind, int(port)))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((bind, int(port)))
    tcp.listen(64)

    def tcp_one(conn):
        try:
            conn.settimeout(10)
            while True:
                head = conn.recv(2, socket.MSG_WAITALL)
                if len(head) < 2:
                    return
                msg = conn.recv(struct.unpack('!H', head)[0], socket.MSG_WAITALL)
                reply = _dns_answer(msg, zone, log)
                if reply is None:
                    return
                conn.sendall(struct.pack('!H', len(reply)) + reply)
        except (OSError, ValueError, IndexError, struct.error):
            pass
        finally:
            conn.close()

    def tcp_loop():
        while True:
            conn, _ = tcp.accept()
            threading.Thread(target=tcp_one, args=(conn,), daemon=True).start()

    threading.Thread(target=tcp_loop, daemon=True).start()
    open(ready, 'w').close()
    while True:
        msg, peer = udp.recvfrom(4096)
        try:
            reply = _dns_answer(msg, zone, log)
        except (ValueError, IndexError, struct.error):
            continue
        if reply is not None:
            udp.sendto(reply, peer)


def tls_accept(sock, cert, key):
    """Server-side TLS on an accepted @sock (10 s for the handshake): the
    TLS socket and the server name the client sent."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    seen = {}
    ctx.sni_callback = lambda _s, name, _c: seen.update(sni=name)
    sock.settimeout(10)
    tls = ctx.wrap_socket(sock, server_side=True)
    return tls, seen.get('sni')


def serve_http(bind, port, log, ready, cert=None, key=None):
    lock = threading.Lock()
    sni_of = {}

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            sock = self.connection
            sni = sni_of.pop(id(sock), None) if cert else None
            while True:
                line = self.rfile.readline(8192)
                if not line:
                    return
                headers = {}
                while True:
                    h = self.rfile.readline(8192)
                    if h in (b'\r\n', b'\n', b''):
                        break
                    k, _, v = h.decode('latin-1').partition(':')
                    headers[k.strip().lower()] = v.strip()
                parts = line.decode('latin-1').split()
                path = parts[1] if len(parts) > 1 else ''
                host = headers.get('host', '')
                rec = {'server': sock.getsockname()[0], 'port': int(port), 'host': host, 'sni': sni,
                       'path': path, 'peer': self.client_address[0]}
                with lock, open(log, 'a') as f:
                    f.write(json.dumps(rec) + '\n')
                if path.startswith('/big/'):
                    body = b'x' * int(path[5:])
                else:
                    body = json.dumps(rec).encode() + b'\n'
                self.wfile.write(b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'
                                 b'Content-Length: %d\r\n\r\n' % len(body) + body)
                self.wfile.flush()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

        def get_request(self):
            sock, addr = super().get_request()
            if cert:
                tls, sni = tls_accept(sock, cert, key)
                tls.settimeout(None)
                sni_of[id(tls)] = sni
                return tls, addr
            return sock, addr

        def handle_error(self, request, client_address):
            pass

    srv = Server((bind, int(port)), Handler)
    open(log, 'a').close()
    open(ready, 'w').close()
    srv.serve_forever()


def serve_hold(bind, port, ready):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, int(port)))
    srv.listen(64)
    open(ready, 'w').close()

    def one(conn):
        try:
            conn.sendall(b'hello\n')
            while True:
                data = conn.recv(4096)
                if not data:
                    return
                conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=one, args=(conn,), daemon=True).start()


# ---- the world -------------------------------------------------------------


def _sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError('%s: %s' % (cmd, r.stderr.strip()))
    return r.stdout


class World:
    """The namespaces, addresses, certificates and servers; teardown() removes
    all of it, whatever happened."""

    def __init__(self, tag):
        pid = os.getpid()
        self.ns_inet = 'boxeg-inet-%d' % pid
        self.ns_lan = 'boxeg-lan-%d' % pid
        self.veth_inet = 'egi%d' % (pid % 100000)
        self.veth_lan = 'egl%d' % (pid % 100000)
        k = pid % 15
        self.inet, self.inet_node = '203.0.113.%d' % (16 * k + 1), '203.0.113.%d' % (16 * k + 14)
        lan_net = 150 + pid % 40
        self.lan, self.lan_node = '172.31.%d.2' % lan_net, '172.31.%d.1' % lan_net
        self.work = tempfile.mkdtemp(prefix='box-egress-world-')
        self.procs = []
        # 198.51.100.0/24 (TEST-NET-2); not 192.0.2.0/24: these hosts' own uplink may use it
        self.routes = ['198.51.100.0/24']
        self.tag = tag

    def path(self, name):
        return os.path.join(self.work, name)

    def _spawn(self, ns, *args):
        pre = ['ip', 'netns', 'exec', ns] if ns else []
        p = subprocess.Popen(pre + [sys.executable, os.path.abspath(__file__)] + [str(a) for a in args],
                             stdout=subprocess.DEVNULL, stderr=open(self.path('servers.err'), 'a'))
        self.procs.append(p)

    def _wait(self, ready, timeout=20):
        end = time.time() + timeout
        while time.time() < end:
            if os.path.exists(ready):
                return
            time.sleep(0.05)
        raise RuntimeError('a test server did not start: %s (%s)'
                           % (ready, open(self.path('servers.err')).read()[-400:]))

    def make_certs(self, names, tag='', cn='box egress test CA'):
        """A CA (CN @cn) and a leaf for @names signed by it, their files
        named with @tag; without a tag they are the world's (ca, cert, key)."""
        ca_key, ca, key, csr, crt = (self.path(tag + x) for x in ('ca.key', 'ca.pem', 'leaf.key', 'leaf.csr',
                                                                  'leaf.pem'))
        _sh('openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 2 '
            '-subj "/CN=%s" -addext "basicConstraints=critical,CA:TRUE" '
            '-addext "keyUsage=critical,keyCertSign" 2>/dev/null' % (ca_key, ca, cn))
        _sh('openssl req -newkey rsa:2048 -nodes -keyout %s -out %s -subj "/CN=%s" 2>/dev/null'
            % (key, csr, names[0]))
        ext = self.path(tag + 'leaf.ext')
        with open(ext, 'w') as f:
            f.write('subjectAltName=%s\nextendedKeyUsage=serverAuth\n'
                    % ','.join('DNS:' + n for n in names))
        _sh('openssl x509 -req -in %s -CA %s -CAkey %s -CAcreateserial -out %s -days 2 -extfile %s 2>/dev/null'
            % (csr, ca, ca_key, crt, ext))
        if not tag:
            self.ca, self.cert, self.key = ca, crt, key
        return ca, crt, key

    def make(self, zone, inet_addrs, names):
        """@zone: the DNS zone; @inet_addrs: documentation addresses served in
        the internet namespace (HTTP on 80, HTTPS on 443, hold on 2222);
        @names: the certificate's names."""
        self.make_certs(names)
        self.make_net(inet_addrs)
        self.start_dns(zone)
        readies = []
        for a in inet_addrs:
            self._spawn(self.ns_inet, 'http', a, 80, self.path('http.log'), self.path('h80-%s.ready' % a))
            self._spawn(self.ns_inet, 'http', a, 443, self.path('https.log'), self.path('h443-%s.ready' % a),
                        self.cert, self.key)
            self._spawn(self.ns_inet, 'hold', a, 2222, self.path('hold-%s.ready' % a))
            readies += [self.path(x % a) for x in ('h80-%s.ready', 'h443-%s.ready', 'hold-%s.ready')]
        # the "private" server: a host of the LAN
        self._spawn(self.ns_lan, 'http', self.lan, 80, self.path('lan.log'), self.path('lan.ready'))
        readies.append(self.path('lan.ready'))
        for r in readies:
            self._wait(r)

    def make_net(self, inet_addrs):
        """The namespaces, veths and routes, and @inet_addrs on the internet
        namespace's loopback."""
        for ns, veth, inside, node, plen in ((self.ns_inet, self.veth_inet, self.inet, self.inet_node, 28),
                                             (self.ns_lan, self.veth_lan, self.lan, self.lan_node, 24)):
            _sh('ip netns add %s' % ns)
            _sh('ip link add %s type veth peer name eth0 netns %s' % (veth, ns))
            _sh('ip addr add %s/%d dev %s && ip link set %s up' % (node, plen, veth, veth))
            _sh('ip -n %s addr add %s/%d dev eth0 && ip -n %s link set eth0 up && ip -n %s link set lo up'
                % (ns, inside, plen, ns, ns))
            _sh('ip -n %s route add default via %s' % (ns, node))
        for r in self.routes:
            _sh('ip route add %s via %s' % (r, self.inet))
        for a in inet_addrs:
            _sh('ip -n %s addr add %s/32 dev lo' % (self.ns_inet, a))

    def start_dns(self, zone):
        """The world's resolver on its internet address, port 53."""
        zone_path = self.path('zone.json')
        self.zone = dict(zone)
        self.set_zone({})
        self.dns_log = zone_path + '.log'
        self._spawn(self.ns_inet, 'dns', self.inet, 53, zone_path, self.path('dns.ready'))
        self._wait(self.path('dns.ready'))

    def set_zone(self, more):
        """Adds names to the zone (atomically: the server reads it per query)."""
        self.zone.update(more)
        tmp = self.path('zone.json.tmp')
        with open(tmp, 'w') as f:
            json.dump(self.zone, f)
        os.rename(tmp, self.path('zone.json'))

    def log(self, name):
        try:
            with open(self.path(name)) as f:
                return [json.loads(x) for x in f if x.strip()]
        except FileNotFoundError:
            return []

    def dns_questions(self):
        try:
            with open(self.dns_log) as f:
                return [x.split() for x in f if x.strip()]
        except FileNotFoundError:
            return []

    def teardown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for r in self.routes:
            _sh('ip route del %s via %s 2>/dev/null' % (r, self.inet), check=False)
        for ns in (self.ns_inet, self.ns_lan):
            _sh('ip netns del %s 2>/dev/null' % ns, check=False)
        for veth in (self.veth_inet, self.veth_lan):
            _sh('ip link del %s 2>/dev/null' % veth, check=False)

    @staticmethod
    def sweep_dead():
        """Namespaces and routes of earlier runs killed before their teardown."""
        for line in _sh('ip netns list', check=False).splitlines():
            ns = line.split()[0] if line.split() else ''
            pid = ns.rsplit('-', 1)[-1]
            if not ns.startswith(('boxeg-inet-', 'boxeg-lan-')) or not pid.isdigit() or \
               os.path.exists('/proc/' + pid):
                continue
            _sh('ip netns del %s' % ns, check=False)
            _sh('ip link del eg%s%d 2>/dev/null' % ('i' if '-inet-' in ns else 'l', int(pid) % 100000),
                check=False)
        # the routes into a dead run's namespace went with its veth

if __name__ == '__main__':
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == 'dns':
        serve_dns(*args)
    elif cmd == 'http':
        serve_http(*args)
    elif cmd == 'hold':
        serve_hold(*args)
    else:
        sys.exit('unknown command %s' % cmd)
