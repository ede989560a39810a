#!/usr/bin/env python3
# e2e: usage stats of the sandboxes' URLs (issue 15 item 5), counted by the
# edge and read with GET /v1/sandboxes/{sandbox}/stats.  The same set-up
# as test_edge.py (dummy hypervisor, the real agent, an echo server "in
# the sandbox" on 127.0.0.1).  Every count class, visitors, the flush on
# read and the timed flush (BOX_STATS_FLUSH_MS; a kill -9 shows what was
# written), no write per request, no wake, days validation, 404s, and the
# rows deleted with the sandbox.

import datetime
import json
import os
import socket
import sqlite3
import sys
import tempfile
import time

import boxtest
from boxtest import Boxd, Tap

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                'cli'))
import clitest  # noqa: E402
from test_edge import Edge, serve

BOX_AGENT = os.environ.get('BOX_AGENT', '')
DOMAIN = boxtest.SANDBOX_DOMAIN
FIELDS = ('requests', 'status_2xx', 'status_3xx', 'status_4xx', 'status_5xx', 'websockets',
          'bytes_sent', 'key_requests')


def start_boxd(t, tmp, flush_ms, data_dir=None):
    conf = os.path.join(tmp, 'boxd.conf')
    with open(conf, 'w') as f:
        f.write('[plugin.dummy]\nagent=%s\n' % BOX_AGENT)
    edge_port = boxtest.free_port()
    d = Boxd(t, data_dir=data_dir,
             extra_args=['--config', conf, '--edge-listen', '127.0.0.1:%d' % edge_port],
             env={'BOX_STATS_FLUSH_MS': str(flush_ms)}).start()
    return d, edge_port


def stats(d, key, sandbox, query=''):
    return d.request('GET', '/v1/sandboxes/%s/stats%s' % (sandbox, query), token=key)


def today():
    return datetime.datetime.now(datetime.timezone.utc).date()


def stored_rows(d, scope):
    """The stats rows of @scope in the store (sqlite), as (name, body)."""
    rows = []
    for path in boxtest.sqlite_files(d.data_dir):
        db = sqlite3.connect(path, timeout=10)
        try:
            rows += db.execute("SELECT name, body FROM records WHERE kind = 'stats' AND scope = ?",
                               (scope,)).fetchall()
        except sqlite3.Error:
            pass
        db.close()
    return rows


def websocket(e, edge_port, host, key, ua):
    raw = socket.create_connection(('127.0.0.1', edge_port))
    s = e.ctx.wrap_socket(raw, server_hostname=host)
    s.sendall(('GET /ws HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nUser-Agent: %s\r\n'
               'Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n' % (host, key, ua)).encode())
    s.settimeout(10)
    head = b''
    while b'\r\n\r\n' not in head:
        head += s.recv(1)
    s.sendall(b'x' * 5000)
    got = b''
    while len(got) < 5000:
        got += s.recv(65536)
    s.close()
    return head


def test_counts(t):
    tmp = tempfile.mkdtemp(prefix='box-e2e-stats-')
    # a flush interval longer than the test: only a stats call writes
    d, edge_port = start_boxd(t, tmp, 600000)
    key = d.project_with_key('acme')
    other = d.project_with_key('other')
    web_port = boxtest.free_port()
    sid = d.create_sandbox(key, {'name': 'web', 'http_port': web_port})['id']
    d.create_sandbox(other, {'name': 'web'})
    srv = serve(web_port)
    host = 'web--acme.%s' % DOMAIN
    e = Edge(edge_port, os.path.join(d.data_dir, 'tls', 'ca.pem'))
    want = dict.fromkeys(FIELDS, 0)
    sent = [0]

    def req(path='/', headers=None, ua='ua-1', h=host, **kw):
        headers = dict(headers or {})
        headers['User-Agent'] = ua
        r = e.get(h, path, headers=headers, **kw)
        sent[0] += len(r[3])
        return r

    bearer = {'Authorization': 'Bearer ' + key}
    with t.section('requests of each class'):
        r = stats(d, key, 'web')
        t.status(r, 200, 'stats of a sandbox with no traffic')
        t.eq(r[2]['total'], want, 'all zeros')
        t.eq(req('/a', bearer)[0], 200, '200 with the key')
        t.eq(req('/b?box_token=%s' % key)[0], 302, '302 of the token flow')
        t.eq(req('/c', ua='ua-2')[0], 401, '401 without the key')
        t.eq(req('/big/1000', {'Cookie': 'box_token=' + key})[0], 200, '200 with the cookie')
        closed = boxtest.free_port()
        r = req('/', bearer, h='%d--web--acme.%s' % (closed, DOMAIN))
        t.eq(r[0], 502, '502 port_closed (after the wait)')
        head = websocket(e, edge_port, host, key, 'ua-3')
        t.ok(head.startswith(b'HTTP/1.1 101'), 'a WebSocket', head[:20])
        r = d.request('PUT', '/v1/sandboxes/web/ports/%d' % web_port, {'access': 'public'},
                      token=key)
        t.eq(req('/pub', ua='ua-2')[0], 200, 'public, without the key')
        t.eq(req('/pub', bearer, ua='ua-2')[0], 200, 'public, with the key')
        t.eq(e.get('nope--acme.%s' % DOMAIN, '/', headers=bearer, sni=host)[0], 404,
             'a host of no sandbox (counted for none)')
        want.update(requests=8, status_2xx=4, status_3xx=1, status_4xx=1, status_5xx=1,
                    websockets=1, key_requests=6)

    with t.section('the stats call'):
        r = stats(d, key, 'web')
        t.status(r, 200, 'GET stats')
        body = r[2] or {}
        t.eq(sorted(body), ['days', 'name', 'sandbox', 'total', 'visitor_days'], 'the fields')
        t.eq((body.get('sandbox'), body.get('name')), (sid, 'web'), 'sandbox and name')
        days = body.get('days', [])
        t.eq(len(days), 7, 'seven days by default')
        t.eq([x['day'] for x in days],
             [(today() - datetime.timedelta(days=i)).isoformat() for i in range(6, -1, -1)],
             'consecutive UTC days, today last')
        t.eq(days[-1]['requests'], 8, 'every request counted, refusals and the upgrade too')
        for f in FIELDS:
            if f != 'bytes_sent':
                t.eq(days[-1][f], want[f], 'today: ' + f)
        t.eq(days[-1]['bytes_sent'], sent[0],
             'bytes_sent: the response body bytes the client got, without the WebSocket\'s')
        t.eq(days[-1]['visitors'], 3, 'visitors: three address+User-Agent pairs')
        t.eq([x['requests'] for x in days[:-1]], [0] * 6, 'zeros on quiet days')
        t.eq(sorted(body['total']), sorted(FIELDS), 'total: the day fields but day and visitors')
        t.eq({f: body['total'][f] for f in FIELDS}, {f: days[-1][f] for f in FIELDS},
             'total sums the days')
        t.eq(body.get('visitor_days'), 3, 'visitor_days')
        t.ok(stored_rows(d, sid) != [], 'the stats call wrote the waiting counts')

    with t.section('visitors and bytes'):
        before = stats(d, key, 'web')[2]['days'][-1]
        n0 = sent[0]
        req('/again', ua='ua-1')
        req('/again', ua='ua-4')
        req('/big/777', ua='ua-4')
        # a response is counted when the edge's last write of it completes,
        # which may come just after the client read it: ask again briefly
        deadline = time.time() + 5
        after = stats(d, key, 'web')[2]['days'][-1]
        while after['bytes_sent'] - before['bytes_sent'] != sent[0] - n0 and time.time() < deadline:
            time.sleep(0.1)
            after = stats(d, key, 'web')[2]['days'][-1]
        t.eq(after['visitors'] - before['visitors'], 1,
             'the same address+UA again is no new visitor, another UA is')
        t.eq(after['bytes_sent'] - before['bytes_sent'], sent[0] - n0,
             'bytes_sent grows by the body bytes the client got')
        t.eq(after['requests'] - before['requests'], 3, 'three more requests')

    with t.section('box stats'):
        cli = clitest.Client(d, key)
        r = cli('stats', 'web')
        t.ok(r.rc == 0, 'box stats exits 0', r.describe())
        lines = r.out.splitlines()
        t.ok(lines and lines[0].split()[:2] == ['DAY', 'REQUESTS'], 'a table', r.out)
        now = stats(d, key, 'web')[2]
        row = [l for l in lines if l.startswith(today().isoformat())]
        t.ok(row and row[0].split()[1:8] == [str(now['days'][-1][f]) for f in
                                             ('requests', 'status_2xx', 'status_3xx', 'status_4xx',
                                              'status_5xx', 'websockets', 'key_requests')],
             'today\'s row has today\'s counts', r.out)
        t.eq(len([l for l in lines if l[:4].isdigit()]), 7, 'seven days')
        t.ok(lines[-1].startswith('Requests per day: ') and lines[-1].endswith('\u2588') and
             lines[-1].count('\u2581') == 6, 'a sparkline, today the highest bar', lines[-1:])
        r = cli('stats', 'web', '--days', '3')
        t.eq(len([l for l in r.out.splitlines() if l[:4].isdigit()]), 3, '--days 3: three days')
        r = cli('stats', 'web', '--days', '91')
        t.ok(r.rc == 2, '--days 91: a usage error', r.describe())
        r = cli('stats', 'nope')
        t.ok(r.rc == 1 and 'not_found' in r.err, 'a missing sandbox: exit 1', r.describe())
        r = cli('stats', 'web', '--json')
        t.eq(json.loads(r.out).get('name') if r.rc == 0 else r.describe(), 'web', '--json')

    with t.section('days'):
        for q in ('?days=0', '?days=91', '?days=abc', '?days=1.5', '?days=-1', '?days=+3',
                  '?days=', '?days=1&days=2', '?foo=1', '?days=7&x=1'):
            t.error(stats(d, key, 'web', q), 400, 'invalid', 'days %s: 400 invalid' % q)
        r = stats(d, key, 'web', '?days=1')
        t.eq([x['day'] for x in r[2]['days']], [today().isoformat()], 'days=1: today only')
        r = stats(d, key, 'web', '?days=90')
        t.eq(len(r[2]['days']), 90, 'days=90: ninety days')
        t.eq(r[2]['days'][0]['day'], (today() - datetime.timedelta(days=89)).isoformat(),
             'starting 89 days ago')

    with t.section('404 and no wake'):
        t.error(stats(d, key, 'nope'), 404, 'not_found', 'a missing sandbox: 404')
        t.error(stats(d, other, sid), 404, 'not_found', 'another project\'s sandbox: 404')
        r = stats(d, other, 'web')
        t.eq((r[0], r[2]['total']['requests']), (200, 0), 'the other project\'s own web: its own')
        d.request('POST', '/v1/sandboxes/web/pause', token=key)
        t.eq(d.request('GET', '/v1/sandboxes/web', token=key)[2].get('state'), 'paused', 'paused')
        t.status(stats(d, key, 'web'), 200, 'stats of a paused sandbox')
        t.eq(d.request('GET', '/v1/sandboxes/web', token=key)[2].get('state'), 'paused',
             'it stays paused')

    with t.section('no write per request'):
        total = stats(d, key, 'web')[2]['total']['requests']
        req('/w1', bearer)
        req('/w2', bearer)
        d.kill9()
        d.start(same_port=True)
        r = stats(d, key, 'web')
        t.eq(r[2]['total']['requests'], total,
             'counts not yet flushed are gone after a kill -9: no write per request')

    with t.section('deleted with the sandbox'):
        t.ok(stored_rows(d, sid) != [], 'rows stored before the delete')
        r = d.request('DELETE', '/v1/sandboxes/web', token=key)
        t.ok(r[0] in (200, 202, 204), 'DELETE the sandbox', r[0])
        deadline = time.time() + 10
        while time.time() < deadline and d.request('GET', '/v1/sandboxes/' + sid,
                                                    token=key)[0] != 404:
            time.sleep(0.1)
        t.eq(stored_rows(d, sid), [], 'its stats rows are deleted with it')
        web2 = boxtest.free_port()
        sid2 = d.create_sandbox(key, {'name': 'gone', 'http_port': web2})['id']
        srv2 = serve(web2)
        r = e.get('gone--acme.%s' % DOMAIN, '/', headers=bearer)
        t.eq(r[0], 200, 'traffic to a sandbox')
        d.request('DELETE', '/v1/sandboxes/gone', token=key)
        deadline = time.time() + 10
        while time.time() < deadline and d.request('GET', '/v1/sandboxes/' + sid2,
                                                    token=key)[0] != 404:
            time.sleep(0.1)
        stats(d, other, 'web')  # flushes everything waiting
        t.eq(stored_rows(d, sid2), [], 'counts of a sandbox deleted before the flush are dropped')
        srv2.shutdown()
    srv.shutdown()
    d.stop()


def test_timed_flush(t):
    tmp = tempfile.mkdtemp(prefix='box-e2e-stats-flush-')
    d, edge_port = start_boxd(t, tmp, 500)
    key = d.project_with_key('acme')
    web_port = boxtest.free_port()
    sid = d.create_sandbox(key, {'name': 'web', 'http_port': web_port})['id']
    srv = serve(web_port)
    e = Edge(edge_port, os.path.join(d.data_dir, 'tls', 'ca.pem'))
    for i in range(3):
        e.get('web--acme.%s' % DOMAIN, '/%d' % i, headers={'Authorization': 'Bearer ' + key})
    deadline = time.time() + 10
    while time.time() < deadline and not any(json.loads(b).get('requests') == 3
                                              for _n, b in stored_rows(d, sid)):
        time.sleep(0.2)
    rows = stored_rows(d, sid)
    t.eq([json.loads(b).get('requests') for _n, b in rows], [3],
         'the timer wrote the counts (one row) without any stats call')
    t.eq(rows[0][0] if rows else None, today().isoformat(), 'named by the UTC day')
    d.kill9()
    d.start(same_port=True)
    r = stats(d, key, 'web')
    t.eq(r[2]['total']['requests'] if r[0] == 200 else r, 3,
         'the counts survive a kill -9 after the interval')
    srv.shutdown()
    d.stop()


def test_read_only_key(t):
    tmp = tempfile.mkdtemp(prefix='box-e2e-ro-')
    d, edge_port = start_boxd(t, tmp, 600000)
    key = d.project_with_key('acme')
    web_port = boxtest.free_port()
    d.create_sandbox(key, {'name': 'web', 'http_port': web_port})
    srv = serve(web_port)
    host = 'web--acme.%s' % DOMAIN
    e = Edge(edge_port, os.path.join(d.data_dir, 'tls', 'ca.pem'))

    with t.section('read-only keys: made and listed'):
        r = d.admin('POST', '/v1/projects/acme/keys', {'name': 'viewer', 'read_only': True})
        t.status(r, 201, 'POST a key with read_only: true')
        ro = (r[2] or {}).get('secret', '')
        t.eq(set(r[2] or {}), boxtest.KEY_FIELDS | {'read_only', 'secret'},
             'the answer says read_only')
        t.eq((r[2] or {}).get('read_only'), True, 'read_only: true')
        ro_id = (r[2] or {}).get('id')
        t.error(d.admin('POST', '/v1/projects/acme/keys', {'name': 'x', 'read_only': 'yes'}),
                400, 'invalid', 'read_only must be a boolean')
        keys = d.admin('GET', '/v1/projects/acme/keys')[2]['keys']
        t.eq([k.get('read_only') for k in keys if k['id'] == ro_id], [True],
             'listed with read_only: true')
        t.ok(all(set(k) == boxtest.KEY_FIELDS for k in keys if k['id'] != ro_id),
             'full keys keep the exact Key shape', keys)

    with t.section('read-only keys: reads allowed'):
        for path in ('/v1/whoami', '/v1/sandboxes', '/v1/sandboxes/web',
                     '/v1/sandboxes/web/stats', '/v1/sandboxes/web/stats?days=30',
                     '/v1/sandboxes/web/ports/settings', '/v1/sandboxes/web/tasks',
                     '/v1/sandboxes/web/checkpoints'):
            t.status(d.request('GET', path, token=ro), 200, 'GET %s' % path)

    with t.section('read-only keys: changes denied'):
        for method, path, body in (
                ('POST', '/v1/sandboxes', {'name': 'new'}),
                ('PATCH', '/v1/sandboxes/web', {'labels': {'a': 'b'}}),
                ('DELETE', '/v1/sandboxes/web', None),
                ('POST', '/v1/sandboxes/web/pause', {}),
                ('POST', '/v1/sandboxes/web/exec/run', {'cmd': ['true']}),
                ('PUT', '/v1/sandboxes/web/ports/%d' % web_port, {'access': 'public'}),
                ('GET', '/v1/sandboxes/web/exec?cmd=sh', None),
                ('GET', '/v1/sandboxes/web/ports/%d/connect' % web_port, None)):
            t.error(d.request(method, path, body, token=ro), 403, 'permission_denied',
                    '%s %s' % (method, path), message_contains='read-only')
        t.eq([s['name'] for s in d.request('GET', '/v1/sandboxes', token=key)[2]['sandboxes']],
             ['web'], 'nothing was created or deleted')
        t.eq((d.request('GET', '/v1/sandboxes/web', token=key)[2].get('labels') or {}).get('a'),
             None, 'nothing was changed')
        t.eq(e.get(host)[0], 401, 'the port stays private')

    with t.section('read-only keys on the edge'):
        r = e.get(host, headers={'Authorization': 'Bearer ' + ro})
        t.eq(r[0], 401, 'a private URL with a read-only Bearer: 401')
        r = e.get(host, '/?box_token=' + ro)
        t.ok(r[0] == 401 and 'set-cookie' not in r[1], 'a read-only box_token: 401, no cookie',
             r[0])
        r = e.get(host, headers={'Cookie': 'box_token=' + ro})
        t.eq(r[0], 401, 'a read-only cookie: 401')
        d.request('PUT', '/v1/sandboxes/web/ports/%d' % web_port, {'access': 'public'}, token=key)
        r = e.get(host, '/p', headers={'Authorization': 'Bearer ' + ro})
        t.eq(r[0], 200, 'a public URL answers')
        t.eq([v for k, v in (r[2] or {}).get('headers', []) if k.lower() == 'authorization'], [],
             'the read-only key does not reach the sandbox')

    with t.section('read-only keys: after a restart, and revoked'):
        d.kill9()
        d.start(same_port=True)
        t.error(d.request('DELETE', '/v1/sandboxes/web', token=ro), 403, 'permission_denied',
                'still read-only after a restart')
        t.status(d.request('GET', '/v1/sandboxes/web', token=ro), 200, 'and still reads')
        t.status(d.admin('DELETE', '/v1/projects/acme/keys/' + ro_id), 204, 'DELETE the key')
        t.error(d.request('GET', '/v1/sandboxes', token=ro), 401, 'unauthorized',
                'a deleted read-only key fails')
    srv.shutdown()
    d.stop()


if __name__ == '__main__':
    tap = Tap()
    if not os.access(BOX_AGENT, os.X_OK):
        tap.skip('usage stats through the real agent', 'needs BOX_AGENT')
        tap.finish()
    else:
        boxtest.main(tap, test_counts, test_timed_flush, test_read_only_key)
