#!/usr/bin/env python3
# vm: the isolation sweep from inside real guests (issue 12 item 7), one pair
# of sandboxes for every check: "iso-a" of project alpha and "iso-b" of
# project bravo.
#
# 1. The in-sandbox socket of iso-a, tried for iso-b's resources: every route
#    the route table serves there (core/http/box-http-server.c, flag S), every
#    method, with iso-b's id or name as the /v1 prefix, iso-b's session id and
#    iso-b's open port: 404 (or the answer an absent resource gets) and
#    nothing of iso-b changes (its record, its sessions, its server's log).
# 2. From inside iso-a nothing but the internet and DNS on port 53 is
#    reachable: boxd's API port, libvirt's ports, every TCP port the host
#    listens on at every IPv4 address it has, 169.254.169.254 (routed into a
#    namespace of the test first, so that it could never leave the machine),
#    iso-b's address and open port, and the DNS forwarder's own port over TCP
#    and UDP.  Controls: the host reaches each of those, iso-b reaches its own
#    port, UDP DNS through the gateway answers.
#
# Nothing is sent off this machine: the targets are this host's addresses,
# the namespace and the other sandbox; the resolver forwards to a server on
# 127.0.0.1 (dns_upstream).

import json
import os
import re
import shutil
import subprocess
import sys
import time

import filetest  # noqa: F401  (first: puts tests/e2e-vm and tests/e2e on sys.path)
import vmtest  # noqa: E402
from vmtest import VmBoxd, Tap, run, sh, sh_host, wait_file, host_connect  # noqa: E402
from streamtest import exec_ws  # noqa: E402
import test_isolation_sweep as sweep  # noqa: E402  (tests/e2e: the route table parser)

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)

HELPER = vmtest.NET_HELPER
SERVER_C = os.path.join(vmtest.SOURCE_ROOT, 'core', 'http', 'box-http-server.c')
NS_META = 'boxe2e-meta-%d' % os.getpid()
VETH_META = 'e2em%d' % (os.getpid() % 100000)
META, META_NODE = '169.254.169.254', '169.254.169.253'
DNS_ANSWER = '198.51.100.7'
DNS_UP_PORT = vmtest.free_privileged_port()
NODE_PORT = vmtest.boxtest.free_port()
WORK = vmtest.tempfile.mkdtemp(prefix='box-e2e-iso-')
PROCS = []
METHODS = ('GET', 'POST', 'PUT', 'PATCH', 'DELETE')


def teardown_world():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()
    sh_host('ip netns del %s 2>/dev/null' % NS_META, check=False)
    sh_host('ip link del %s 2>/dev/null' % VETH_META, check=False)
    shutil.rmtree(WORK, ignore_errors=True)


def spawn(argv):
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    PROCS.append(p)
    return p


def make_world():
    """169.254.169.254 in a namespace of its own (a route to it on this host
    wins over any default route), a TCP server on every address of the node,
    and the resolver's upstream on 127.0.0.1."""
    for line in sh_host('ip netns list', check=False).splitlines():
        ns = (line.split() or [''])[0]
        pid = ns.rsplit('-', 1)[-1]
        if ns.startswith('boxe2e-meta-') and pid.isdigit() and not os.path.exists('/proc/' + pid):
            sh_host('ip netns del %s' % ns, check=False)
            sh_host('ip link del e2em%d 2>/dev/null' % (int(pid) % 100000), check=False)
    vmtest.atexit.register(teardown_world)
    sh_host('ip netns add %s' % NS_META)
    sh_host('ip link add %s type veth peer name eth0 netns %s' % (VETH_META, NS_META))
    sh_host('ip addr add %s/30 dev %s && ip link set %s up' % (META_NODE, VETH_META, VETH_META))
    sh_host('ip -n %s addr add %s/30 dev eth0 && ip -n %s link set eth0 up && ip -n %s link set lo up'
            % (NS_META, META, NS_META, NS_META))
    sh_host('ip -n %s route add default via %s' % (NS_META, META_NODE))
    spawn(['ip', 'netns', 'exec', NS_META, 'python3', HELPER, 'serve', META, '80',
           os.path.join(WORK, 'meta.log')])
    spawn(['python3', HELPER, 'serve', '0.0.0.0', str(NODE_PORT), os.path.join(WORK, 'node.log')])
    spawn(['python3', HELPER, 'dns-serve', '127.0.0.1', str(DNS_UP_PORT), DNS_ANSWER,
           os.path.join(WORK, 'dns.ready')])
    for f in ('meta.log.ready', 'node.log.ready', 'dns.ready'):
        if not wait_file(os.path.join(WORK, f)):
            raise RuntimeError('a test server did not start: %s' % f)


# TCP connects from inside a guest, all at once in one process (a Python
# per probe is slow under TCG): a JSON list of [host, port] in, a JSON list
# of exit codes out as the helper's connect gives them (0 reached, 2 dropped:
# no answer within the time, 3 refused or any other error).
PROBE = r'''
import errno, json, select, socket, sys, time
targets = json.load(open(sys.argv[1]))
wait = float(sys.argv[2])
socks, codes = {}, [None] * len(targets)
for i, (host, port) in enumerate(targets):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    e = s.connect_ex((host, port))
    if e in (0, errno.EINPROGRESS):
        socks[s] = i
    else:
        codes[i] = 3
        s.close()
end = time.time() + wait
while socks and time.time() < end:
    _r, w, _x = select.select([], list(socks), [], max(0.0, end - time.time()))
    for s in w:
        e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        codes[socks.pop(s)] = 0 if e == 0 else 3
        s.close()
for s, i in socks.items():
    codes[i] = 2
    s.close()
print(json.dumps(codes))
'''


def guest_connect(key, sandbox, targets, wait=4):
    """{(host, port): code} of TCP connects from inside @sandbox."""
    r = run(d, key, sandbox, ['sh', '-c', 'cat > /tmp/targets.json'],
            stdin=json.dumps([list(tg) for tg in targets]).encode())
    r = run(d, key, sandbox, ['python3', '/tmp/probe.py', '/tmp/targets.json', str(wait)], timeout_s=120)
    try:
        codes = json.loads(r.out)
    except ValueError:
        codes = [None] * len(targets)
    return dict(zip(targets, codes)), r


# Requests on the in-sandbox socket from inside a guest: a JSON list of
# [method, path, headers, body] in, a JSON list of [status, body text] out.
SOCKET_CLIENT = r'''
import json, socket, sys
out = []
def dechunk(b):
    out = b''
    while b:
        size, _, rest = b.partition(b'\r\n')
        n = int(size.split(b';')[0] or b'0', 16)
        if n == 0:
            break
        out += rest[:n]
        b = rest[n + 2:]
    return out
for method, path, headers, body in json.load(open(sys.argv[1])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    try:
        s.connect('/run/box/api.sock')
        payload = json.dumps(body).encode()
        head = '%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n' % (method, path, len(payload))
        head += ''.join('%s: %s\r\n' % kv for kv in headers.items()) + '\r\n'
        s.sendall(head.encode() + payload)
        data = b''
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
            if len(data) > 200000:
                break
        top, _, body = data.partition(b'\r\n\r\n')
        if b'transfer-encoding: chunked' in top.lower():
            body = dechunk(body)
        status = int(top.split(b' ', 2)[1]) if top.startswith(b'HTTP/') else 0
        out.append([status, body.decode('utf-8', 'replace')[:2000]])
    except OSError as e:
        out.append([0, 'error: %s' % e])
    finally:
        s.close()
print(json.dumps(out))
'''

WS_HEADERS = {'Connection': 'Upgrade', 'Upgrade': 'websocket', 'Sec-WebSocket-Version': '13',
              'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ=='}


def socket_requests(key, sandbox, reqs):
    """Runs @reqs ([method, path, headers]) on @sandbox's socket; [[status, body]]."""
    r = run(d, key, sandbox, ['sh', '-c', 'cat > /tmp/reqs.json'], stdin=json.dumps(reqs).encode())
    if r.status != 200 or r.exit_code != 0:
        return None, r
    r = run(d, key, sandbox, ['python3', '/tmp/sc.py', '/tmp/reqs.json'], timeout=600, timeout_s=500)
    try:
        return json.loads(r.out), r
    except ValueError:
        return None, r


def body_code(text):
    try:
        return ((json.loads(text) or {}).get('error') or {}).get('code')
    except (ValueError, AttributeError):
        return None


try:
    with clock('test network (namespace, servers)'):
        make_world()
except Exception as e:   # noqa: BLE001
    teardown_world()
    vmtest.bail_out('cannot make the test network: %s' % e)

d = VmBoxd(t, config={'plugin.nftables': {'dns_upstream': '127.0.0.1:%d' % DNS_UP_PORT}})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KA = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
KB = vmtest.setup_or_bail(d, lambda: d.project_with_key('bravo'))
SB = {}
NET = {}
B_SESSION = {}


def test_setup(t):
    with clock('create two sandboxes (two projects)'):
        SB['a'] = d.create_sandbox(KA, {'name': 'iso-a'})
        SB['b'] = d.create_sandbox(KB, {'name': 'iso-b'})
    for k in SB:
        NET[k] = dict(d.net_records().get(SB[k]['id']) or {})
    t.ok(NET['a'].get('address') and NET['b'].get('address'), 'both sandboxes have an address', NET)
    helper = open(HELPER, 'rb').read()
    for k, key, name in (('a', KA, 'iso-a'), ('b', KB, 'iso-b')):
        r = run(d, key, name, ['sh', '-c', 'cat > /tmp/h.py'], stdin=helper)
        t.eq((r.status, r.exit_code), (200, 0), '%s: the probe helper copied in' % name)
    for name, text in (('sc.py', SOCKET_CLIENT), ('probe.py', PROBE)):
        r = run(d, KA, 'iso-a', ['sh', '-c', 'cat > /tmp/%s' % name], stdin=text.encode())
        t.eq((r.status, r.exit_code), (200, 0), 'iso-a: /tmp/%s copied in' % name)
    r = sh(d, KB, 'iso-b', 'setsid python3 /tmp/h.py serve 0.0.0.0 9000 /tmp/srv.log </dev/null >/dev/null 2>&1 & '
                           'for i in $(seq 100); do [ -e /tmp/srv.log.ready ] && break; sleep 0.1; done; '
                           'python3 /tmp/h.py connect 127.0.0.1 9000 2')
    t.eq((r.status, r.exit_code), (200, 0), 'control: iso-b reaches its own server on port 9000')
    w = exec_ws(d, KB, 'iso-b', ['sleep', '3000'], detachable='true')
    started = w.recv_json(60)
    B_SESSION['id'] = (started or {}).get('session')
    w.close()
    r = d.request('GET', '/v1/sandboxes/iso-b/exec/sessions', token=KB)
    ids = [s.get('id') for s in ((r[2] or {}).get('sessions') or []) if not s.get('exited')]
    t.ok(B_SESSION['id'] in ids, 'control: iso-b has a running detached session', r[3][:300])


def b_state():
    """Everything of iso-b that its own project reads."""
    out = {}
    for suffix in ('', '/exec/sessions', '/ports/settings'):
        r = d.request('GET', '/v1/sandboxes/iso-b' + suffix, token=KB)
        out[suffix] = (r[0], r[3].decode('utf-8', 'replace'))
    return out


def test_socket_sweep(t):
    routes = [(m, p) for m, p, _a in sweep.server_routes(SERVER_C)]
    text = open(SERVER_C, encoding='utf-8').read()
    # a route entry may span lines, and its flags combine (S | WS | SESSION)
    in_sandbox = {(m, p) for m, p, rest in
                  re.findall(r'\{\s*"([A-Z]+)",\s*"([^"]+)",([^{}]*)\}', text)
                  if len(rest.split(',')) > 3 and
                  re.search(r'(?<![A-Za-z_])S(?![A-Za-z_])', rest.split(',')[3])}
    s_routes = [(m, p) for m, p in routes if (m, p) in in_sandbox]
    t.ok(len(s_routes) >= 20, 'the route table names the in-sandbox routes', s_routes)
    sid, bid = B_SESSION.get('id') or 's-none', SB['b']['id']
    absent_sid, absent_id = 's-zzzzzzzzzz', 'sb-' + '0' * 12
    before = b_state()

    reqs, labels = [], []
    patterns = sorted({p for _m, p in s_routes})
    for pattern in patterns:
        rest = pattern[len('/v1/sandboxes/{sandbox}'):]
        for method in METHODS:
            ws = (method, pattern) in s_routes and method == 'GET' and (
                rest.endswith('/exec') or '/sessions/{session}' in rest or rest.endswith('/connect')
                or rest.endswith('/fs/watch'))
            hdrs = WS_HEADERS if ws else {}
            # a valid body where the route reads one, so that nothing but the
            # lookup can refuse it (a signal that got through would kill iso-b's session)
            body = {'signal': 'KILL'} if rest.endswith('/signal') else {}
            # iso-b's id and name as the /v1 prefix: nothing under /v1 is served
            for ident in (bid, 'iso-b'):
                path = sweep.fill(pattern, {'sandbox': ident, 'session': sid, 'port': '9000',
                                            'name': 'iso'})
                reqs.append([method, path, hdrs, body])
                labels.append(('prefixed', method, pattern, ident))
            # iso-b's session on iso-a's own socket, against an absent one
            if '{session}' in rest:
                for s in (sid, absent_sid):
                    reqs.append([method, sweep.fill(rest, {'session': s}), hdrs, body])
                    labels.append(('session', method, pattern, s))
    reqs.append(['GET', '/self', {'Authorization': 'Bearer ' + KB}, {}])
    labels.append(('self-key', 'GET', '/self', ''))
    reqs.append(['GET', '/self?sandbox=%s' % bid, {}, {}])
    labels.append(('self-query', 'GET', '/self', ''))
    reqs.append(['GET', '/ports/9000/connect', WS_HEADERS, {}])
    labels.append(('own-port', 'GET', '/ports/9000/connect', ''))
    with clock('in-sandbox socket sweep (%d requests)' % len(reqs)):
        res, r = socket_requests(KA, 'iso-a', reqs)
    t.ok(res is not None and len(res) == len(reqs), 'the sweep ran inside iso-a', r.describe())
    res = res or [[0, '']] * len(reqs)
    by = {}
    for label, (status, body) in zip(labels, res):
        by[label] = (status, body)
        kind, method, pattern, ident = label
        if kind == 'prefixed':
            t.ok(status == 404 and body_code(body) == 'not_found',
                 'iso-a socket: %s %s with iso-b\'s %s: 404 not_found' % (
                     method, pattern, 'id' if ident == bid else 'name'), '%s %s' % (status, body[:300]))
            own = sweep.fill(pattern, {'sandbox': bid, 'session': sid, 'port': '9000',
                                       'name': 'iso'})
            t.ok(bid not in body.replace(own, ''),
                 'iso-a socket: %s %s: the answer tells nothing of iso-b' % (method, pattern), body[:300])
    for pattern in patterns:
        rest = pattern[len('/v1/sandboxes/{sandbox}'):]
        if '{session}' not in rest:
            continue
        for method in METHODS:
            got = by.get(('session', method, pattern, sid))
            absent = by.get(('session', method, pattern, absent_sid))
            norm = (got[0], got[1].replace(sid, '<S>')) if got else None
            norm_absent = (absent[0], absent[1].replace(absent_sid, '<S>')) if absent else None
            t.eq(norm, norm_absent, 'iso-a socket: %s %s with iso-b\'s session answers like an absent one'
                 % (method, rest))
            if (method, pattern) in s_routes:
                t.ok(got is not None and got[0] == 404 and body_code(got[1]) == 'not_found',
                     'iso-a socket: %s %s with iso-b\'s session: 404 not_found' % (method, rest), repr(got))
    st, body = by[('self-key', 'GET', '/self', '')]
    t.eq((st, (json.loads(body) if st == 200 else {}).get('id')), (200, SB['a']['id']),
         'iso-a socket: GET /self with bravo\'s key is still iso-a\'s record')
    st, body = by[('self-query', 'GET', '/self', '')]
    t.eq((st, (json.loads(body) if st == 200 else {}).get('id')), (200, SB['a']['id']),
         'iso-a socket: GET /self?sandbox=<iso-b> is still iso-a\'s record')
    st, body = by[('own-port', 'GET', '/ports/9000/connect', '')]
    t.eq((st, body_code(body)), (502, 'port_closed'),
         'iso-a socket: ports/9000/connect is iso-a\'s own port 9000 (none), never iso-b\'s')
    after = b_state()
    for k in sorted(before):
        t.eq(after.get(k), before[k], 'iso-b\'s %s is unchanged' % (k or 'record'))
    r = run(d, KB, 'iso-b', ['cat', '/tmp/srv.log'])
    t.eq(r.out.split(), ['127.0.0.1'], 'iso-b\'s server saw only its own control')


def test_network_sweep(t):
    a, b = NET['a'], NET['b']
    gw = a.get('gateway')
    node_addrs = []
    for line in sh_host('ip -4 -o addr').splitlines():
        f = line.split()
        if len(f) > 3 and not f[3].startswith('127.'):
            node_addrs.append(f[3].split('/')[0])
    listening = set()
    for line in sh_host('ss -Hltn4').splitlines():
        f = line.split()
        if len(f) >= 4:
            host, _, port = f[3].rpartition(':')
            if port.isdigit():
                listening.add(int(port))
    ports = sorted(listening | {d.port, NODE_PORT, 16509, 16514, 5900,
                                int(d.config['plugin.nftables']['dns_port'])})
    t.comment('node addresses: %s; TCP ports: %s' % (' '.join(node_addrs), ' '.join(map(str, ports))))

    # controls: what the guest must not reach answers the node
    controls = host_connect([(META, 80), ('127.0.0.1', NODE_PORT)] + [(x, NODE_PORT) for x in node_addrs])
    t.ok(all(v == 0 for v in controls.values()),
         'controls: the metadata address and a server on every node address answer the node', controls)
    t.status(d.request('GET', '/v1/whoami', token=KA), 200, 'control: boxd answers on its API port')
    r = run(d, KA, 'iso-a', ['python3', '/tmp/h.py', 'dns-query', gw, '53', 'x.e2e.test', 'udp', '4'])
    t.eq((r.status, r.out.strip()), (200, DNS_ANSWER), 'control: UDP DNS to the gateway answers (the allowed path)')

    r = sh(d, KA, 'iso-a', 'setsid python3 /tmp/h.py serve 127.0.0.1 9100 /tmp/own.log </dev/null >/dev/null 2>&1 & '
                           'for i in $(seq 100); do [ -e /tmp/own.log.ready ] && break; sleep 0.1; done')
    own = [('127.0.0.1', 9100), ('127.0.0.1', 9101)]
    targets = [(x, p) for x in node_addrs for p in ports]
    targets += [(META, 80), (META, 53), (b['address'], 9000), (b['address'], 22)]
    with clock('probes from iso-a (%d)' % len(targets)):
        res, r = guest_connect(KA, 'iso-a', own + targets)
    t.ok([res.get(tg) for tg in own] == [0, 3], 'control: the probe in iso-a reaches its own server on '
         '127.0.0.1:9100 and is refused on 9101', '%r %s' % ([res.get(tg) for tg in own], r.describe()))
    for tg in targets:
        t.ok(res.get(tg) == 2, 'iso-a cannot reach %s:%s: dropped' % tg,
             'connect exit code %r (0 reached, 3 refused, 2 dropped)\n%s' % (res.get(tg), r.describe()))
    with open(os.path.join(WORK, 'meta.log')) as f:
        t.eq(f.read().split(), [META_NODE], 'the metadata server saw only the node\'s control')
    with open(os.path.join(WORK, 'node.log')) as f:
        # (the controls above come from the node's own addresses, gateways included)
        peers = f.read().split()
        t.ok(a['address'] not in peers and b['address'] not in peers, 'the node\'s server saw no sandbox', peers)
    # the resolver's own port, directly, over UDP (TCP is in the sweep above)
    dns_port = d.config['plugin.nftables']['dns_port']
    r = run(d, KA, 'iso-a', ['python3', '/tmp/h.py', 'dns-query', gw, dns_port, 'x.e2e.test', 'udp', '3'])
    t.ok(r.out.strip() != DNS_ANSWER, 'iso-a: UDP DNS to the resolver\'s own port %s gets no answer' % dns_port,
         r.describe())
    r = run(d, KA, 'iso-a', ['python3', '/tmp/h.py', 'dns-query', gw, dns_port, 'x.e2e.test', 'tcp', '3'])
    t.ok(r.out.strip() != DNS_ANSWER, 'iso-a: TCP DNS to the resolver\'s own port %s gets no answer' % dns_port,
         r.describe())
    r = run(d, KA, 'iso-a', ['sh', '-c', 'ls /run/libvirt /var/run/libvirt 2>&1; ip -6 -o addr show scope global'])
    t.ok('No such file' in r.out and 'inet6' not in r.out,
         'iso-a: no libvirt socket directory and no global IPv6 address in the guest', r.describe())


def test_cleanup(t):
    t.status(d.request('DELETE', '/v1/sandboxes/iso-a', token=KA), 204, 'delete iso-a')
    t.status(d.request('DELETE', '/v1/sandboxes/iso-b', token=KB), 204, 'delete iso-b')
    d.stop()
    t.eq(d.leftovers(), [], 'no VM, VM dir or tap left')
    teardown_world()
    t.ok(not os.path.exists('/run/netns/%s' % NS_META), 'the test namespace is gone')


if __name__ == '__main__':
    sys.argv[1:] = []
    vmtest.main(t, clock, test_setup, test_socket_sweep, test_network_sweep, test_cleanup)
