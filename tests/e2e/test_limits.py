#!/usr/bin/env python3
# test_limits.py: quotas per project, the request rate and open streams per
# key, and the request-head timeout against slow clients (doc/API.md,
# "Quotas and limits").  Each part starts boxd with a configuration that
# makes its limit small, and checks that a refusal changes nothing.

import os
import socket
import tempfile
import time

import boxtest
from boxtest import Boxd, Tap


def boxd_with(t, conf_text):
    conf_dir = tempfile.mkdtemp(prefix='box-e2e-limits-')
    conf = os.path.join(conf_dir, 'boxd.conf')
    with open(conf, 'w') as f:
        f.write(conf_text)
    return Boxd(t, extra_args=['--config', conf]).start()


def create(d, key, resources, name):
    return d.request('POST', '/v1/sandboxes', {'name': name, 'resources': resources}, token=key)


def names(d, key):
    r = d.request('GET', '/v1/sandboxes', token=key)
    return sorted(s['name'] for s in (r[2] or {}).get('sandboxes', []))


def test_quotas(t):
    d = boxd_with(t, '[quota]\nsandboxes=2\ncpus=0\nmemory_mib=0\ndisk_gib=0\n'
                     '[quota.cpus]\nsandboxes=0\ncpus=3\n'
                     '[quota.mem]\nsandboxes=0\nmemory_mib=3000\n'
                     '[quota.disk]\nsandboxes=0\ndisk_gib=45\n')
    try:
        with t.section('number of sandboxes ([quota] sandboxes=2)'):
            key = d.project_with_key('count')
            small = {'cpus': 1, 'memory_mib': 128, 'disk_gib': 1}
            t.status(create(d, key, small, 'one'), 201, 'first sandbox')
            t.status(create(d, key, small, 'two'), 201, 'second sandbox')
            events = d.events(key)
            events.wait_connected()
            r = create(d, key, small, 'three')
            t.error(r, 409, 'conflict', 'a third sandbox', message_contains='quota exceeded')
            t.ok('2 sandboxes' in r[2]['error']['message'], 'the message names the quota',
                 r[2]['error']['message'])
            t.eq(names(d, key), ['one', 'two'], 'the refused create left nothing')
            got = events.collect(0.5)
            t.eq([e['event'] for e in got], [], 'and emitted no event')
            events.close()
            t.status(d.request('DELETE', '/v1/sandboxes/two', token=key), 204, 'delete one')
            t.status(create(d, key, small, 'three'), 201, 'then the third fits')
            other = d.project_with_key('other')
            t.status(create(d, other, small, 'o1'), 201, 'another project has its own count')

        with t.section('CPUs ([quota.cpus] cpus=3, over [quota])'):
            key = d.project_with_key('cpus')
            t.status(create(d, key, {'cpus': 2}, 'a'), 201, '2 CPUs')
            r = create(d, key, {'cpus': 2}, 'b')
            t.error(r, 409, 'conflict', '2 more CPUs (4 > 3)', message_contains='CPUs')
            t.status(create(d, key, {'cpus': 1}, 'c'), 201, '1 more CPU (3)')
            t.status(create(d, key, {'cpus': 1}, 'd'), 409, 'a 4th CPU does not fit')
            t.eq(names(d, key), ['a', 'c'], 'refusals changed nothing')

        with t.section('memory ([quota.mem] memory_mib=3000)'):
            key = d.project_with_key('mem')
            t.status(create(d, key, {'memory_mib': 2048}, 'a'), 201, '2048 MiB')
            r = create(d, key, {'memory_mib': 1024}, 'b')
            t.error(r, 409, 'conflict', '1024 MiB more (3072 > 3000)', message_contains='memory')
            t.status(create(d, key, {'memory_mib': 256}, 'c'), 201, '256 MiB more (2304)')
            t.status(create(d, key, {'memory_mib': 256}, 'e'), 201,
                     'a third sandbox: [quota.mem] sandboxes=0 lifts [quota] sandboxes=2')
            # paused and stopped sandboxes still count: they can be woken
            t.status(d.request('POST', '/v1/sandboxes/a/stop', token=key), 200, 'stop one')
            t.status(create(d, key, {'memory_mib': 512}, 'd'), 409,
                     'a stopped sandbox still holds its memory in the quota')

        with t.section('disk ([quota.disk] disk_gib=45): full disks plus memory snapshots'):
            key = d.project_with_key('disk')
            # 20 GiB + 2048 MiB snapshot each: 22 GiB twice is 44 GiB
            t.status(create(d, key, {'disk_gib': 20, 'memory_mib': 2048}, 'a'), 201, '22 GiB')
            t.status(create(d, key, {'disk_gib': 20, 'memory_mib': 2048}, 'b'), 201, '44 GiB')
            r = create(d, key, {'disk_gib': 1, 'memory_mib': 128}, 'c')
            # disks alone would be 41 GiB: the snapshots make it 45 GiB and 128 MiB
            t.error(r, 409, 'conflict', '1 GiB and 128 MiB more', message_contains='disk')
            t.eq(names(d, key), ['a', 'b'], 'refusal changed nothing')
    finally:
        d.stop()


def test_rate(t):
    d = boxd_with(t, '[boxd]\nrate_per_s=1\nrate_burst=5\n')
    try:
        key = d.project_with_key('rate')
        other = d.project_with_key('calm')
        codes = [d.request('GET', '/v1/whoami', token=key)[0] for _ in range(5)]
        t.eq(codes, [200] * 5, 'a burst of 5 requests')
        r = d.request('GET', '/v1/whoami', token=key)
        t.error(r, 429, 'rate_limited', 'the 6th request', message_contains='too many requests')
        retry = r[1].get('retry-after', '')
        t.ok(retry.isdigit() and 1 <= int(retry) <= 2, 'with Retry-After in seconds', r[1])
        r = d.request('POST', '/v1/sandboxes', {'name': 'limited'}, token=key)
        t.error(r, 429, 'rate_limited', 'a create past the rate')
        t.eq(d.request('GET', '/v1/whoami', token=other)[0], 200, 'another key is not held up')
        codes = [d.admin('GET', '/v1/projects')[0] for _ in range(10)]
        t.eq(codes, [200] * 10, 'the admin token is not rate limited')
        time.sleep((int(retry) if retry.isdigit() else 1) + 1)
        r = d.request('GET', '/v1/sandboxes', token=key)
        t.eq(r[0], 200, 'after Retry-After it passes')
        t.eq([s['name'] for s in (r[2] or {}).get('sandboxes', [])], [],
             'the refused create made nothing')
    finally:
        d.stop()


def test_streams(t):
    d = boxd_with(t, '[boxd]\nkey_max_sse=2\n')
    try:
        key = d.project_with_key('streams')
        other = d.make_key('streams', name='second')['secret']
        first = d.events(key)
        second = d.events(key)
        first.wait_connected()
        second.wait_connected()
        t.eq((first.status, second.status), (200, 200), 'two event streams open')
        third = d.request('GET', '/v1/events', token=key, timeout=5)
        t.error(third, 409, 'conflict', 'a third event stream of the key',
                message_contains='too many open event streams')
        fourth = d.events(other)
        fourth.wait_connected()
        t.eq(fourth.status, 200, 'another key of the project has its own count')
        fourth.close()
        first.close()
        # boxd notices a client gone from an event stream at its next write:
        # an event (a create writes two) or the keep-alive comment (15 s)
        d.create_sandbox(key, {'name': 'poke'})
        ok = False
        deadline = time.time() + 20
        while time.time() < deadline and not ok:
            again = d.events(key)
            again.wait_connected()
            ok = again.status == 200
            again.close()
            if not ok:
                time.sleep(0.5)
        t.ok(ok, 'once one closed, a new one opens')
        second.close()
    finally:
        d.stop()


def closed_within(sock, seconds):
    """True when the peer closes (or resets) @sock within @seconds."""
    sock.settimeout(seconds)
    try:
        while True:
            data = sock.recv(4096)
            if not data:
                return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def read_response(sock):
    """One whole answer (head and Content-Length body) from @sock."""
    data = b''
    while b'\r\n\r\n' not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b'\r\n\r\n')
    length = 0
    for line in head.split(b'\r\n')[1:]:
        name, _, value = line.partition(b':')
        if name.strip().lower() == b'content-length':
            length = int(value.strip())
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b'\r\n\r\n' + body


def test_slow_clients(t):
    d = boxd_with(t, '[boxd]\nhttp_header_timeout_s=2\n')
    try:
        key = d.project_with_key('slow')
        s = socket.create_connection(('127.0.0.1', d.port))
        s.sendall(b'GET /v1/who')
        start = time.time()
        t.ok(closed_within(s, 6), 'half a request line: dropped')
        t.ok(time.time() - start >= 1.5, 'after the header timeout, not at once',
             time.time() - start)
        s.close()

        s = socket.create_connection(('127.0.0.1', d.port))
        t.ok(closed_within(s, 6), 'a connection that sends nothing: dropped')
        s.close()

        s = socket.create_connection(('127.0.0.1', d.port))
        s.sendall(b'GET /v1/whoami HTTP/1.1\r\nHost: x\r\n')
        time.sleep(1)
        s.sendall(('Authorization: Bearer %s\r\n\r\n' % key).encode())
        s.settimeout(5)
        head = read_response(s)
        t.ok(head.startswith(b'HTTP/1.1 200'), 'a head completed in time is served', head[:60])
        # keep-alive: the next request's head has its own time
        time.sleep(1)
        s.sendall(('GET /v1/whoami HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n'
                   % key).encode())
        head = read_response(s)
        t.ok(head.startswith(b'HTTP/1.1 200'), 'and the next request on the connection too',
             head[:60])
        s.close()

        # clients that leave in the middle of a head, before the timeout
        for _ in range(5):
            s = socket.create_connection(('127.0.0.1', d.port))
            s.sendall(b'GET /v1/whoami HTTP/1.1\r\nHo')
            s.close()
        time.sleep(3)
        t.eq(d.request('GET', '/v1/whoami', token=key)[0], 200,
             'clients gone mid-head before the timeout: boxd serves on')

        # many slow clients leave no descriptors behind
        time.sleep(0.5)
        base = len(os.listdir('/proc/%d/fd' % d.proc.pid))
        socks = [socket.create_connection(('127.0.0.1', d.port)) for _ in range(20)]
        for s in socks:
            s.sendall(b'POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-')
        t.ok(all(closed_within(s, 6) for s in socks), '20 slow heads: all dropped')
        for s in socks:
            s.close()
        time.sleep(0.5)
        n = len(os.listdir('/proc/%d/fd' % d.proc.pid))
        t.ok(n <= base + 1, 'and boxd holds no descriptor for them', (base, n))
        t.ok(d.alive(), 'boxd is still up')
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_quotas, test_rate, test_streams, test_slow_clients)
