#!/usr/bin/env python3
# e2e: the edge's certificates and plain-HTTP listener (issue 15 items 1
# and 4 without ACME).  boxd with an operator certificate for the sandbox
# domain and own-domain certificates in <data-dir>/tls/domains/, all from
# a throw-away CA made here with openssl.  A TLS client checks the chain
# against that CA for each server name (the right certificate per SNI, the
# default without SNI or for an unknown name, a ClientHello that arrives
# in two parts), non-TLS bytes refused; reload on SIGHUP and on file
# change (the served certificate changes, a bad pair is refused with a log
# line and the old one kept, an open connection keeps working); the
# plain-HTTP listener's 308 redirect and its challenge path.

import hashlib
import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time

import boxtest
from boxtest import Boxd, Tap

DOMAIN = boxtest.SANDBOX_DOMAIN


def openssl(*args):
    subprocess.run(['openssl'] + list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


class CA:
    def __init__(self, d):
        self.dir = d
        self.cert = os.path.join(d, 'ca.pem')
        self.key = os.path.join(d, 'ca-key.pem')
        self.n = 0
        openssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
                '-nodes', '-keyout', self.key, '-out', self.cert, '-subj', '/CN=box e2e test CA',
                '-days', '2')

    def issue(self, domain):
        """A new pair for domain and *.domain: (cert path, key path)."""
        self.n += 1
        base = os.path.join(self.dir, 'leaf%d' % self.n)
        ext = base + '.ext'
        with open(ext, 'w') as f:
            f.write('subjectAltName=DNS:%s,DNS:*.%s\n' % (domain, domain))
        openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
                '-nodes', '-keyout', base + '-key.pem', '-out', base + '.csr', '-subj',
                '/CN=%s' % domain)
        openssl('x509', '-req', '-in', base + '.csr', '-CA', self.cert, '-CAkey', self.key,
                '-set_serial', str(1000 + self.n), '-out', base + '.pem', '-days', '2',
                '-extfile', ext)
        return base + '.pem', base + '-key.pem'


def der_of(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def fingerprint(der):
    return hashlib.sha256(der).hexdigest()[:16]


def put(src, dst):
    """Replaces dst by a copy of src in one rename, as operators should."""
    tmp = dst + '.new'
    shutil.copyfile(src, tmp)
    os.rename(tmp, dst)


class Client:
    def __init__(self, port, cafile):
        self.port = port
        self.cafile = cafile
        self.ctx = ssl.create_default_context(cafile=cafile)

    def served(self, sni, verify_name=True):
        """The DER of the leaf served for sni (None: no SNI); the chain is
        checked against the CA and, with verify_name, the name too."""
        ctx = self.ctx
        if sni is None or not verify_name:
            ctx = ssl.create_default_context(cafile=self.cafile)
            ctx.check_hostname = False
        with socket.create_connection(('127.0.0.1', self.port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname=sni) as s:
                return s.getpeercert(binary_form=True)

    def split_hello(self, sni, split, delay):
        """A handshake whose ClientHello arrives in two parts: the leaf."""
        incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        obj = self.ctx.wrap_bio(incoming, outgoing, server_hostname=sni)
        raw = socket.create_connection(('127.0.0.1', self.port), timeout=10)
        first = True
        try:
            while True:
                try:
                    obj.do_handshake()
                    break
                except ssl.SSLWantReadError:
                    pass
                data = outgoing.read()
                if first:
                    raw.sendall(data[:split])
                    time.sleep(delay)
                    raw.sendall(data[split:])
                    first = False
                elif data:
                    raw.sendall(data)
                got = raw.recv(65536)
                if not got:
                    raise ConnectionError('closed during the handshake')
                incoming.write(got)
            raw.sendall(outgoing.read())
            return obj.getpeercert(binary_form=True)
        finally:
            raw.close()


def wait_for(pred, timeout=8):
    """pred() within timeout; a TLS failure (the old certificate does not
    name the host yet) counts as not yet."""
    def attempt():
        try:
            return pred()
        except (ssl.SSLError, OSError):
            return False

    deadline = time.time() + timeout
    while time.time() < deadline:
        if attempt():
            return True
        time.sleep(0.1)
    return attempt()


def test_edge_tls(t):
    work = tempfile.mkdtemp(prefix='box-e2e-edge-tls-')
    ca = CA(work)
    # the operator's certificate is a symlink into another folder: a change
    # of its target is no change the file monitor sees, only SIGHUP is
    real = os.path.join(work, 'real')
    os.mkdir(real)
    sbx_cert, sbx_key = ca.issue(DOMAIN)
    shutil.copyfile(sbx_cert, os.path.join(real, 'edge.pem'))
    shutil.copyfile(sbx_key, os.path.join(real, 'edge-key.pem'))
    os.symlink(os.path.join(real, 'edge.pem'), os.path.join(work, 'edge.pem'))
    os.symlink(os.path.join(real, 'edge-key.pem'), os.path.join(work, 'edge-key.pem'))
    shop_cert, shop_key = ca.issue('shop.test')

    edge_port = boxtest.free_port()
    http_port = boxtest.free_port()
    d = Boxd(t, extra_args=['--edge-listen', '127.0.0.1:%d' % edge_port,
                            '--edge-http-listen', '127.0.0.1:%d' % http_port,
                            '--edge-cert', os.path.join(work, 'edge.pem'),
                            '--edge-key', os.path.join(work, 'edge-key.pem')])
    domains = os.path.join(d.data_dir, 'tls', 'domains')
    os.makedirs(domains)
    shutil.copyfile(shop_cert, os.path.join(domains, 'shop.test.pem'))
    shutil.copyfile(shop_key, os.path.join(domains, 'shop.test-key.pem'))
    d.start()
    # the API answers before the edge listens (boxd.c starts it after)
    t.ok(wait_for(lambda: socket.create_connection(('127.0.0.1', edge_port), timeout=2).close()
                  is None), 'the edge listens')
    c = Client(edge_port, ca.cert)
    host = 'web--acme.%s' % DOMAIN

    with t.section('SNI picks the certificate'):
        t.eq(fingerprint(c.served(host)), fingerprint(der_of(sbx_cert)),
             'the sandbox domain gets the operator\'s certificate')
        t.eq(fingerprint(c.served('shop.test')), fingerprint(der_of(shop_cert)),
             'an own domain gets its certificate')
        t.eq(fingerprint(c.served('web.shop.test')), fingerprint(der_of(shop_cert)),
             'a name under an own domain gets the domain\'s certificate')
        t.eq(fingerprint(c.served('WEB.Shop.Test')), fingerprint(der_of(shop_cert)),
             'server names are case-insensitive')
        t.eq(fingerprint(c.served(None)), fingerprint(der_of(sbx_cert)),
             'no server name: the sandbox domain\'s certificate')
        t.eq(fingerprint(c.served('other.example', verify_name=False)),
             fingerprint(der_of(sbx_cert)), 'an unknown name: the sandbox domain\'s certificate')
        t.eq(fingerprint(c.split_hello('a.shop.test', 7, 0.3)), fingerprint(der_of(shop_cert)),
             'a ClientHello in two parts still picks by name')
        with socket.create_connection(('127.0.0.1', edge_port), timeout=10) as s:
            s.sendall(b'GET / HTTP/1.1\r\nHost: x\r\n\r\n')
            try:
                got = s.recv(100)
            except ConnectionResetError:
                got = b''
            t.eq(got, b'', 'plain HTTP on the TLS port: closed, nothing answered')

    # an open connection before the reloads: it is not cut
    keep = http.client.HTTPSConnection('shop.test', edge_port, context=c.ctx, timeout=10)
    keep._create_connection = lambda addr, *a, **kw: socket.create_connection(
        ('127.0.0.1', addr[1]), *a, **kw)
    keep.request('GET', '/', headers={'Host': 'nope.%s' % DOMAIN})
    r = keep.getresponse()
    r.read()
    t.eq(r.status, 404, 'a request on a connection opened before the reloads')

    with t.section('reload on file change'):
        shop2_cert, shop2_key = ca.issue('shop.test')
        put(shop2_key, os.path.join(domains, 'shop.test-key.pem'))
        put(shop2_cert, os.path.join(domains, 'shop.test.pem'))
        t.ok(wait_for(lambda: c.served('shop.test') == der_of(shop2_cert)),
             'a new own-domain pair is served without a restart')
        new_cert, new_key = ca.issue('new.test')
        put(new_key, os.path.join(domains, 'new.test-key.pem'))
        put(new_cert, os.path.join(domains, 'new.test.pem'))
        t.ok(wait_for(lambda: c.served('new.test') == der_of(new_cert)),
             'a new own domain\'s certificate is served')
        # a key that is not the certificate's: refused, the old pair kept
        line = 'certificate for shop.test refused, the old one kept'
        before = d.log_text().count(line)
        put(sbx_key, os.path.join(domains, 'shop.test-key.pem'))
        t.ok(wait_for(lambda: d.log_text().count(line) > before),
             'a bad pair is refused with a log line')
        t.eq(fingerprint(c.served('shop.test')), fingerprint(der_of(shop2_cert)),
             'the old pair is still served')
        os.unlink(os.path.join(domains, 'new.test.pem'))
        t.ok(wait_for(lambda: c.served('new.test', verify_name=False) == der_of(sbx_cert)),
             'a domain whose files are gone falls back to the default')

    with t.section('reload on SIGHUP'):
        sbx2_cert, sbx2_key = ca.issue(DOMAIN)
        shutil.copyfile(sbx2_key, os.path.join(real, 'edge-key.pem'))
        shutil.copyfile(sbx2_cert, os.path.join(real, 'edge.pem'))
        time.sleep(1)
        t.eq(fingerprint(c.served(host)), fingerprint(der_of(sbx_cert)),
             'before SIGHUP the old certificate (the change is out of the monitor\'s sight)')
        d.proc.send_signal(signal.SIGHUP)
        t.ok(wait_for(lambda: c.served(host) == der_of(sbx2_cert)),
             'after SIGHUP the new certificate')
        with open(os.path.join(real, 'edge.pem'), 'w') as f:
            f.write('not a certificate\n')
        d.proc.send_signal(signal.SIGHUP)
        t.ok(wait_for(lambda: 'certificate for %s refused, the old one kept' % DOMAIN
                      in d.log_text()), 'a bad operator pair is refused with a log line')
        t.eq(fingerprint(c.served(host)), fingerprint(der_of(sbx2_cert)),
             'the old operator pair is still served')
        t.ok(d.alive(), 'boxd lives through SIGHUP')

    keep.request('GET', '/', headers={'Host': 'nope.%s' % DOMAIN})
    r = keep.getresponse()
    r.read()
    t.eq(r.status, 404, 'the connection opened before the reloads still answers')
    keep.close()

    with t.section('plain-HTTP listener'):
        def plain(method, path, host_header):
            conn = http.client.HTTPConnection('127.0.0.1', http_port, timeout=10)
            conn.request(method, path, body=b'x' * 10 if method == 'POST' else None,
                         headers={'Host': host_header})
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            return resp.status, resp.getheader('Location'), body

        st, loc, _ = plain('GET', '/a/b?x=1&y=2', host)
        t.eq((st, loc), (308, 'https://%s:%d/a/b?x=1&y=2' % (host, edge_port)),
             'GET: 308 to the https URL with the edge\'s port')
        st, loc, _ = plain('POST', '/form', 'Shop.Test:%d' % http_port)
        t.eq((st, loc), (308, 'https://shop.test:%d/form' % edge_port),
             'POST: 308 (the method kept), the http port dropped')
        st, loc, _ = plain('GET', '/.well-known/acme-challenge/unknown-token', 'shop.test')
        t.eq((st, loc), (404, None), 'an unknown ACME challenge: 404, no redirect')
        st, loc, _ = plain('GET', '/', 'bad/host')
        t.eq((st, loc), (400, None), 'a Host that is no host: 400')

    d.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    tap = Tap()
    boxtest.main(tap, test_edge_tls)
