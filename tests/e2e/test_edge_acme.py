#!/usr/bin/env python3
# e2e: certificates for own domains from a real ACME server (issue 15
# items 4 and 7): Debian's pebble on loopback ports, its http-01
# validation sent to boxd's plain-HTTP listener through a tiny DNS server
# here that answers 127.0.0.1 for every name (nothing leaves the machine).
# boxd runs with the dummy hypervisor.  Checked: the first TLS handshake
# for x.<own domain> waits for and gets a certificate for exactly that
# name, chained to pebble's root through its intermediate; it is stored
# (key 0600) and loaded after a restart without a new order; a host under
# no own domain gets no order; the hourly cap refuses the next host, which
# gets the default certificate; renewal (renew at 100 % lifetime left)
# serves a new serial without a restart; with pebble stopped renewals fail
# with a log line, boxd lives and the certificate keeps being served;
# six handshakes at once for a new host make one order; a hostile ACME
# server (a problem document, badNonce (sent again with the new nonce), a
# reply over the bound, a directory of junk,
# no answer at all) gives log lines and the default certificate (the last
# after the handshake's bounded wait), never a crash.

import base64
import json
import os
import shutil
import socket
import ssl
import stat
import struct
import subprocess
import tempfile
import threading
import time
import urllib.request

import boxtest
from boxtest import Boxd, Tap

DOMAIN = 'acme-e2e.test'
ORDERING = 'acme: ordering a'


def openssl(*args, capture=False):
    r = subprocess.run(['openssl'] + list(args), check=True, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, input=None)
    return r.stdout.decode() if capture else None


class Dns(threading.Thread):
    """A UDP DNS server on loopback: A 127.0.0.1 for every name, no
    records of other types."""

    def __init__(self):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(('127.0.0.1', 0))
        self.port = self.sock.getsockname()[1]
        self.names = []
        self.running = True

    def run(self):
        while self.running:
            try:
                data, addr = self.sock.recvfrom(512)
            except OSError:
                return
            if len(data) < 17:
                continue
            i = 12
            labels = []
            while i < len(data) and data[i] != 0:
                labels.append(data[i + 1:i + 1 + data[i]].decode('ascii', 'replace'))
                i += 1 + data[i]
            question = data[12:i + 5]
            qtype = struct.unpack('>H', data[i + 1:i + 3])[0]
            self.names.append('.'.join(labels))
            answer = b''
            if qtype == 1:
                answer = struct.pack('>HHHIH', 0xc00c, 1, 1, 60, 4) + socket.inet_aton('127.0.0.1')
            head = data[:2] + struct.pack('>HHHHH', 0x8180, 1, 1 if answer else 0, 0, 0)
            self.sock.sendto(head + question + answer, addr)

    def stop(self):
        self.running = False
        self.sock.close()


class Pebble:
    def __init__(self, work, http_port):
        self.work = work
        self.ca = os.path.join(work, 'pebble-ca.pem')
        ca_key = os.path.join(work, 'pebble-ca-key.pem')
        self.cert = os.path.join(work, 'pebble.pem')
        self.key = os.path.join(work, 'pebble-key.pem')
        openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
                '-nodes', '-keyout', ca_key, '-out', self.ca, '-subj', '/CN=pebble e2e CA',
                '-days', '2')
        csr = os.path.join(work, 'pebble.csr')
        ext = os.path.join(work, 'pebble.ext')
        with open(ext, 'w') as f:
            f.write('subjectAltName=DNS:localhost,IP:127.0.0.1\n')
        openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
                '-nodes', '-keyout', self.key, '-out', csr, '-subj', '/CN=localhost')
        openssl('x509', '-req', '-in', csr, '-CA', self.ca, '-CAkey', ca_key, '-set_serial', '7',
                '-out', self.cert, '-days', '2', '-extfile', ext)
        self.port = boxtest.free_port()
        self.mgmt = boxtest.free_port()
        self.http_port = http_port
        self.dns = Dns()
        self.dns.start()
        self.proc = None
        self.log = os.path.join(work, 'pebble.log')

    def start(self):
        config = os.path.join(self.work, 'pebble.json')
        with open(config, 'w') as f:
            json.dump({'pebble': {
                'listenAddress': '127.0.0.1:%d' % self.port,
                'managementListenAddress': '127.0.0.1:%d' % self.mgmt,
                'certificate': self.cert, 'privateKey': self.key,
                'httpPort': self.http_port, 'tlsPort': boxtest.free_port(),
                'ocspResponderURL': '', 'externalAccountBindingRequired': False}}, f)
        env = dict(os.environ, PEBBLE_VA_NOSLEEP='1')
        self.logf = open(self.log, 'ab')
        self.proc = subprocess.Popen(['pebble', '-config', config, '-dnsserver',
                                      '127.0.0.1:%d' % self.dns.port], env=env,
                                     stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(('127.0.0.1', self.port), timeout=1).close()
                socket.create_connection(('127.0.0.1', self.mgmt), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError('pebble did not listen')

    @property
    def directory(self):
        return 'https://localhost:%d/dir' % self.port

    def management(self, path):
        ctx = ssl.create_default_context(cafile=self.ca)
        with urllib.request.urlopen('https://localhost:%d%s' % (self.mgmt, path), context=ctx,
                                    timeout=10) as r:
            return r.read().decode()

    def stop(self):
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.logf.close()
            self.proc = None


class Hostile(threading.Thread):
    """An https server that answers like a broken ACME server: a problem
    document, a reply too big, a directory without its URLs."""

    def __init__(self, cert, key):
        super().__init__(daemon=True)
        import http.server
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, status, ctype, body, extra=()):
                self.send_response(status)
                self.send_header('Content-Type', ctype)
                self.send_header('Content-Length', str(len(body)))
                self.send_header('Replay-Nonce', 'hostile-nonce')
                for k, v in extra:
                    self.send_header(k, v)
                self.end_headers()
                if self.command != 'HEAD':
                    self.wfile.write(body)

            def do_HEAD(self):
                self.reply(200, 'text/plain', b'')

            def do_GET(self):
                base = 'https://localhost:%d' % outer.port
                if self.path in ('/problem-dir', '/badnonce-dir'):
                    acct = '/acct' if self.path == '/problem-dir' else '/acct-bn'
                    body = json.dumps({'newNonce': base + '/nonce', 'newAccount': base + acct,
                                       'newOrder': base + '/order'}).encode()
                elif self.path == '/slow-dir':
                    time.sleep(30)
                    body = b'{}'
                elif self.path == '/big-dir':
                    body = b'{"x": "' + b'a' * 200000 + b'"}'
                else:
                    body = json.dumps({'newNonce': 'http://insecure/nonce', 'newAccount': 7,
                                       'newOrder': None}).encode()
                self.reply(200, 'application/json', body)

            def do_POST(self):
                jws = json.loads(self.rfile.read(int(self.headers.get('Content-Length', '0'))))
                header = json.loads(base64.urlsafe_b64decode(
                    jws['protected'] + '=' * (-len(jws['protected']) % 4)))
                if self.path != '/acct-bn':
                    detail = 'no, thanks'
                elif header['nonce'] != 'fresh-nonce':
                    # badNonce with a new nonce: the client must send again with it
                    self.send_response(400)
                    body = json.dumps({'type': 'urn:ietf:params:acme:error:badNonce',
                                       'detail': 'stale'}).encode()
                    self.send_header('Content-Type', 'application/problem+json')
                    self.send_header('Content-Length', str(len(body)))
                    self.send_header('Replay-Nonce', 'fresh-nonce')
                    self.end_headers()
                    self.wfile.write(body)
                    return
                else:
                    detail = 'sent again with the fresh nonce'
                self.reply(400, 'application/problem+json', json.dumps(
                    {'type': 'urn:ietf:params:acme:error:malformed', 'detail': detail}).encode())

        self.httpd = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.start()

    def run(self):
        self.httpd.serve_forever()

    def stop(self):
        self.httpd.shutdown()


def served(port, sni, cafile=None, timeout=40):
    """The DER of the leaf served for sni; with cafile the chain and the
    name are verified against it."""
    if cafile is not None:
        ctx = ssl.create_default_context(cafile=cafile)
    else:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname=sni) as s:
            return s.getpeercert(binary_form=True)


def served_openssl(port, sni):
    """The first line of the leaf's PEM body that openssl s_client is served
    for @sni (sent as it is)."""
    r = subprocess.run(['openssl', 's_client', '-connect', '127.0.0.1:%d' % port,
                        '-servername', sni], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, timeout=60)
    lines = r.stdout.decode('ascii', 'replace').split('\n')
    begin = lines.index('-----BEGIN CERTIFICATE-----') if '-----BEGIN CERTIFICATE-----' in lines else -2
    return lines[begin + 1] if begin >= 0 else None


def pem_of(der):
    return ssl.DER_cert_to_PEM_cert(der)


def serial_of(der):
    out = subprocess.run(['openssl', 'x509', '-noout', '-serial'], input=pem_of(der).encode(),
                         stdout=subprocess.PIPE, check=True).stdout.decode()
    return out.strip()


def names_of(der):
    out = subprocess.run(['openssl', 'x509', '-noout', '-ext', 'subjectAltName'],
                         input=pem_of(der).encode(), stdout=subprocess.PIPE,
                         check=True).stdout.decode()
    return sorted(n.strip()[4:] for n in out.splitlines()[-1].split(',') if 'DNS:' in n)


def wait_for(pred, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if pred():
                return True
        except (ssl.SSLError, OSError):
            pass
        time.sleep(0.3)
    return False


def start(d, edge_port):
    """Starts boxd and waits for its edge (which listens after the API)."""
    d.start()
    if not wait_for(lambda: socket.create_connection(('127.0.0.1', edge_port), timeout=2).close()
                    is None):
        raise RuntimeError('the edge does not listen')


def write_conf(path, **keys):
    with open(path, 'w') as f:
        f.write('[boxd]\n')
        for k, v in keys.items():
            f.write('%s=%s\n' % (k, v))


def test_refused_config(t):
    """Bad ACME settings stop boxd at start with a message."""
    work = tempfile.mkdtemp(prefix='box-e2e-acme-conf-')
    conf = os.path.join(work, 'boxd.conf')
    base = [boxtest.BOXD, '--data-dir', os.path.join(work, 'data'), '--listen', '127.0.0.1:0',
            '--hypervisor', 'dummy', '--no-dbus', '--plugin-dir', boxtest.PLUGIN_DIR,
            '--config', conf, '--edge-listen', '127.0.0.1:0']
    env = dict(os.environ, BOX_ADMIN_TOKEN=boxtest.random_token())
    cases = [
        ('no plain-HTTP listener', '', ['--acme'], 'acme needs edge_http_listen'),
        ('an http directory', '', ['--acme', '--edge-http-listen', '127.0.0.1:0',
                                   '--acme-directory', 'http://127.0.0.1:1/dir'],
         'is no https URL'),
        ('acme_renew_percent=101', 'acme_renew_percent=101\n', [],
         'acme_renew_percent is 0 to 100'),
        ('acme=maybe', 'acme=maybe\n', [], 'acme:'),
        ('a CA file that is none', '', ['--acme', '--edge-http-listen', '127.0.0.1:0',
                                        '--acme-ca-file', conf], 'acme_ca_file'),
    ]
    for desc, text, args, want in cases:
        with open(conf, 'w') as f:
            f.write('[boxd]\n' + text)
        r = subprocess.run(base + args, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=30)
        out = r.stdout.decode('utf-8', 'replace')
        t.ok(r.returncode != 0 and want in out, '%s: boxd refuses to start (%s)' % (desc, want),
             'exit %d: %s' % (r.returncode, out[-500:]))
    shutil.rmtree(work, ignore_errors=True)


def test_edge_acme(t):
    if shutil.which('pebble') is None:
        t.skip('ACME against pebble', 'pebble is not installed (dev/deps.sh installs it)')
        return
    work = tempfile.mkdtemp(prefix='box-e2e-acme-')
    edge_port = boxtest.free_port()
    http_port = boxtest.free_port()
    pebble = Pebble(work, http_port)
    pebble.start()
    conf = os.path.join(work, 'boxd.conf')
    write_conf(conf, acme_orders_per_hour=2, acme_renew_check_s=1)
    d = Boxd(t, extra_args=['--config', conf,
                            '--edge-listen', '127.0.0.1:%d' % edge_port,
                            '--edge-http-listen', '127.0.0.1:%d' % http_port,
                            '--acme', '--acme-directory', pebble.directory,
                            '--acme-ca-file', pebble.ca, '--acme-email', 'ops@example.org'])
    d.start()
    t.ok(wait_for(lambda: socket.create_connection(('127.0.0.1', edge_port), timeout=2).close()
                  is None), 'the edge listens')
    d.make_project('shop', [DOMAIN])
    default = served(edge_port, 'web--shop.%s' % boxtest.SANDBOX_DOMAIN)
    root = os.path.join(work, 'root.pem')
    intermediate = os.path.join(work, 'intermediate.pem')
    with open(root, 'w') as f:
        f.write(pebble.management('/roots/0'))
    with open(intermediate, 'w') as f:
        f.write(pebble.management('/intermediates/0'))
    host = 'x.%s' % DOMAIN

    with t.section('first use: issued by pebble for that exact name'):
        t0 = time.time()
        der = served(edge_port, host, cafile=root)
        t.ok(True, 'the first handshake for %s verifies against pebble\'s root (%.1fs)'
             % (host, time.time() - t0))
        t.eq(names_of(der), [host], 'the certificate names exactly %s' % host)
        leaf = os.path.join(work, 'leaf.pem')
        with open(leaf, 'w') as f:
            f.write(pem_of(der))
        r = subprocess.run(['openssl', 'verify', '-CAfile', root, '-untrusted', intermediate,
                            '-partial_chain', leaf], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        t.ok(r.returncode == 0, 'the leaf chains to pebble\'s intermediate and root',
             r.stdout.decode())
        r = subprocess.run(['openssl', 'verify', '-CAfile', intermediate, '-partial_chain', leaf],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        t.ok(r.returncode == 0, 'the leaf is signed by pebble\'s intermediate', r.stdout.decode())
        t.ok(host in pebble.dns.names, 'pebble looked the name up in the test\'s DNS')
        acme_dir = os.path.join(d.data_dir, 'tls', 'acme')
        key_mode = stat.S_IMODE(os.stat(os.path.join(acme_dir, host + '-key.pem')).st_mode)
        t.eq(oct(key_mode), oct(0o600), 'the key is stored 0600')
        with open(os.path.join(acme_dir, host + '.pem')) as f:
            t.ok(pem_of(der).strip().split('\n')[1] in f.read(), 'the chain is stored')
        acct = os.path.join(d.data_dir, 'tls', 'acme-account-key.pem')
        t.eq(oct(stat.S_IMODE(os.stat(acct).st_mode)), oct(0o600), 'the account key is 0600')
        t.eq(served(edge_port, host, cafile=root), der, 'the next handshake: the same certificate')
        t.eq(d.log_text().count(ORDERING), 1, 'one order so far')

    with t.section('only hosts under own domains'):
        before = d.log_text().count(ORDERING)
        t.eq(served(edge_port, 'x.other.example'), default, 'a host under no own domain: default')
        t.eq(served(edge_port, DOMAIN), default, 'the own domain itself: default, no order')
        t.eq(served(edge_port, 'a.b.%s' % DOMAIN), default, 'a deeper name (no sandbox URL): default')
        t.eq(served(edge_port, 'a--b--c.%s' % DOMAIN), default, 'a bad label: default')
        # names Python's ssl would not send, through openssl as they are
        for bad in ('-q.', '..q.', '.', 'q..'):
            t.eq(served_openssl(edge_port, bad + DOMAIN), pem_of(default).split('\n')[1],
                 'a server name %s: default' % (bad + DOMAIN))
        t.eq(d.log_text().count(ORDERING), before, 'no order for any of them')

    with t.section('a storm on one new host: one order'):
        got = []

        def visit():
            try:
                got.append(served(edge_port, 'y.%s' % DOMAIN, cafile=root))
            except (ssl.SSLError, OSError) as e:
                got.append(e)
        threads = [threading.Thread(target=visit) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        t.ok(len(got) == 6 and len(set(g for g in got if isinstance(g, bytes))) == 1
             and all(isinstance(g, bytes) for g in got),
             'six handshakes at once all get the same certificate', repr(got)[:300])
        t.eq(names_of(got[0]), ['y.%s' % DOMAIN], 'it names y.%s' % DOMAIN)
        t.eq(d.log_text().count('%s certificate for y.%s' % (ORDERING, DOMAIN)), 1,
             'one order for them')

    with t.section('the hourly cap'):
        t.eq(served(edge_port, 'z.%s' % DOMAIN), default,
             'the third host (acme_orders_per_hour=2) gets the default certificate')
        t.ok('no order for z.%s now: too many orders this hour' % DOMAIN in d.log_text(),
             'the refusal is logged')
        for name in ('z1', 'z2', 'z3'):
            t.eq(served(edge_port, '%s.%s' % (name, DOMAIN)), default,
                 '%s.%s: the default certificate too' % (name, DOMAIN))
        t.eq(d.log_text().count('acme: no order for'), 1,
             'a storm of refusals is one log line (a minute)')
        t.eq(d.log_text().count(ORDERING), 2, 'two orders in all')

    with t.section('restart: loaded, no new order'):
        d.stop()
        d.start()
        t.ok(wait_for(lambda: served(edge_port, host, cafile=root) == der),
             'after a restart the stored certificate is served')
        t.ok('acme: loaded the certificate for %s' % host in d.log_text(), 'loaded at start')
        t.eq(d.log_text().count(ORDERING), 2, 'no new order after the restart')

    with t.section('renewal without a restart'):
        d.stop()
        # every check renews (100 % left is always less than all); no hourly
        # cap, so that x's renewals go on until the server stops
        write_conf(conf, acme_orders_per_hour=0, acme_renew_check_s=1, acme_renew_percent=100)
        d.start()
        t.ok(wait_for(lambda: serial_of(served(edge_port, host, cafile=root)) != serial_of(der),
                      timeout=60), 'a new serial is served for %s without a restart' % host)
        renewed = served(edge_port, host, cafile=root)
        t.eq(names_of(renewed), [host], 'the renewed certificate names %s' % host)

    with t.section('the ACME server fails'):
        pebble.stop()
        t.ok(wait_for(lambda: 'acme: order for %s failed, the old certificate kept' % host
                      in d.log_text(), timeout=60), 'a failed renewal is logged')
        current = served(edge_port, host, cafile=root)
        t.ok(names_of(current) == [host], 'a certificate for %s is still served' % host)
        t.ok(d.alive(), 'boxd lives')
        t.eq(served(edge_port, 'w.%s' % DOMAIN), default,
             'a new host while the server is down: the default certificate')
        t.ok(wait_for(lambda: 'acme: order for w.%s failed: ' % DOMAIN in d.log_text()),
             'its order failed, logged')
        t.eq(served(edge_port, 'w.%s' % DOMAIN), default, 'asked again: the default at once')
        t.ok(wait_for(lambda: 'no order for w.%s now: it failed lately (back-off)' % DOMAIN
                      in d.log_text()), 'no new order in its back-off')
        t.ok(d.alive(), 'boxd still lives')

    with t.section('a hostile ACME server'):
        hostile = Hostile(pebble.cert, pebble.key)
        for path, line in (('/problem-dir', 'newAccount: HTTP 400: '
                                            'urn:ietf:params:acme:error:malformed: no, thanks'),
                           ('/badnonce-dir', 'newAccount: HTTP 400: urn:ietf:params:acme:'
                                             'error:malformed: sent again with the fresh nonce'),
                           ('/big-dir', 'an answer larger than 65536 bytes'),
                           ('/junk-dir', 'names no newNonce, newAccount or newOrder')):
            d.stop()
            d.extra_args[d.extra_args.index('--acme-directory') + 1] = \
                'https://localhost:%d%s' % (hostile.port, path)
            start(d, edge_port)
            t.eq(served(edge_port, 'v.%s' % DOMAIN), default,
                 '%s: the default certificate' % path)
            t.ok(wait_for(lambda: line in d.log_text()), '%s: logged: %s' % (path, line))
            t.ok(d.alive(), '%s: boxd lives' % path)
        # a server that does not answer: the first handshake waits 20 s at
        # most, then gets the default; boxd stops with the order under way
        # (acme_max_concurrent=1: a second host meanwhile is refused)
        d.stop()
        write_conf(conf, acme_orders_per_hour=0, acme_max_concurrent=1)
        d.extra_args[d.extra_args.index('--acme-directory') + 1] = \
            'https://localhost:%d/slow-dir' % hostile.port
        start(d, edge_port)
        t0 = time.time()
        slow = []
        th = threading.Thread(target=lambda: slow.append(served(edge_port, 'u.%s' % DOMAIN)))
        th.start()
        t.ok(wait_for(lambda: 'ordering a certificate for u.%s' % DOMAIN in d.log_text()),
             'an order for u.%s is under way' % DOMAIN)
        t1 = time.time()
        t.eq(served(edge_port, 's.%s' % DOMAIN), default,
             'meanwhile a second host gets the default certificate')
        t.ok(time.time() - t1 < 10, 'at once, not after a wait')
        t.ok('no order for s.%s now: too many orders under way (acme_max_concurrent)' % DOMAIN
             in d.log_text(), 'refused by acme_max_concurrent=1, logged')
        th.join()
        t.eq(slow, [default], 'a server that does not answer: the default certificate')
        waited = time.time() - t0
        t.ok(18 <= waited <= 27, 'after the bounded wait (20 s): %.1f s' % waited)
        t.ok('no certificate for u.%s in time' % DOMAIN in d.log_text(), 'the wait\'s end is logged')
        hostile.stop()

    d.stop()
    pebble.dns.stop()
    if not os.environ.get('BOX_E2E_KEEP'):
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    tap = Tap()
    boxtest.main(tap, test_refused_config, test_edge_acme)
