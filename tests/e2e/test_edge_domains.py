#!/usr/bin/env python3
# e2e: own domains on the edge (issue 15 item 4, routing): a project's
# domain D makes its sandbox N also https://N.D (its http_port) and
# https://<port>--N.D.  boxd with its own CA on the dummy hypervisor running
# the real agent (as tests/e2e/test_edge.py); the own domains' certificate
# is put in <data-dir>/tls/domains/ signed by boxd's CA with openssl, so
# the TLS client checks the chain and the host name for the own hosts too.
# Routing, private and public, the cookie per host and the 302 exactly, key
# stripping, stats counting, every 404, the longest domain winning, domains
# set, removed and deleted with their project, the map after a restart, and
# a stored domain that is the sandbox domain left out at start.

import http.cookiejar
import os
import signal
import subprocess
import time
import urllib.request

import boxtest
import edge_echo
from boxtest import Tap
from edgetest import Edge, check_private, hdr
from test_edge import start_edge_boxd

DOMAIN = boxtest.SANDBOX_DOMAIN
APPS = 'apps.example.test'
DEEP = 'deep.' + APPS
GONE = 'gone.example.test'
FREE = 'free.example.test'


class Tagged(edge_echo.Echo):
    """The echo server with the port it listens on in its answers."""

    def reply(self, obj, status=200):
        obj['port'] = self.server.server_address[1]
        super().reply(obj, status)


def serve(port):
    srv = edge_echo.Server(('127.0.0.1', port), Tagged)
    edge_echo.threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def issue_leaf(data_dir, names):
    """A leaf for @names from boxd's CA, as example.test's pair in
    <data-dir>/tls/domains/ (it serves every name under example.test)."""
    tls = os.path.join(data_dir, 'tls')
    out = os.path.join(tls, 'domains', 'example.test')
    tmp = os.path.join(tls, 'leaf')

    def openssl(*args):
        subprocess.run(['openssl'] + list(args), check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    with open(tmp + '.ext', 'w') as f:
        f.write('subjectAltName=%s\n' % ','.join('DNS:' + n for n in names))
    openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
            '-keyout', tmp + '-key.pem', '-out', tmp + '.csr', '-subj', '/CN=example.test')
    openssl('x509', '-req', '-in', tmp + '.csr', '-CA', os.path.join(tls, 'ca.pem'), '-CAkey',
            os.path.join(tls, 'ca-key.pem'), '-set_serial', '4242', '-out', tmp + '.pem',
            '-days', '2', '-extfile', tmp + '.ext')
    os.rename(tmp + '-key.pem', out + '-key.pem')
    os.rename(tmp + '.pem', out + '.pem')


def wait_verified(e, host):
    """Whether a handshake naming @host verifies within 10 s (boxd's edge
    may not listen yet, its certificates may not be reloaded yet)."""
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            if not e.handshake_fails(host):
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def code(r):
    return (r[0], (r[2] or {}).get('error', {}).get('code'))


def stats_total(d, key, name):
    r = d.request('GET', '/v1/sandboxes/%s/stats?days=1' % name, token=key)
    return (r[2] or {}).get('total', {})


def test_edge_domains(t):
    started = start_edge_boxd(t, 'own domains on the edge')
    if started is None:
        return
    d, edge_port, tmp = started
    key = d.project_with_key('acme', domains=[APPS, GONE])
    deep = d.project_with_key('deep', domains=[DEEP])
    other = d.project_with_key('other')
    web_port, alt_port, deep_port = (boxtest.free_port() for _ in range(3))
    servers = [serve(p) for p in (web_port, alt_port, deep_port)]
    d.create_sandbox(key, {'name': 'web', 'http_port': web_port})
    d.create_sandbox(deep, {'name': 'web', 'http_port': deep_port})
    d.create_sandbox(other, {'name': 'solo', 'http_port': web_port})

    issue_leaf(d.data_dir, ['example.test', '*.example.test', '*.' + APPS, '*.' + DEEP,
                            '*.' + GONE, '*.' + FREE])
    d.proc.send_signal(signal.SIGHUP)
    e = Edge(edge_port, os.path.join(d.data_dir, 'tls', 'ca.pem'))
    host = 'web.' + APPS
    t.ok(wait_verified(e, host), 'the own domain\'s certificate verifies against the CA')
    auth = {'Authorization': 'Bearer ' + key}
    port_host = '%d--web.%s' % (alt_port, APPS)

    with t.section('records'):
        r = d.request('GET', '/v1/sandboxes/web', token=key)
        t.eq((r[2] or {}).get('urls'), ['https://web.' + APPS, 'https://web.' + GONE],
             'urls: one per own domain')
        for url in (r[2] or {}).get('urls', []):
            got = e.get(url[len('https://'):], '/u', headers=auth)
            t.eq((got[0], (got[2] or {}).get('port')), (200, web_port),
                 '%s goes to the http_port' % url)
        r = d.request('PUT', '/v1/sandboxes/web/ports/%d' % alt_port, {'access': 'private'},
                      token=key)
        url = (r[2] or {}).get('url', '')
        t.eq(url, 'https://%d--web--acme.%s' % (alt_port, DOMAIN), 'the port setting\'s url')
        got = e.get(url[len('https://'):], headers=auth)
        t.eq((got[0], (got[2] or {}).get('port')), (200, alt_port), 'and it answers')

    with t.section('routing'):
        r = e.get(host, '/x?a=1', headers=auth)
        t.eq((r[0], (r[2] or {}).get('port')), (200, web_port), 'N.D goes to the http_port')
        t.eq((r[2] or {}).get('path'), '/x?a=1', 'path and query arrive')
        t.eq(hdr(r[2], 'X-Forwarded-Host'), ['%s:%d' % (host, edge_port)], 'X-Forwarded-Host')
        r = e.get(port_host, '/p', headers=auth)
        t.eq((r[0], (r[2] or {}).get('port')), (200, alt_port), '<port>--N.D goes to that port')
        r = e.get('WEB.Apps.Example.TEST.', headers=auth, sni=host)
        t.eq((r[0], (r[2] or {}).get('port')), (200, web_port),
             'hosts compared case-insensitively, a trailing dot allowed')
        r = e.get('web.' + DEEP, headers={'Authorization': 'Bearer ' + deep})
        t.eq((r[0], (r[2] or {}).get('port')), (200, deep_port),
             'nested domains: the longest wins (web of deep)')
        t.eq(code(e.get('web.' + DEEP, headers=auth)), (401, 'unauthorized'),
             'and acme\'s key does not open it')

    with t.section('access'):
        r = check_private(t, e, host, key, other, edge_port)
        r2 = e.get(port_host, '/?box_token=%s' % key)
        t.eq((r2[0], r2[1].get('location')), (302, 'https://%s:%d/' % (port_host, edge_port)),
             'the port URL gets its own 302 to itself')

        jar = http.cookiejar.CookieJar()
        req = urllib.request.Request(r[1]['location'])
        jar.extract_cookies(_Resp(r[1]), req)
        sent = {}
        for h in (host, port_host, 'web--acme.' + DOMAIN, 'web.' + GONE):
            q = urllib.request.Request('https://%s:%d/' % (h, edge_port))
            jar.add_cookie_header(q)
            sent[h] = q.get_header('Cookie')
        t.eq(sent, {host: 'box_token=' + key, port_host: None, 'web--acme.' + DOMAIN: None,
                    'web.' + GONE: None}, 'a browser sends the cookie back to that host only')

        r = e.get(host, '/c', headers={'Cookie': 'x=1; box_token=%s; y=2' % key})
        t.status(r, 200, 'the box_token cookie opens N.D')
        t.eq(hdr(r[2], 'Cookie'), ['x=1; y=2'], 'and is stripped')
        t.eq(e.get(host, headers={'Cookie': 'box_token=' + other})[0], 401,
             'another project\'s key as cookie: 401')

        before = stats_total(d, key, 'web')
        e.get(host)
        e.get(host, headers=auth)
        e.get(host, '/?box_token=' + key)
        after = stats_total(d, key, 'web')
        t.eq([after.get(k, 0) - before.get(k, 0) for k in
              ('requests', 'status_2xx', 'status_3xx', 'status_4xx', 'key_requests')],
             [3, 1, 1, 1, 2], 'requests on N.D are counted in the sandbox\'s stats')

        r = d.request('PUT', '/v1/sandboxes/web/ports/%d' % web_port, {'access': 'public'},
                      token=key)
        t.status(r, 200, 'PUT the http_port public')
        r = e.get(host, '/pub?box_token=wrong&z=1',
                  headers={'Authorization': 'Bearer app-token', 'Cookie': 'box_token=wrong'})
        t.status(r, 200, 'public: N.D needs no key')
        t.eq((r[2] or {}).get('path'), '/pub?z=1', 'box_token is stripped from the query')
        t.eq(hdr(r[2], 'Authorization'), ['Bearer app-token'], 'another Authorization goes through')
        t.eq(hdr(r[2], 'Cookie'), [], 'the box_token cookie is stripped')
        t.eq(e.get(port_host)[0], 401, 'another port of it stays private')
        d.request('PUT', '/v1/sandboxes/web/ports/%d' % web_port, {'access': 'private'}, token=key)
        t.eq(e.get(host)[0], 401, 'private again: 401')

    def not_found(h, desc, headers=None):
        t.eq(code(e.get(h, headers=headers or auth, sni=host)), (404, 'not_found'), desc)

    with t.section('404'):
        not_found('nope.' + APPS, 'a name that is no sandbox of the project')
        not_found('solo.' + APPS, 'another project\'s sandbox under this domain')
        not_found(APPS, 'the domain itself')
        not_found('%s:%d' % (APPS, edge_port), 'the domain itself with :port')
        for bad in ('we_b.', '-web.', 'web--acme.', '0--web.', '080--web.', '65536--web.',
                    '1--2--web.', 'a.b.'):
            not_found(bad + APPS, 'a bad or deeper name: %s' % (bad + APPS))
        not_found('web.' + APPS + ':x', 'a bad :port')
        not_found('web.unknown.test', 'a domain of no project')
        t.ok('error' in (e.get('nope.' + APPS, headers=auth, sni=host)[2] or {}),
             'the usual error shape')

    with t.section('domains changed'):
        t.status(e.get('web.' + GONE, headers=auth), 200, 'web.%s answers' % GONE)
        r = d.admin('PATCH', '/v1/projects/acme', {'domains': [APPS, FREE]})
        t.status(r, 200, 'PATCH the domains: %s out, %s in' % (GONE, FREE))
        not_found('web.' + GONE, 'a removed domain: 404 at once')
        t.status(e.get('web.' + FREE, headers=auth), 200, 'an added domain answers at once')
        r = d.admin('PATCH', '/v1/projects/acme', {'domains': [APPS, DOMAIN]})
        t.eq(code(r), (400, 'invalid'), 'the sandbox domain as an own domain: 400 invalid')
        t.eq(d.admin('GET', '/v1/projects/acme')[2].get('domains'), [APPS, FREE],
             'and the domains are unchanged')
        t.status(e.get('web.' + FREE, headers=auth), 200, 'and still routed')
        r = d.admin('PATCH', '/v1/projects/other', {'domains': [GONE]})
        r = e.get('solo.' + GONE, headers={'Authorization': 'Bearer ' + other})
        t.eq((r[0], (r[2] or {}).get('port')), (200, web_port),
             'a domain passed to another project routes to its sandboxes')

    with t.section('restart'):
        d.stop()
        d.start()
        t.ok(wait_verified(e, host), 'the edge is back')
        t.status(e.get(host, headers=auth), 200, 'after a restart N.D answers')
        t.status(e.get('web.' + FREE, headers=auth), 200, 'the domain set before it too')
        t.status(e.get('solo.' + GONE, headers={'Authorization': 'Bearer ' + other}), 200,
                 'and the moved one')
        not_found('web.' + GONE, 'a removed domain stays 404', auth)
        t.status(e.get('web.' + DEEP, headers={'Authorization': 'Bearer ' + deep}), 200,
                 'the nested domain too')

    with t.section('a stored domain that is the sandbox domain'):
        # boxd restarted with the sandbox domain set to acme's own domain
        # FREE (as a domain stored before the 400 check would be)
        d.stop()
        d.extra_args += ['--sandbox-domain', FREE]
        d.start()
        t.ok(wait_verified(e, host), 'boxd starts with it')
        t.ok('project acme: its domain %s is the sandbox domain: left out of the own domains'
             % FREE in d.log_text(), 'it is logged at start')
        not_found('web.' + FREE, 'its N.<domain> host is 404', auth)
        r = d.request('GET', '/v1/sandboxes/web', token=key)
        t.eq((r[2] or {}).get('urls'), ['https://web.' + APPS],
             'the record\'s urls leave it out too')
        r = e.get('web--acme.' + FREE, headers=auth)
        t.eq((r[0], (r[2] or {}).get('port')), (200, web_port),
             'the sandbox domain\'s URL under it goes to the http_port')
        t.status(e.get(host, headers=auth), 200, 'the project\'s other domain still answers')
        d.stop()
        del d.extra_args[-2:]
        d.start()
        t.ok(wait_verified(e, host), 'boxd back with its own sandbox domain')
        t.status(e.get('web.' + FREE, headers=auth), 200, 'and %s is an own domain again' % FREE)

    with t.section('project deleted'):
        r = d.admin('DELETE', '/v1/projects/deep')
        t.eq(r[0], 204, 'DELETE the project deep')
        not_found('web.' + DEEP, 'its domain is 404 (a deeper name under acme\'s)')
        t.status(e.get(host, headers=auth), 200, 'the enclosing domain still answers')

    for srv in servers:
        srv.shutdown()
    d.stop()


class _Resp:
    """The headers of an edge answer as http.cookiejar reads them."""

    def __init__(self, headers):
        self.headers = headers

    def info(self):
        return self

    def get_all(self, name, default=None):
        v = self.headers.get(name.lower())
        return [v] if v is not None else default


if __name__ == '__main__':
    tap = Tap()
    boxtest.main(tap, test_edge_domains)
