#!/usr/bin/env python3
# e2e: the edge (issue 15 items 1-3): boxd with --edge-listen and its own
# CA, on the dummy hypervisor whose `agent =` option runs the real guest
# agent per sandbox on this host (plugins/dummy/box-dummy-agent.h), so a
# port "in the sandbox" is a port on 127.0.0.1 here: an echo server that
# reports what it received.  A TLS client checks the chain against
# <data-dir>/tls/ca.pem and the host name; routing by Host, 404s, private
# and public ports, the box_token cookie flow exactly, key stripping,
# forwarded headers, keep-alive, streamed bodies, an upgrade relayed both
# ways, a sleeping sandbox woken, a service started by a request, and 502
# port_closed after the 10 s wait.

import hashlib
import os
import socket
import ssl
import sys
import tempfile
import threading
import time
import warnings

import boxtest
import edge_echo
from boxtest import Boxd, Tap
from edgetest import Edge, RssSampler, echo_back, hdr, stream_download, stream_upload

BOX_AGENT = os.environ.get('BOX_AGENT', '')
DOMAIN = boxtest.SANDBOX_DOMAIN
GIB = 1 << 30
# boxd's resident memory may grow by less than this while a 1 GiB body
# crosses the edge (doc/ARCHITECTURE.md, "The edge")
RSS_BOUND_KIB = 32 * 1024


serve = edge_echo.serve


def start_edge_boxd(t, what, extra_args=(), conf_text=''):
    """boxd with its edge on a free port, on the dummy hypervisor running the
    real agent ($BOX_AGENT) per sandbox (@conf_text: more of its config file):
    (boxd, edge port, a temp dir), or None when there is no agent (@what
    skipped)."""
    if not os.access(BOX_AGENT, os.X_OK):
        t.skip(what, 'needs BOX_AGENT')
        return None
    tmp = tempfile.mkdtemp(prefix='box-e2e-edge-')
    conf = os.path.join(tmp, 'boxd.conf')
    with open(conf, 'w') as f:
        f.write('[plugin.dummy]\nagent=%s\n%s' % (BOX_AGENT, conf_text))
    edge_port = boxtest.free_port()
    d = Boxd(t, extra_args=['--config', conf, '--edge-listen', '127.0.0.1:%d' % edge_port] +
             list(extra_args)).start()
    return d, edge_port, tmp


def test_edge(t):
    started = start_edge_boxd(t, 'the edge through the real agent')
    if started is None:
        return
    d, edge_port, tmp = started
    key = d.project_with_key('acme')
    other = d.project_with_key('other')
    web_port = boxtest.free_port()
    d.create_sandbox(key, {'name': 'web', 'http_port': web_port})
    d.create_sandbox(other, {'name': 'web'})
    srv = serve(web_port)
    host = 'web--acme.%s' % DOMAIN
    cafile = os.path.join(d.data_dir, 'tls', 'ca.pem')
    t.ok(os.path.exists(cafile), 'the CA is at <data-dir>/tls/ca.pem')
    t.eq(oct(os.stat(os.path.join(d.data_dir, 'tls', 'ca-key.pem')).st_mode & 0o777), '0o600',
         'the CA key is 0600')
    e = Edge(edge_port, cafile)

    with t.section('TLS'):
        raw = socket.create_connection(('127.0.0.1', edge_port))
        s = e.ctx.wrap_socket(raw, server_hostname=host)
        t.ok(s.version() in ('TLSv1.2', 'TLSv1.3'), 'TLS 1.2 or 1.3', s.version())
        t.eq(s.selected_alpn_protocol(), 'http/1.1', 'ALPN http/1.1')
        s.close()
        t.ok(e.handshake_fails(host, ssl.create_default_context()),
             'a client without the CA refuses the certificate')
        t.ok(e.handshake_fails('web--acme.elsewhere.test'), 'the certificate does not name another domain')
        old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        old.load_verify_locations(cafile)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', DeprecationWarning)
            old.minimum_version = ssl.TLSVersion.TLSv1
            old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.set_ciphers('DEFAULT:@SECLEVEL=0')
        t.ok(e.handshake_fails(host, old, (ssl.SSLError, OSError)), 'TLS 1.1 is refused')

    with t.section('routing and 404'):
        for bad in ('nope--acme.%s' % DOMAIN, 'web--nope.%s' % DOMAIN, 'acme.%s' % DOMAIN,
                    DOMAIN, '0--web--acme.%s' % DOMAIN, 'web--acme.elsewhere.test'):
            r = e.get(bad, headers={'Authorization': 'Bearer ' + key}, sni=host)
            t.eq((r[0], (r[2] or {}).get('error', {}).get('code')), (404, 'not_found'),
                 '404 not_found for %s' % bad)
        r = e.get(host, '/x?a=1', headers={'Authorization': 'Bearer ' + key})
        t.status(r, 200, 'the sandbox URL goes to its http_port')
        t.eq((r[2] or {}).get('path'), '/x?a=1', 'path and query arrive')
        r = e.get('%d--web--acme.%s' % (web_port, DOMAIN), '/p',
                  headers={'Authorization': 'Bearer ' + key})
        t.status(r, 200, 'the port URL goes to that port')

    with t.section('access'):
        r = e.get(host)
        t.eq((r[0], (r[2] or {}).get('error', {}).get('code')), (401, 'unauthorized'),
             'private without the key: 401 unauthorized')
        r = e.get(host, headers={'Authorization': 'Bearer ' + other})
        t.eq(r[0], 401, 'another project\'s key: 401')
        r = e.get(host, headers={'Authorization': 'Bearer ' + d.admin_token})
        t.eq(r[0], 401, 'the admin token is no project key: 401')
        r = e.get(host, headers={'Authorization': 'Bearer ' + key, 'Cookie': 'a=1',
                                 'X-Forwarded-For': '6.6.6.6'})
        t.status(r, 200, 'the key as Bearer')
        t.eq(hdr(r[2], 'Authorization'), [], 'the key\'s Authorization is stripped')
        t.eq(hdr(r[2], 'X-Forwarded-For'), ['127.0.0.1'], 'X-Forwarded-For is the client')
        t.eq(hdr(r[2], 'X-Forwarded-Proto'), ['https'], 'X-Forwarded-Proto https')
        t.eq(hdr(r[2], 'X-Forwarded-Host'), ['%s:%d' % (host, edge_port)], 'X-Forwarded-Host')
        t.eq(hdr(r[2], 'Cookie'), ['a=1'], 'other cookies go through')
        t.eq(hdr(r[2], 'Connection'), [], 'a GET reaches the sandbox without Connection (kept alive)')

        r = e.get(host, '/page?a=1&box_token=%s&b=2&a=3' % key)
        t.eq(r[0], 302, 'box_token: 302')
        t.eq(r[1].get('location'), 'https://%s:%d/page?a=1&b=2&a=3' % (host, edge_port),
             'to the same URL without box_token, other parameters in order')
        t.eq(r[1].get('set-cookie'),
             'box_token=%s; HttpOnly; Secure; SameSite=Lax; Path=/' % key, 'Set-Cookie exactly')
        r = e.get(host, '/page?box_token=%s' % key)
        t.eq(r[1].get('location'), 'https://%s:%d/page' % (host, edge_port),
             'no "?" left when box_token was the only parameter')
        r = e.get(host, '/page?box_token=%s' % other)
        t.eq(r[0], 401, 'another project\'s key as box_token: 401, no cookie')
        t.ok('set-cookie' not in r[1], 'and no Set-Cookie')

        r = e.get(host, '/c', headers={'Cookie': 'x=1; box_token=%s; y=2' % key})
        t.status(r, 200, 'the box_token cookie')
        t.eq(hdr(r[2], 'Cookie'), ['x=1; y=2'], 'the box_token cookie is stripped')
        r = e.get(host, '/c', headers={'Cookie': 'box_token=%s' % other})
        t.eq(r[0], 401, 'another project\'s key as cookie: 401')

        r = d.request('PUT', '/v1/sandboxes/web/ports/%d' % web_port, {'access': 'public'}, token=key)
        t.status(r, 200, 'PUT the http_port public')
        r = e.get(host, '/pub?box_token=wrong&z=1',
                  headers={'Authorization': 'Bearer app-token', 'Cookie': 'box_token=wrong'})
        t.status(r, 200, 'a public port needs no key')
        t.eq((r[2] or {}).get('path'), '/pub?z=1', 'box_token is stripped from the query')
        t.eq(hdr(r[2], 'Authorization'), ['Bearer app-token'],
             'an Authorization that is no project key goes through')
        t.eq(hdr(r[2], 'Cookie'), [], 'the box_token cookie is stripped')
        r = d.request('PUT', '/v1/sandboxes/web/ports/%d' % web_port, {'access': 'private'}, token=key)
        t.eq(e.get(host)[0], 401, 'private again: 401')

    auth = {'Authorization': 'Bearer ' + key}
    with t.section('bodies and keep-alive'):
        c = e.conn(host)
        r1 = e.get(host, '/one', headers=auth, conn=c)
        sock1 = c.sock
        r2 = e.get(host, '/two', headers=auth, conn=c)
        t.ok(r1[0] == 200 and r2[0] == 200 and c.sock is sock1,
             'two requests on one kept-alive connection', (r1[0], r2[0]))
        r3 = e.get(host, '/nope', conn=c)
        r4 = e.get(host, '/three', headers=auth, conn=c)
        t.ok(r3[0] == 401 and r4[0] == 200 and c.sock is sock1,
             'a refusal keeps the connection too', (r3[0], r4[0]))
        c.close()
        body = os.urandom(3 * 1024 * 1024 + 17)
        r = e.get(host, '/up', headers=auth, method='POST', body=body)
        t.eq(((r[2] or {}).get('length'), (r[2] or {}).get('sha256')),
             (len(body), hashlib.sha256(body).hexdigest()), 'a 3 MiB upload arrives whole')
        r = e.get(host, '/big/%d' % (16 * 1024 * 1024 + 5), headers=auth)
        t.eq((r[0], len(r[3])), (200, 16 * 1024 * 1024 + 5), 'a 16 MiB download arrives whole')
        r = e.get(host, '/chunked', headers=auth)
        t.eq((r[0], r[3]), (200, b'hello chunked world'), 'a chunked answer')
        c = e.conn(host)
        r1 = e.get(host, '/head', headers=auth, method='HEAD', conn=c)
        r2 = e.get(host, '/after-head', headers=auth, conn=c)
        t.eq((r1[0], r1[1].get('content-length'), r1[3], r2[0]), (200, '1000', b'', 200),
             'HEAD: the length without a body, and the connection goes on')
        c.close()

    with t.section('the stream to the port kept for the next request'):
        # the echo server names the TCP connection in the guest (here: from
        # the agent on this host) that each request came on
        def conn_of(path='/', method='GET', conn=None, body=None):
            r = e.get(host, path, headers=auth, method=method, conn=conn, body=body)
            return r[0], (r[2] or {}).get('conn'), r

        c = e.conn(host)
        s1, up1, _r = conn_of('/k1', conn=c)
        s2, up2, _r = conn_of('/k2', conn=c)
        t.ok(s1 == s2 == 200 and up1 is not None and up1 == up2,
             'two requests on one client connection share the stream to the port', (up1, up2))
        c.close()
        s3, up3, _r = conn_of('/k3')
        t.ok(s3 == 200 and up3 == up1, 'a new client connection takes the idle stream', (up1, up3))
        r = e.get(host, '/chunked', headers=auth)
        s4, up4, _r = conn_of('/k4')
        t.ok(r[3] == b'hello chunked world' and s4 == 200 and up4 == up1,
             'after a chunked answer (read to its last chunk) the stream is kept', (up1, up4))
        r = e.get(host, '/head', headers=auth, method='HEAD')
        s5, up5, _r = conn_of('/k5')
        t.ok(r[0] == 200 and r[3] == b'' and up5 == up1, 'and after a HEAD', (up1, up5))
        s6, up6, r = conn_of('/post', method='POST', body=b'abc')
        t.ok(s6 == 200 and up6 not in (None, up1) and hdr(r[2], 'Connection') == ['close'],
             'a request with a body goes on a stream of its own, with Connection: close',
             (up6, hdr(r[2], 'Connection')))
        s7, up7, r = conn_of('/close')
        t.ok(s7 == 200 and up7 == up1 and r[1].get('connection') is None,
             'the server says close: the client connection still goes on', r[1].get('connection'))
        s8, up8, _r = conn_of('/k8')
        t.ok(s8 == 200 and up8 not in (None, up1), 'and the next request gets a new stream',
             (up1, up8))
        s9, up9, _r = conn_of('/drop')
        time.sleep(0.5)
        s10, up10, _r = conn_of('/k10')
        t.ok(s9 == s10 == 200 and up9 in edge_echo.CLOSED and up10 not in (None, up9),
             'a server that closed a kept stream silently: the next request goes on a new one',
             (up9, up10))
        c = e.conn(host)
        s11, up11, r = conn_of('/nolength', conn=c)
        t.ok(s11 == 200 and r[1].get('connection') == 'close' and b'/nolength' in r[3],
             'an answer without a length ends with its connection', r[1].get('connection'))
        c.close()
        s12, up12, _r = conn_of('/k12')
        t.ok(s12 == 200 and up12 not in (None, up11), 'and its stream is not kept', (up11, up12))
        time.sleep(4)
        t.ok(up12 in edge_echo.CLOSED, 'an idle stream is closed after 2 to 3 s', up12)
        s13, up13, _r = conn_of('/k13')
        t.ok(s13 == 200 and up13 not in (None, up12), 'then a request gets a new one', (up12, up13))

    with t.section('no Nagle delay on the client connection'):
        # a head and a body over 4 KiB go in two writes: with Nagle the
        # second waits for the client's delayed ACK (~40 ms on Linux)
        c = e.conn(host)
        took = []
        for _ in range(30):
            start = time.time()
            r = e.get(host, '/big/10000', headers=auth, conn=c)
            took.append(time.time() - start)
        c.close()
        took.sort()
        t.ok(r[0] == 200 and len(r[3]) == 10000 and took[15] < 0.02,
             'answers in two writes come at once (median under 20 ms)', '%.1f ms' % (took[15] * 1000))

    with t.section('1 GiB each way, boxd memory bounded'):
        # bytes really cross the edge and the agent channel; the edge keeps
        # at most ~256 KiB a connection and the channel is flow-controlled,
        # so boxd's resident memory must not follow the body.  Under
        # AddressSanitizer RSS means nothing and bytes cost 2-3x: 64 MiB
        # there, the bound checked in the plain build.
        sanitized = d.sanitized()
        size = 64 << 20 if sanitized else GIB
        what = '64 MiB' if sanitized else '1 GiB'
        for name, fn in (('upload', lambda: stream_upload(e, host, auth, size)),
                         ('download', lambda: stream_download(e, host, auth, size))):
            rss = RssSampler(d.proc.pid)
            start = time.time()
            r = fn()
            base, peak = rss.stop()
            took = time.time() - start
            if name == 'upload':
                t.eq((r[0], (r[1] or {}).get('length'), (r[1] or {}).get('sha256')),
                     (200, size, r[2]), 'a %s upload arrives whole' % what)
            else:
                t.eq(r, (200, size), 'a %s download arrives whole' % what)
            t.comment('%s %s: %.1f s, boxd VmRSS %d -> peak %d KiB' % (what, name, took, base, peak))
            desc = 'boxd grew by less than %d MiB during the %s' % (RSS_BOUND_KIB // 1024, name)
            if sanitized:
                t.skip(desc, 'RSS means nothing under AddressSanitizer; checked in the plain build')
            else:
                t.ok(peak - base < RSS_BOUND_KIB, desc, (base, peak))

    with t.section('bad requests'):
        # (http.client sends an iterator chunked)
        r = e.get(host, '/up', headers=auth, method='POST', body=iter([b'abc', b'defg']))
        t.eq((r[0], (r[2] or {}).get('length')), (200, 7), 'a chunked upload is relayed')
        t.eq(r[1].get('connection'), 'close', 'and its connection ends after the answer')

        def raw_request(text):
            s = e.ctx.wrap_socket(socket.create_connection(('127.0.0.1', edge_port)),
                                  server_hostname=host)
            s.settimeout(10)
            s.sendall(text)
            got = b''
            while True:
                try:
                    data = s.recv(65536)
                except (ConnectionResetError, ssl.SSLError):
                    break
                if not data:
                    break
                got += data
            s.close()
            return got
        got = raw_request(('POST / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n'
                           'Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n'
                           % (host, key)).encode())
        t.ok(got.startswith(b'HTTP/1.1 400') and b'"invalid"' in got,
             'Transfer-Encoding with Content-Length: 400 invalid, then closed', got[:60])
        got = raw_request(('GET / HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\n\r\n'
                           % (host, 'a' * 70000)).encode())
        t.ok(got.startswith(b'HTTP/1.1 400') and b'too large' in got,
             'a head over 64 KiB: 400, then closed', got[:60])
        got = raw_request(b'GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n')
        t.ok(got.startswith(b'HTTP/1.1 400'), 'an absolute-form target: 400', got[:60])

    with t.section('upgrade'):
        s, head = e.upgrade(host, key)
        t.ok(head.startswith(b'HTTP/1.1 101'), '101 relayed', head[:40])
        for msg in (b'ping', b'x' * 100000):
            t.eq(echo_back(s, msg) == msg, True, 'bytes echoed through the upgrade (%d)' % len(msg))
        s.close()

    with t.section('wake'):
        r = d.request('POST', '/v1/sandboxes/web/pause', token=key)
        t.eq(d.request('GET', '/v1/sandboxes/web', token=key)[2].get('state'), 'paused', 'paused')
        r = e.get(host, '/w', headers=auth)
        t.status(r, 200, 'a request to a paused sandbox')
        t.eq(d.request('GET', '/v1/sandboxes/web', token=key)[2].get('state'), 'running',
             'woke it')

    with t.section('port_closed'):
        closed = boxtest.free_port()
        start = time.time()
        r = e.get('%d--web--acme.%s' % (closed, DOMAIN), headers=auth)
        took = time.time() - start
        t.eq((r[0], (r[2] or {}).get('error', {}).get('code')), (502, 'port_closed'),
             'nothing listening: 502 port_closed')
        t.ok(9.5 <= took < 15, 'after waiting about 10 s', took)
        late = boxtest.free_port()
        timer = threading.Timer(2.0, lambda: serve(late))
        timer.start()
        start = time.time()
        r = e.get('%d--web--acme.%s' % (late, DOMAIN), '/late', headers=auth)
        t.ok(r[0] == 200 and 1.5 < time.time() - start < 9,
             'a listener that comes within the wait answers', (r[0], time.time() - start))

    if os.geteuid() == 0:
        with t.section('service started by a request'):
            sdir = os.path.join(tmp, 'services')
            args = '--fd {fd} --services-dir %s --service-grace-ms 1000' % sdir
            d.create_sandbox(key, {'name': 'svc', 'env': {'BOX_DUMMY_AGENT_ARGS': args}})
            sport = boxtest.free_port()
            r = d.request('PUT', '/v1/sandboxes/svc/services/site',
                          {'cmd': [sys.executable, '-m', 'http.server', '--bind', '127.0.0.1',
                                   str(sport)], 'user': 'root', 'http_port': sport}, token=key)
            t.status(r, 200, 'PUT a service with http_port')
            r = d.request('POST', '/v1/sandboxes/svc/services/site/stop', token=key)
            t.eq((r[2] or {}).get('state'), 'stopped', 'stopped')
            r = e.get('%d--svc--acme.%s' % (sport, DOMAIN), '/', headers=auth)
            t.status(r, 200, 'a request to its port starts it and gets its answer')
            r = d.request('GET', '/v1/sandboxes/svc/services/site', token=key)
            t.eq((r[2] or {}).get('state'), 'running', 'the service runs')
            d.request('DELETE', '/v1/sandboxes/svc/services/site', token=key)
    else:
        t.skip('service started by a request', 'needs root')

    srv.shutdown()
    d.stop()


if __name__ == '__main__':
    tap = Tap()
    boxtest.main(tap, test_edge)
