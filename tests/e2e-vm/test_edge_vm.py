#!/usr/bin/env python3
# vm: the edge (issue 15 items 2, 3 and 7) against a real microVM: boxd
# with --edge-listen and its own CA, one sandbox whose guest runs
# tests/e2e/edge_echo.py as two services (one bound to 127.0.0.1 only, the
# sandbox's http_port; one on 0.0.0.0 for a port URL).  A TLS client
# checks the chain against <data-dir>/tls/ca.pem and the host name (SNI);
# routing, 404s, private and public, the box_token 302 and cookie exactly,
# key stripping (the echo shows what reached the guest), 502 port_closed
# after the wait, a stopped service started by a request, the upgrade
# relayed both ways, an own domain's URLs, a streamed upload and download
# through the guest with boxd's memory sampled, and last a paused sandbox
# woken by a request.

import hashlib
import os
import socket
import time

import vmtest
from vmtest import Tap, VmBoxd
import boxtest
from edgetest import (Edge, RssSampler, check_private, echo_back, hdr, stream_download,
                      stream_upload)

DOMAIN = boxtest.SANDBOX_DOMAIN
ECHO_SRC = os.path.join(vmtest.SOURCE_ROOT, 'tests', 'e2e', 'edge_echo.py')
LOCAL_PORT = 8080    # the http_port: bound to 127.0.0.1 in the guest
WIDE_PORT = 8081     # bound to 0.0.0.0
BIG = 48 * 1024 * 1024
# boxd may grow by less than this while BIG crosses the edge and the guest
RSS_BOUND_KIB = 32 * 1024

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
EDGE_PORT = boxtest.free_port()
d = VmBoxd(t, extra_args=['--edge-listen', '127.0.0.1:%d' % EDGE_PORT])
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('acme'))
OTHER = vmtest.setup_or_bail(d, lambda: d.project_with_key('other'))
with clock('create the sandbox'):
    vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'web', 'http_port': LOCAL_PORT}))
HOST = 'web--acme.%s' % DOMAIN
WIDE = '%d--web--acme.%s' % (WIDE_PORT, DOMAIN)
AUTH = {'Authorization': 'Bearer ' + KEY}
E = Edge(EDGE_PORT, os.path.join(d.data_dir, 'tls', 'ca.pem'))


def put_service(name, port, address):
    return d.request('PUT', '/v1/sandboxes/web/services/%s' % name,
                     {'cmd': ['python3', '/tmp/edge_echo.py', str(port), address],
                      'http_port': port}, token=KEY, timeout=60)


def wait_answer(host, timeout=60):
    end = time.time() + timeout
    r = None
    while time.time() < end:
        r = E.get(host, '/ready', headers=AUTH)
        if r[0] == 200:
            break
        time.sleep(0.5)
    return r


def setup():
    with open(ECHO_SRC, 'rb') as f:
        src = f.read()
    r = vmtest.run(d, KEY, 'web', ['sh', '-c', 'cat > /tmp/edge_echo.py'], stdin=src)
    if r.status != 200 or r.exit_code != 0:
        raise RuntimeError('copy edge_echo.py: ' + r.describe())
    for name, port, address in (('local', LOCAL_PORT, '127.0.0.1'), ('wide', WIDE_PORT, '0.0.0.0')):
        r = put_service(name, port, address)
        if r[0] != 200:
            raise RuntimeError('PUT service %s: %s %s' % (name, r[0], r[3][:300]))


with clock('echo servers up in the guest'):
    vmtest.setup_or_bail(d, setup)


def test_tls_and_routing(t):
    r = wait_answer(HOST)
    t.status(r, 200, 'the sandbox URL answers (http_port, server bound to 127.0.0.1 in the guest)')
    raw = socket.create_connection(('127.0.0.1', EDGE_PORT))
    s = E.ctx.wrap_socket(raw, server_hostname=HOST)
    t.ok(s.version() in ('TLSv1.2', 'TLSv1.3'), 'TLS 1.2 or 1.3, chain checked against ca.pem',
         s.version())
    t.eq(s.selected_alpn_protocol(), 'http/1.1', 'ALPN http/1.1')
    s.close()
    t.ok(E.handshake_fails('web--acme.elsewhere.test'),
         'the certificate does not name another domain (SNI checked)')
    body = b'hello guest'
    r = E.get(HOST, '/x?a=1', headers=AUTH, method='POST', body=body)
    t.eq(((r[2] or {}).get('method'), (r[2] or {}).get('path'), (r[2] or {}).get('sha256')),
         ('POST', '/x?a=1', hashlib.sha256(body).hexdigest()),
         'method, path, query and body reach the guest')
    r = E.get(HOST, '/x?a=1', headers=AUTH)
    t.eq(((r[2] or {}).get('method'), (r[2] or {}).get('path')), ('GET', '/x?a=1'),
         'GET /x?a=1 echoed by the guest')
    t.eq(hdr(r[2], 'X-Forwarded-Proto'), ['https'], 'X-Forwarded-Proto https')
    t.eq(hdr(r[2], 'X-Forwarded-Host'), ['%s:%d' % (HOST, EDGE_PORT)], 'X-Forwarded-Host')
    r = wait_answer(WIDE)
    t.status(r, 200, 'the port URL goes to that port (server on 0.0.0.0)')
    for bad in ('nope--acme.%s' % DOMAIN, 'web--nope.%s' % DOMAIN, 'acme.%s' % DOMAIN, DOMAIN,
                '0--web--acme.%s' % DOMAIN):
        r = E.get(bad, headers=AUTH, sni=HOST)
        t.eq((r[0], (r[2] or {}).get('error', {}).get('code')), (404, 'not_found'),
             '404 not_found for %s' % bad)


def test_access(t):
    check_private(t, E, HOST, KEY, OTHER, EDGE_PORT)
    r = E.get(HOST, '/page?a=1&b=2', headers={'Cookie': 'x=1; box_token=%s' % KEY})
    t.status(r, 200, 'then the cookie lets the request through')
    t.eq(((r[2] or {}).get('path'), hdr(r[2], 'Cookie')), ('/page?a=1&b=2', ['x=1']),
         'the guest got neither the box_token cookie nor the parameter')
    t.eq(E.get(HOST, headers={'Cookie': 'box_token=%s' % OTHER})[0], 401,
         'another project\'s key as cookie: 401')

    r = d.request('PUT', '/v1/sandboxes/web/ports/%d' % WIDE_PORT, {'access': 'public'}, token=KEY)
    t.status(r, 200, 'PUT the 0.0.0.0 port public')
    t.status(E.get(WIDE, '/pub'), 200, 'a public port needs no key')
    r = E.get(WIDE, '/pub?box_token=junk&z=1', headers={'Authorization': 'Bearer ' + KEY})
    t.eq((r[0], (r[2] or {}).get('path'), hdr(r[2], 'Authorization')), (200, '/pub?z=1', []),
         'on a public port too the guest gets neither the box_token parameter nor the key')
    t.eq(E.get(HOST)[0], 401, 'the sandbox URL follows its own http_port: still private')


def test_port_closed(t):
    start = time.time()
    r = E.get('9999--web--acme.%s' % DOMAIN, headers=AUTH)
    took = time.time() - start
    t.eq((r[0], (r[2] or {}).get('error', {}).get('code')), (502, 'port_closed'),
         'nothing listening on 9999 in the guest: 502 port_closed')
    t.ok(9.5 <= took < 20, 'after waiting about 10 s', '%.1f s' % took)


def test_service_started(t):
    r = d.request('POST', '/v1/sandboxes/web/services/wide/stop', token=KEY, timeout=60)
    t.eq((r[2] or {}).get('state'), 'stopped', 'the 0.0.0.0 service stopped')
    r = E.get(WIDE, '/after-stop', timeout=60)
    t.eq((r[0], (r[2] or {}).get('path')), (200, '/after-stop'),
         'a request to its http_port starts it and gets its answer')
    r = d.request('GET', '/v1/sandboxes/web/services/wide', token=KEY)
    t.eq((r[2] or {}).get('state'), 'running', 'the service runs')


def test_upgrade(t):
    s, head = E.upgrade(HOST, KEY)
    t.ok(head.startswith(b'HTTP/1.1 101'), '101 from the guest relayed', head[:40])
    for msg in (b'ping', os.urandom(200000)):
        t.ok(echo_back(s, msg) == msg, 'bytes to the guest and back through the upgrade (%d)' % len(msg))
    s.close()


def test_big(t):
    for name, fn in (('upload', lambda: stream_upload(E, HOST, AUTH, BIG)),
                     ('download', lambda: stream_download(E, HOST, AUTH, BIG))):
        rss = RssSampler(d.proc.pid)
        with clock('%d MiB %s' % (BIG >> 20, name)):
            r = fn()
        base, peak = rss.stop()
        if name == 'upload':
            t.eq((r[0], (r[1] or {}).get('length'), (r[1] or {}).get('sha256')), (200, BIG, r[2]),
                 'a %d MiB upload reaches the guest whole' % (BIG >> 20))
        else:
            t.eq(r, (200, BIG), 'a %d MiB download from the guest arrives whole' % (BIG >> 20))
        t.comment('%s: boxd VmRSS %d -> peak %d KiB' % (name, base, peak))
        t.ok(peak - base < RSS_BOUND_KIB, 'boxd grew by less than %d MiB during the %s'
             % (RSS_BOUND_KIB >> 10, name), (base, peak))


def test_wake(t):
    r = d.request('POST', '/v1/sandboxes/web/pause', token=KEY, timeout=120)
    t.eq(vmtest.state(d, KEY, 'web'), 'paused', 'paused')
    r = E.get(HOST, '/w', headers=AUTH, timeout=120)
    t.eq((r[0], (r[2] or {}).get('path')), (200, '/w'), 'a request to the paused sandbox is answered')
    t.eq(vmtest.state(d, KEY, 'web'), 'running', 'the request woke it')


def test_cleanup(t):
    vmtest.delete_all_and_stop(t, d, KEY)


def test_own_domain(t):
    # a few requests on the running sandbox (tests/e2e/test_edge_domains.py
    # has every rule); the sandbox domain's certificate, the own host as Host
    own = 'web.apps.example.test'
    r = d.admin('PATCH', '/v1/projects/acme', {'domains': ['apps.example.test']})
    t.status(r, 200, 'PATCH acme\'s domains')
    r = E.get(own, '/own?a=1', headers=AUTH, sni=HOST)
    t.eq((r[0], (r[2] or {}).get('path'), hdr(r[2], 'Authorization')), (200, '/own?a=1', []),
         'N.<domain> reaches the guest\'s http_port, the key stripped')
    r = E.get('%d--%s' % (WIDE_PORT, own), '/p', headers=AUTH, sni=HOST)
    t.eq((r[0], (r[2] or {}).get('path')), (200, '/p'), '<port>--N.<domain> reaches that port')
    t.eq(E.get(own, sni=HOST)[0], 401, 'private without the key: 401')
    r = E.get('apps.example.test', headers=AUTH, sni=HOST)
    t.eq((r[0], (r[2] or {}).get('error', {}).get('code')), (404, 'not_found'),
         'the domain itself: 404 not_found')


vmtest.main(t, clock, test_tls_and_routing, test_access, test_port_closed, test_service_started,
            test_upgrade, test_own_domain, test_big, test_wake, test_cleanup)
