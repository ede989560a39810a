#!/usr/bin/env python3
# e2e: GET /v1/events (Server-Sent Events).

import http.client
import json
import os
import socket
import tempfile
import threading
import time

import boxtest
from boxtest import Boxd, Tap

SLOW_CAP = 16384     # [boxd] http_stream_unwritten_max in test_slow_reader
FLIPPERS = 4


def check_event(t, e, etype, sb_id, desc, reason=None, detail=None):
    if not t.ok(e is not None, '%s: event %s arrives' % (desc, etype)):
        return
    t.eq(e.get('event'), etype, '%s: "event: %s" line' % (desc, etype))
    data = e.get('data')
    if not t.ok(isinstance(data, dict), '%s: data is a JSON object' % desc, e.get('raw')):
        return
    t.ok(set(data.keys()) in ({'type', 'sandbox', 'at'}, {'type', 'sandbox', 'at', 'detail'}),
         '%s: data has type, sandbox, at (and detail)' % desc, data)
    t.eq(data.get('type'), etype, '%s: data.type' % desc)
    t.eq(data.get('sandbox'), sb_id, '%s: data.sandbox is the sandbox id' % desc)
    t.ok(boxtest.is_utc_ts(data.get('at')), '%s: data.at RFC 3339 UTC' % desc, data.get('at'))
    if reason is not None:
        t.eq((data.get('detail') or {}).get('reason'), reason, '%s: detail.reason %s' % (desc, reason))
    if detail is not None:
        for k, v in detail.items():
            t.eq((data.get('detail') or {}).get(k), v, '%s: detail.%s %s' % (desc, k, v))


def of(sb_id, etype):
    return lambda e: e.get('event') == etype and (e.get('data') or {}).get('sandbox') == sb_id


def test_events(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        ev = d.events(key)
        t.ok(ev.wait_connected(5), 'event stream answers its headers before any event')
        t.eq(ev.status, 200, 'GET /v1/events -> 200')
        t.ok(ev.headers.get('content-type', '').startswith('text/event-stream'),
             'Content-Type text/event-stream', ev.headers.get('content-type'))

        s = d.create_sandbox(key, {'name': 'ev1'})
        e = ev.wait_for(lambda e: (e.get('data') or {}).get('sandbox') == s['id'], 5)
        check_event(t, e, 'sandbox.created', s['id'], 'create (first event)')
        e = ev.wait_for(of(s['id'], 'sandbox.running'), 5)
        check_event(t, e, 'sandbox.running', s['id'], 'create (then running)')
        t.eq([x.get('event') for x in getattr(ev, 'skipped', [])], [], 'nothing between created and running')

        t.status(d.request('POST', '/v1/sandboxes/ev1/pause', token=key), 200, 'pause')
        e = ev.wait_for(of(s['id'], 'sandbox.paused'), 5)
        check_event(t, e, 'sandbox.paused', s['id'], 'pause', reason='request')

        t.status(d.request('POST', '/v1/sandboxes/ev1/wake', token=key), 200, 'wake')
        e = ev.wait_for(of(s['id'], 'sandbox.running'), 5)
        check_event(t, e, 'sandbox.running', s['id'], 'wake', detail={'from': 'paused'})

        t.status(d.request('POST', '/v1/sandboxes/ev1/stop', token=key), 200, 'stop')
        e = ev.wait_for(of(s['id'], 'sandbox.stopped'), 5)
        check_event(t, e, 'sandbox.stopped', s['id'], 'stop', reason='request')

        t.status(d.request('POST', '/v1/sandboxes/ev1/wake', token=key), 200, 'wake stopped')
        e = ev.wait_for(of(s['id'], 'sandbox.running'), 5)
        check_event(t, e, 'sandbox.running', s['id'], 'wake stopped', detail={'from': 'stopped'})

        # no-ops emit nothing
        t.status(d.request('POST', '/v1/sandboxes/ev1/wake', token=key), 200, 'wake running (no-op)')
        extra = ev.collect(1.0)
        t.eq([x.get('event') for x in extra], [], 'a no-op wake emits no event')

        t.status(d.request('DELETE', '/v1/sandboxes/ev1', token=key), 204, 'delete')
        e = ev.wait_for(of(s['id'], 'sandbox.deleted'), 5)
        check_event(t, e, 'sandbox.deleted', s['id'], 'delete', reason='request')

        # refused requests emit nothing
        t.error(d.request('POST', '/v1/sandboxes', {'name': 'Bad'}, token=key), 400, 'invalid', 'refused create')
        extra = ev.collect(1.0)
        t.eq([x.get('event') for x in extra], [], 'a refused create emits no event')
        ev.close()

        # ?sandbox= narrows to one sandbox, by name or id
        a = d.create_sandbox(key, {'name': 'aa'})
        b = d.create_sandbox(key, {'name': 'bb'})
        by_name = d.events(key, 'sandbox=aa')
        by_id = d.events(key, 'sandbox=%s' % a['id'])
        t.ok(by_name.wait_connected(5) and by_name.status == 200, '?sandbox=<name> -> 200', by_name.status)
        t.ok(by_id.wait_connected(5) and by_id.status == 200, '?sandbox=<id> -> 200', by_id.status)
        for verb in ('pause', 'wake'):
            d.request('POST', '/v1/sandboxes/bb/%s' % verb, token=key)
            d.request('POST', '/v1/sandboxes/aa/%s' % verb, token=key)
        got_name = by_name.collect(1.5)
        got_id = by_id.collect(0.2)
        t.eq([(x.get('event'), (x.get('data') or {}).get('sandbox')) for x in got_name],
             [('sandbox.paused', a['id']), ('sandbox.running', a['id'])],
             '?sandbox=aa: only aa\'s events, in order')
        t.eq([(x.get('event'), (x.get('data') or {}).get('sandbox')) for x in got_id],
             [('sandbox.paused', a['id']), ('sandbox.running', a['id'])],
             '?sandbox=<id of aa>: only aa\'s events, in order')
        by_name.close()
        by_id.close()
        t.ok(b is not None, 'fixture bb')

        r = d.request('GET', '/v1/events?sandbox=unknown', token=key, timeout=5)
        t.error(r, 404, 'not_found', 'GET /v1/events?sandbox=unknown')
        r = d.request('GET', '/v1/events?sandbox=sb-aaaaaaaaaaaa', token=key, timeout=5)
        t.error(r, 404, 'not_found', 'GET /v1/events?sandbox=<unknown id>')
        r = d.request('GET', '/v1/events', token='box_' + 'a' * 32, timeout=5)
        t.error(r, 401, 'unauthorized', 'GET /v1/events with an unknown key')

        # another project's events are not seen
        key_b = d.project_with_key('bravo')
        ev_b = d.events(key_b)
        ev_a = d.events(key)
        t.ok(ev_b.wait_connected(5) and ev_a.wait_connected(5), 'two project streams open')
        c = d.create_sandbox(key, {'name': 'cc'})
        cb = d.create_sandbox(key_b, {'name': 'cc'})
        d.request('DELETE', '/v1/sandboxes/cc', token=key)
        got_b = ev_b.collect(1.5)
        got_a = ev_a.collect(0.2)
        t.eq(sorted(set((x.get('data') or {}).get('sandbox') for x in got_b)), [cb['id']],
             'B sees only its own sandbox\'s events')
        t.eq(sorted(set((x.get('data') or {}).get('sandbox') for x in got_a)), [c['id']],
             'A sees only its own sandbox\'s events')
        t.eq([x.get('event') for x in got_a], ['sandbox.created', 'sandbox.running', 'sandbox.deleted'],
             'A\'s events for create then delete')
        ev_a.close()
        ev_b.close()

        # boxd keeps working after streams were closed
        t.status(d.request('GET', '/v1/sandboxes', token=key), 200, 'boxd still answers after streams closed')
        # SIGTERM with a stream open: boxd exits 0 and the stream ends
        left_open = d.events(key)
        t.ok(left_open.wait_connected(5) and left_open.status == 200, 'a stream left open')
    finally:
        d.stop('boxd stops on SIGTERM with exit code 0 while an event stream is open')
    left_open.thread.join(10)
    t.ok(not left_open.thread.is_alive(), 'the open stream ended when boxd stopped')


def rss_kib(d):
    with open('/proc/%d/status' % d.proc.pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return 0


class StalledReader:
    """GET /v1/events on a socket with a small receive buffer that stops
    reading once the headers are in."""

    def __init__(self, d, key):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(('127.0.0.1', d.port))
        self.sock.sendall(('GET /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n'
                           'Authorization: Bearer %s\r\n\r\n' % key).encode())
        self.got = b''
        self.sock.settimeout(5)
        while b'\r\n\r\n' not in self.got:
            chunk = self.sock.recv(1)
            if not chunk:
                break
            self.got += chunk

    def read_rest(self, timeout):
        """Reads again until the end of the answer or of the connection."""
        deadline = time.time() + timeout
        self.sock.settimeout(1)
        while time.time() < deadline:
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            self.got += chunk
            if self.got.endswith(b'\r\n0\r\n\r\n'):
                break
        return self.got

    def close(self):
        self.sock.close()


def post(conn, path, key):
    """POST on a kept-alive connection; waits out a 429."""
    while True:
        conn.request('POST', path, body=b'{}', headers={'Authorization': 'Bearer ' + key,
                                                         'Content-Type': 'application/json'})
        r = conn.getresponse()
        r.read()
        if r.status != 429:
            return r.status
        time.sleep(float(r.getheader('Retry-After') or '1'))


def dechunk(raw):
    """The body of a chunked answer, and whether its last chunk came."""
    body = raw.split(b'\r\n\r\n', 1)[1] if b'\r\n\r\n' in raw else b''
    out = b''
    while body:
        line, _, rest = body.partition(b'\r\n')
        try:
            size = int(line.split(b';')[0], 16)
        except ValueError:
            return out, False
        if size == 0:
            return out, True
        out += rest[:size]
        body = rest[size + 2:]
    return out, False


def test_slow_reader(t):
    """A reader that stops reading is dropped once the cap of unwritten bytes
    is reached: boxd's memory stays bounded, a last `dropped` event ends its
    stream, and other readers go on."""
    conf_dir = tempfile.mkdtemp(prefix='box-e2e-ev-')
    conf = os.path.join(conf_dir, 'boxd.conf')
    with open(conf, 'w') as f:
        f.write('[boxd]\nhttp_stream_unwritten_max=%d\n' % SLOW_CAP)
    d = Boxd(t, extra_args=['--config', conf]).start()
    try:
        key = d.project_with_key('alpha')
        for i in range(FLIPPERS):
            d.create_sandbox(key, {'name': 'flip%d' % i})
        fast = d.events(key)
        t.ok(fast.wait_connected(5), 'a reading stream is open')
        slow = StalledReader(d, key)
        t.ok(slow.got.startswith(b'HTTP/1.1 200'), 'the stalled stream answered 200', slow.got[:100])
        rss_before = rss_kib(d)

        # four writers, each pausing and waking its own sandbox: an event each
        dropped = 'is more than %d bytes behind' % SLOW_CAP
        counts = [0] * FLIPPERS
        stop = threading.Event()

        def flipper(i):
            conn = http.client.HTTPConnection('127.0.0.1', d.port, timeout=30)
            while not stop.is_set():
                verb = 'pause' if counts[i] % 2 == 0 else 'wake'
                post(conn, '/v1/sandboxes/flip%d/%s' % (i, verb), key)
                counts[i] += 1
            conn.close()

        threads = [threading.Thread(target=flipper, args=(i,), daemon=True) for i in range(FLIPPERS)]
        for th in threads:
            th.start()
        deadline = time.time() + 90
        while dropped not in d.log_text() and time.time() < deadline:
            time.sleep(0.5)
        t.ok(dropped in d.log_text(), 'boxd dropped the stalled reader (after %d events)' % sum(counts))
        # more events once it was dropped: nothing more is kept for it
        at_drop = sum(counts)
        while sum(counts) < at_drop + 400 and time.time() < deadline + 30:
            time.sleep(0.2)
        stop.set()
        for th in threads:
            th.join(30)
        flips = sum(counts)
        grown = rss_kib(d) - rss_before
        if d.sanitized():
            t.skip('boxd RSS grew by less than 32 MiB over %d events' % flips,
                   'RSS means nothing under AddressSanitizer (quarantine, shadow memory); '
                   'checked in the plain build')
        else:
            t.ok(grown < 32 * 1024, 'boxd RSS grew by less than 32 MiB over %d events (%d KiB)'
                 % (flips, grown))

        raw = slow.read_rest(60)
        body, complete = dechunk(raw)
        blocks = [b for b in body.decode('utf-8', 'replace').split('\n\n') if b.startswith('event:')]
        t.ok(complete, 'the stalled stream\'s answer completes (last chunk)', raw[-80:])
        t.ok(len(blocks) > 0 and blocks[-1].startswith('event: dropped\n'),
             'its last event is `dropped`', blocks[-1:] if blocks else None)
        last = {}
        if blocks:
            try:
                last = json.loads(blocks[-1].split('data: ', 1)[1])
            except (IndexError, ValueError):
                last = {}
        t.eq(last, {'reason': 'slow_reader', 'unwritten_max': SLOW_CAP}, 'the dropped event\'s data')
        t.ok(len(blocks) - 1 < flips, 'events after the drop never reached it (%d of %d)'
             % (len(blocks) - 1, flips))
        slow.close()

        # the reading stream carried on through all of it
        s = d.create_sandbox(key, {'name': 'after'})
        e = fast.wait_for(of(s['id'], 'sandbox.created'), 10)
        t.ok(e is not None, 'the reading stream still gets events')
        t.status(d.request('GET', '/v1/sandboxes', token=key), 200, 'boxd still answers')
        fast.close()
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_events, test_slow_reader)
