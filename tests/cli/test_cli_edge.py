#!/usr/bin/env python3
# cli-edge: `box url`, `box open`, `box port-access` and `box ports --access`
# against the real boxd with its edge, on the dummy hypervisor whose agent is
# the real guest agent on this host (as tests/e2e/test_edge.py): the URLs
# printed, the key printed only with --token, the browser ($BROWSER, a
# script here) handed the ?box_token= URL of a private port and the plain
# one of a public port, that URL followed through the edge (302 and the
# cookie), access set through the CLI as the API and the edge see it, and
# bad arguments refused with exit 2 and nothing changed.  The edge listens
# on a port other than 443 here, so every URL printed carries it (from GET
# /v1/edge), and `box url --all` adds the project's own domains' URLs.

import json
import os
import stat

from clitest import Client, box, check
import boxtest
from boxtest import Boxd, Tap
from test_edge import Edge, serve, start_edge_boxd

DOMAIN = boxtest.SANDBOX_DOMAIN


def settings(d, key):
    r = d.request('GET', '/v1/sandboxes/web/ports/settings', token=key)
    return sorted((p['port'], p['access']) for p in (r[2] or {}).get('ports', []))


def make_browser(tmp):
    """A "browser" that writes its arguments, one a line, to a file."""
    script = os.path.join(tmp, 'browser')
    record = os.path.join(tmp, 'opened')
    with open(script, 'w') as f:
        f.write('#!/bin/sh\nprintf "%%s\\n" "$@" > %s.tmp && mv %s.tmp %s\n' % (record, record, record))
    os.chmod(script, stat.S_IRWXU)
    return script, record


def opened(record, timeout=10):
    """What the browser script got (it runs without box waiting for it)."""
    import time
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(record):
            with open(record) as f:
                data = f.read().splitlines()
            os.unlink(record)
            return data
        time.sleep(0.05)
    return None


def test_cli_edge(t):
    started = start_edge_boxd(t, 'box url/open/port-access through the edge')
    if started is None:
        return
    d, edge_port, tmp = started
    key = d.project_with_key('acme', domains=['acme.test', 'www.acme.example'])
    c = Client(d, key)
    web_port = boxtest.free_port()
    pub_port = boxtest.free_port()
    idle_port = boxtest.free_port()
    d.create_sandbox(key, {'name': 'web', 'http_port': web_port})
    srv = serve(web_port)
    srv2 = serve(pub_port)
    host = 'web--acme.%s' % DOMAIN
    pub_host = '%d--web--acme.%s' % (pub_port, DOMAIN)
    e = Edge(edge_port, os.path.join(d.data_dir, 'tls', 'ca.pem'))
    # what a user opens: the host and the edge's port
    at = ':%d' % edge_port

    with t.section('GET /v1/edge'):
        r = d.request('GET', '/v1/edge', token=key)
        t.eq((r[0], r[2]), (200, {'sandbox_domain': DOMAIN, 'port': edge_port}),
             'GET /v1/edge: the sandbox domain and the edge\'s port')
        r = d.request('GET', '/v1/edge')
        t.status(r, 401, 'GET /v1/edge without a key')

    with t.section('box url'):
        check(t, c('url', 'web'), 0, 'url: the sandbox\'s URL with the edge\'s port',
              out='https://%s%s\n' % (host, at))
        check(t, c('url', 'web', str(pub_port)), 0, 'url PORT: the port\'s URL',
              out='https://%s%s\n' % (pub_host, at))
        check(t, c('url', 'web', '--token'), 0, 'url --token: a private URL with the key',
              out='https://%s%s/?box_token=%s\n' % (host, at, key))
        r = c('url', 'web')
        t.ok(key not in r.out + r.err, 'without --token the key is not printed', r.describe())
        r = e.get(host, '/', headers={'Authorization': 'Bearer ' + key})
        t.status(r, 200, 'the URL printed answers (with the key)')

    with t.section('box url --all: own domains'):
        check(t, c('url', 'web', '--all'), 0, 'url --all: the sandbox domain\'s, then each own domain\'s',
              out='https://%s%s\nhttps://web.acme.test%s\nhttps://web.www.acme.example%s\n'
              % (host, at, at, at))
        check(t, c('url', 'web', str(pub_port), '--all'), 0, 'url PORT --all',
              out='https://%s%s\nhttps://%d--web.acme.test%s\nhttps://%d--web.www.acme.example%s\n'
              % (pub_host, at, pub_port, at, pub_port, at))
        check(t, c('url', 'web', '--all', '--token'), 0, 'url --all --token: the key on each',
              out=''.join('https://%s%s/?box_token=%s\n' % (h, at, key)
                          for h in (host, 'web.acme.test', 'web.www.acme.example')))
        r = e.get('web.acme.test', '/', headers={'Authorization': 'Bearer ' + key}, sni=host)
        t.status(r, 200, 'the own domain\'s URL printed answers (with the key)')
        d.admin('PATCH', '/v1/projects/acme', {'domains': []})
        check(t, c('url', 'web', '--all'), 0, 'url --all without own domains: one line',
              out='https://%s%s\n' % (host, at))

    with t.section('box port-access'):
        check(t, c('port-access', 'web', str(pub_port), 'public'), 0, 'port-access public',
              out='%d public https://%s%s\n' % (pub_port, pub_host, at))
        check(t, c('port-access', 'web', str(idle_port), 'public'), 0,
              'port-access of a port nothing listens on')
        t.eq(settings(d, key), sorted([(pub_port, 'public'), (idle_port, 'public')]),
             'the API has both public')
        r = e.get(pub_host)
        t.status(r, 200, 'the edge serves the public port without a key')
        check(t, c('url', 'web', str(pub_port), '--token'), 0,
              'url --token of a public port: no key in it', out='https://%s%s\n' % (pub_host, at))
        check(t, c('port-access', 'web', str(idle_port), 'private', '--json'), 0,
              'port-access private --json')
        r = c('port-access', 'web', str(idle_port), 'private', '--json')
        t.eq({k: v for k, v in json.loads(r.out or '{}').items() if k != 'url'},
             {'port': idle_port, 'access': 'private'}, '--json prints {port, access, url}')
        t.eq(dict(settings(d, key)).get(idle_port, 'private'), 'private', 'set back to private')

    with t.section('box ports --access'):
        r = c('ports', 'web', '--access')
        check(t, r, 0, 'ports --access')
        lines = r.out.splitlines()
        t.eq(lines[0].split(), ['PORT', 'ADDRESS', 'PID', 'SESSION', 'ACCESS'], 'the header')
        rows = {ln.split()[0]: ln.split() for ln in lines[1:]}
        t.eq(rows.get(str(web_port), [''])[-1], 'private', 'a listener never set is private')
        t.eq(rows.get(str(pub_port), [''])[-1], 'public', 'the public listener')
        r = c('ports', 'web', '--access', '--json')
        check(t, r, 0, 'ports --access --json')
        try:
            ports = {p['port']: p for p in json.loads(r.out)['ports']}
            t.eq((ports[web_port]['access'], ports[pub_port]['access'],
                  ports[pub_port].get('address')), ('private', 'public', '127.0.0.1'),
                 '--json: each listener with its access')
        except (ValueError, KeyError) as err:
            t.ok(False, 'ports --access --json: {ports: [...]} with both', '%r %s' % (err, r.out))
        r = c('ports', 'web', '--json')
        t.ok('"access"' not in r.out, 'ports --json without --access is the API\'s answer')

    with t.section('box open'):
        browser, record = make_browser(tmp)
        r = c('open', 'web', extra_env={'BROWSER': browser})
        check(t, r, 0, 'open of a private URL', out='Opened https://%s%s\n' % (host, at))
        t.ok(key not in r.out + r.err, 'open does not print the key', r.describe())
        got = opened(record)
        t.eq(got, ['https://%s%s/?box_token=%s' % (host, at, key)],
             'the browser got the URL with ?box_token=')
        path = (got or ['https://x/'])[0].split(host + at, 1)[-1]
        r = e.get(host, path)
        t.eq((r[0], r[1].get('location'), r[1].get('set-cookie')),
             (302, 'https://%s:%d/' % (host, edge_port),
              'box_token=%s; HttpOnly; Secure; SameSite=Lax; Path=/' % key),
             'the edge turns that URL into the cookie and a 302 without the key')
        r = e.get(host, '/', headers={'Cookie': r[1].get('set-cookie', '').split(';')[0]})
        t.status(r, 200, 'the cookie opens the page')
        r = c('open', 'web', str(pub_port), extra_env={'BROWSER': browser + ' --new-tab=%s'})
        check(t, r, 0, 'open of a public port (BROWSER with %s)',
              out='Opened https://%s%s\n' % (pub_host, at))
        t.eq(opened(record), ['--new-tab=https://%s%s' % (pub_host, at)],
             'the browser got the plain URL, in place of %s')
        r = c('open', 'web', extra_env={'BROWSER': '/nonexistent/browser:' + browser})
        check(t, r, 0, 'BROWSER: the first that starts wins')
        t.eq(opened(record), ['https://%s%s/?box_token=%s' % (host, at, key)], '... the second one')
        r = c('open', 'web', extra_env={'BROWSER': '', 'PATH': '/nonexistent'})
        check(t, r, 0, 'open without a browser prints the URL', out='https://%s%s\n' % (host, at))
        t.ok('box url --token' in r.err and key not in r.out + r.err,
             '... without the key, saying how to get it', r.describe())

    with t.section('bad arguments'):
        before = settings(d, key)
        for args, what in ((['url'], 'url without a sandbox'),
                           (['url', 'web', '0'], 'url with port 0'),
                           (['url', 'web', 'http'], 'url with a port that is no number'),
                           (['url', 'web', '1', '2'], 'url with two ports'),
                           (['open', 'web', '65536'], 'open with port 65536'),
                           (['port-access', 'web', '80'], 'port-access without the access'),
                           (['port-access', 'web', '80', 'open'], 'port-access open'),
                           (['port-access', 'web', '0', 'public'], 'port-access of port 0'),
                           (['port-access', 'web', '-1', 'public'], 'port-access of port -1')):
            r = c(*args)
            check(t, r, 2, '%s: usage, exit 2' % what, out='')
            t.ok(r.err.startswith('box: '), '... with a message', r.describe())
        t.eq(settings(d, key), before, 'nothing changed')
        check(t, c('url', 'ghost'), 1, 'url of an unknown sandbox: exit 1',
              err_contains='(not_found)')
        check(t, c('open', 'ghost', extra_env={'BROWSER': browser}), 1,
              'open of an unknown sandbox: exit 1', err_contains='(not_found)')
        t.eq(opened(record, timeout=1), None, '... opens nothing')
        check(t, c('port-access', 'ghost', '80', 'public'), 1,
              'port-access of an unknown sandbox: exit 1', err_contains='(not_found)')
        r = box(['url', 'web'], url=c.url, key='box_' + 'a' * 32)
        check(t, r, 3, 'url with a refused key: exit 3')

    srv.shutdown()
    srv2.shutdown()
    d.stop()


if __name__ == '__main__':
    tap = Tap()
    boxtest.main(tap, test_cli_edge)
