#!/usr/bin/env python3
# vm: network isolation seen from inside real guests (the nftables plugin's
# recipe, plugins/nftables/README.md "A real-VM isolation test").
#
# There is no outside network here, so the test makes its own, only from
# addresses on this machine and namespaces it creates (removed at the end,
# whatever happens):
#   an "internet" namespace  a /28 of 203.0.113.0/24 (TEST-NET-3), e.g.
#                            .1 in it, .14 the node's end: a TCP server on port 80 and a
#                            DNS server answering every A query; boxd's
#                            resolver forwards to it (dns_upstream=)
#   a "LAN" namespace        172.31.N.2/24, the node's end 172.31.N.1
#                            (a private address of the node): a TCP server
#   the node                 a TCP server on every address
# Probes run in the guests with nftables-test-helper.py (connect: exit 0
# reached, 2 dropped, 3 refused); every "dropped" has a control showing the
# target answers someone.  A sandbox created with egress rules gets only TCP,
# and a reset for an address it never resolved (issue 16), until a PATCH
# lifts them.

import os
import subprocess
import time

import vmtest
from vmtest import VmBoxd, Tap, run, sh, sh_host, wait_file, host_connect

NS_INET = 'boxe2e-inet-%d' % os.getpid()
NS_LAN = 'boxe2e-lan-%d' % os.getpid()
VETH_INET = 'e2ei%d' % (os.getpid() % 100000)
VETH_LAN = 'e2el%d' % (os.getpid() % 100000)
# a /28 of TEST-NET-3 and a /24 of 172.31/16 of their own, should the
# test run twice on one host at the same time
NET_K = os.getpid() % 15
INET, INET_NODE, INET_LEN = '203.0.113.%d' % (16 * NET_K + 1), '203.0.113.%d' % (16 * NET_K + 14), 28
LAN_NET = 200 + os.getpid() % 50
LAN, LAN_NODE = '172.31.%d.2' % LAN_NET, '172.31.%d.1' % LAN_NET
DNS_ANSWER = '198.51.100.7'
NODE_PORT = vmtest.boxtest.free_port()
HELPER = vmtest.NET_HELPER
WORK = None
PROCS = []

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)


def teardown_world():
    for p in PROCS:
        if p.poll() is None:
            p.kill()
            p.wait()
    for ns in (NS_INET, NS_LAN):
        sh_host('ip netns del %s 2>/dev/null' % ns, check=False)
    for veth in (VETH_INET, VETH_LAN):
        sh_host('ip link del %s 2>/dev/null' % veth, check=False)


def serve(ns, bind, port, log):
    pre = ['ip', 'netns', 'exec', ns] if ns else []
    p = subprocess.Popen(pre + ['python3', HELPER, 'serve', bind, str(port), log],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    PROCS.append(p)
    return p


def sweep_dead_worlds():
    """The namespaces and veths of earlier runs killed before their
    teardown (their addresses could be ours)."""
    for line in sh_host('ip netns list', check=False).splitlines():
        ns = line.split()[0] if line.split() else ''
        pid = ns.rsplit('-', 1)[-1]
        if not ns.startswith(('boxe2e-inet-', 'boxe2e-lan-')) or not pid.isdigit() or \
           os.path.exists('/proc/' + pid):
            continue
        sh_host('ip netns del %s' % ns, check=False)
        sh_host('ip link del e2e%s%d 2>/dev/null' % ('i' if '-inet-' in ns else 'l', int(pid) % 100000),
                check=False)
        t.comment('removed what a killed run left: namespace %s' % ns)


def make_world():
    global WORK
    sweep_dead_worlds()
    WORK = vmtest.tempfile.mkdtemp(prefix='box-e2e-net-')
    vmtest.atexit.register(teardown_world)
    for ns, veth, inside, node, plen in ((NS_INET, VETH_INET, INET, INET_NODE, INET_LEN),
                                         (NS_LAN, VETH_LAN, LAN, LAN_NODE, 24)):
        sh_host('ip netns add %s' % ns)
        sh_host('ip link add %s type veth peer name eth0 netns %s' % (veth, ns))
        sh_host('ip addr add %s/%d dev %s && ip link set %s up' % (node, plen, veth, veth))
        sh_host('ip -n %s addr add %s/%d dev eth0 && ip -n %s link set eth0 up && ip -n %s link set lo up'
                % (ns, inside, plen, ns, ns))
        sh_host('ip -n %s route add default via %s' % (ns, node))
    serve(NS_INET, INET, 80, os.path.join(WORK, 'inet.log'))
    p = subprocess.Popen(['ip', 'netns', 'exec', NS_INET, 'python3', HELPER, 'dns-serve', INET, '53',
                          DNS_ANSWER, os.path.join(WORK, 'dns.ready')],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    PROCS.append(p)
    serve(NS_LAN, LAN, 8080, os.path.join(WORK, 'lan.log'))
    serve(None, '0.0.0.0', NODE_PORT, os.path.join(WORK, 'node.log'))
    serve(NS_INET, INET, 9100, os.path.join(WORK, 'inet9100.log'))
    p = subprocess.Popen(['ip', 'netns', 'exec', NS_INET, 'python3', HELPER, 'udp-serve', INET, '5000',
                          os.path.join(WORK, 'udp.log')],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    PROCS.append(p)
    for f in ('inet.log.ready', 'dns.ready', 'lan.log.ready', 'node.log.ready', 'inet9100.log.ready',
              'udp.log.ready'):
        if not wait_file(os.path.join(WORK, f)):
            raise RuntimeError('a test server did not start: %s' % f)


def guest_connect(sandbox, targets):
    """The same from inside a guest (/tmp/h.py), in parallel."""
    script = ' '.join('(python3 /tmp/h.py connect %s %s 2 >/dev/null; echo "%s:%s $?") &' % (h, p, h, p)
                      for h, p in targets) + ' wait'
    r = sh(d, KEY, sandbox, script, timeout_s=60)
    out = {}
    for line in r.out.splitlines():
        hp, _, code = line.partition(' ')
        h, _, p = hp.rpartition(':')
        out[(h, int(p))] = int(code)
    return out, r


try:
    with clock('test network (namespaces, servers)'):
        make_world()
except Exception as e:   # noqa: BLE001
    teardown_world()
    vmtest.bail_out('cannot make the test network: %s' % e)

d = VmBoxd(t, config={'plugin.nftables': {'dns_upstream': '%s:53' % INET}})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
NET = {}


def test_setup(t):
    with clock('create two sandboxes'):
        for name in ('net-a', 'net-b'):
            s = d.create_sandbox(KEY, {'name': name})
            NET[name] = dict(d.net_records().get(s['id']) or {}, id=s['id'])
    t.ok(all(NET[n].get('address') for n in NET), 'both sandboxes have a network attachment', NET)
    t.ok(NET['net-a'].get('address') != NET['net-b'].get('address'), 'each its own address')
    helper = open(HELPER, 'rb').read()
    for name in NET:
        r = run(d, KEY, name, ['sh', '-c', 'cat > /tmp/h.py'], stdin=helper)
        t.eq((r.status, r.exit_code), (200, 0), '%s: the probe helper copied in' % name)
    r = sh(d, KEY, 'net-b', 'setsid python3 /tmp/h.py serve 0.0.0.0 9000 /tmp/srv.log </dev/null >/dev/null 2>&1 & '
                            'for i in $(seq 100); do [ -e /tmp/srv.log.ready ] && break; sleep 0.1; done; '
                            'python3 /tmp/h.py connect 127.0.0.1 9000 2')
    t.eq((r.status, r.exit_code), (200, 0), 'net-b: a server on port 9000 that answers (control, from itself)')


def test_guest_network(t):
    a = NET['net-a']
    r = run(d, KEY, 'net-a', ['ip', '-4', '-o', 'addr', 'show', 'dev', 'eth0'])
    t.ok(r.status == 200 and (' %s/%s ' % (a.get('address'), a.get('prefix'))) in r.out,
         'the guest has eth0 with its address %s/%s' % (a.get('address'), a.get('prefix')), r.describe())
    r = run(d, KEY, 'net-a', ['ip', '-4', 'route', 'show', 'default'])
    t.ok(('via %s dev eth0' % a.get('gateway')) in r.out, 'default route via the gateway %s' % a.get('gateway'),
         r.describe())
    r = run(d, KEY, 'net-a', ['cat', '/etc/resolv.conf'])
    t.ok(('nameserver %s' % a.get('gateway')) in r.out, 'resolv.conf names the gateway', r.describe())


def test_internet(t):
    res, r = guest_connect('net-a', [(INET, 80)])
    t.ok(res.get((INET, 80)) == 0, 'net-a reaches the "internet" (203.0.113.1:80)', (res, r.describe()))
    with open(os.path.join(WORK, 'inet.log')) as f:
        peers = f.read().split()
    t.eq(peers[-1:], [INET_NODE], 'seen there as the node\'s uplink address (masquerade)')
    res, r = guest_connect('net-b', [(INET, 80)])
    t.ok(res.get((INET, 80)) == 0, 'net-b reaches it as well', (res, r.describe()))


def test_isolation(t):
    a, b = NET['net-a'], NET['net-b']
    node_addrs = [x.split()[3].split('/')[0] for x in sh_host('ip -4 -o addr').splitlines()
                  if len(x.split()) > 3]
    node_addrs = [x for x in node_addrs if not x.startswith('127.') and x not in (INET_NODE,)]
    t.comment('node addresses: %s' % ' '.join(node_addrs))
    controls = host_connect([('127.0.0.1', NODE_PORT), (LAN, 8080), (INET, 80), (LAN_NODE, NODE_PORT)])
    t.eq(controls, {('127.0.0.1', NODE_PORT): 0, (LAN, 8080): 0, (INET, 80): 0, (LAN_NODE, NODE_PORT): 0},
         'controls: the node\'s, the LAN\'s and the internet\'s servers answer the node')
    r = d.request('GET', '/v1/whoami', token=KEY)
    t.status(r, 200, 'control: boxd answers on its API port')

    targets = [(a['gateway'], d.port), (a['gateway'], NODE_PORT),
               (a['gateway'], int(d.config['plugin.nftables']['dns_port'])),
               (LAN_NODE, NODE_PORT), (LAN, 8080), (b['address'], 9000), (b['gateway'], NODE_PORT)]
    targets += [(x, NODE_PORT) for x in node_addrs if (x, NODE_PORT) not in targets]
    with clock('probes from net-a'):
        res, r = guest_connect('net-a', targets)
    labels = {(a['gateway'], d.port): 'the node: its gateway address, boxd\'s API port',
              (a['gateway'], NODE_PORT): 'the node: its gateway address, a port served on every address',
              (a['gateway'], int(d.config['plugin.nftables']['dns_port'])):
                  'the node: the resolver\'s own port, directly',
              (LAN_NODE, NODE_PORT): 'the node: its private LAN address %s' % LAN_NODE,
              (LAN, 8080): 'a host of the node\'s LAN (%s)' % LAN,
              (b['address'], 9000): 'another sandbox (net-b %s:9000)' % b['address'],
              (b['gateway'], NODE_PORT): 'the node: another sandbox\'s gateway'}
    for tg in targets:
        desc = labels.get(tg, 'the node: its address %s' % tg[0])
        t.ok(res.get(tg) == 2, 'net-a cannot reach %s (%s:%s): dropped' % (desc, tg[0], tg[1]),
             'connect exit code %r (0 reached, 3 refused, 2 dropped)\n%s' % (res.get(tg), r.describe()))
    with open(os.path.join(WORK, 'node.log')) as f:
        pool = d.config['plugin.nftables']['pool'].split('.0.0/')[0] + '.'
        t.ok(not any(x.startswith(pool) for x in f.read().split()), 'the node\'s server saw no sandbox')
    with open(os.path.join(WORK, 'lan.log')) as f:
        t.eq(f.read().split(), [LAN_NODE], 'the LAN server saw only the node\'s control')

    # nothing reaches into a sandbox
    res = host_connect([(b['address'], 9000)])
    t.eq(res, {(b['address'], 9000): 2}, 'the node cannot connect into net-b')
    sh_host('ip -n %s route add %s via %s' % (NS_INET, d.config['plugin.nftables']['pool'], INET_NODE))
    res = host_connect([(b['address'], 9000)], ns=NS_INET)
    t.eq(res, {(b['address'], 9000): 2}, 'the internet cannot connect into net-b (even routed to it)')
    r = run(d, KEY, 'net-b', ['cat', '/tmp/srv.log'])
    t.eq(r.out.split(), ['127.0.0.1'], 'net-b\'s server saw only its own control')


def test_dns(t):
    a = NET['net-a']
    r = run(d, KEY, 'net-a', ['getent', 'hosts', 'some-name.e2e.test'])
    t.ok(r.status == 200 and r.out.split()[:1] == [DNS_ANSWER],
         'getent hosts in the guest resolves through the gateway (%s)' % DNS_ANSWER, r.describe())
    for proto in ('udp', 'tcp'):
        r = run(d, KEY, 'net-a', ['python3', '/tmp/h.py', 'dns-query', a['gateway'], '53', 'x.e2e.test', proto, '4'])
        t.eq((r.status, r.out.strip()), (200, DNS_ANSWER), 'DNS over %s to the gateway answers' % proto)


def udp_arrived(sandbox, payload):
    r = run(d, KEY, sandbox, ['python3', '/tmp/h.py', 'udp-send', INET, '5000', payload])
    if r.status != 200 or r.exit_code != 0:
        return None
    for _ in range(20):
        with open(os.path.join(WORK, 'udp.log')) as f:
            if payload in f.read().split():
                return True
        time.sleep(0.1)
    return False


def test_restricted(t):
    """Egress rules given at create hold before the guest runs: only TCP,
    and a TCP connection to an address the guest never resolved is reset."""
    rules = [{'domain': 'svc.e2e.test', 'action': 'allow', 'ports': [9100]}]
    with clock('create a restricted sandbox'):
        s = d.create_sandbox(KEY, {'name': 'net-r', 'network': {'egress': rules}})
    NET['net-r'] = dict(d.net_records().get(s['id']) or {}, id=s['id'])
    t.eq(s.get('network', {}).get('egress'), rules, 'created with its rules')
    r = run(d, KEY, 'net-r', ['sh', '-c', 'cat > /tmp/h.py'], stdin=open(HELPER, 'rb').read())
    t.eq((r.status, r.exit_code), (200, 0), 'net-r: the probe helper copied in')
    res, r = guest_connect('net-r', [(INET, 9100)])
    t.ok(res.get((INET, 9100)) == 3, 'net-r: TCP to an address it never resolved is reset at once (refused)',
         (res, r.describe()))
    res, r = guest_connect('net-b', [(INET, 9100)])
    t.ok(res.get((INET, 9100)) == 0, 'control: net-b (unrestricted) reaches %s:9100' % INET,
         (res, r.describe()))
    t.eq(udp_arrived('net-r', 'from-restricted'), False, 'net-r: its UDP is dropped')
    t.eq(udp_arrived('net-b', 'from-open'), True, 'control: net-b\'s UDP arrives')

    r = d.request('PATCH', '/v1/sandboxes/net-r', {'network': {'egress': []}}, token=KEY)
    t.status(r, 200, 'PATCH net-r to the whole internet')
    res, r = guest_connect('net-r', [(INET, 9100)])
    t.ok(res.get((INET, 9100)) == 0, 'net-r reaches %s:9100 at once' % INET, (res, r.describe()))
    t.eq(udp_arrived('net-r', 'from-unrestricted'), True, 'net-r: its UDP arrives again')


def test_cleanup(t):
    for name in NET:
        t.status(d.request('DELETE', '/v1/sandboxes/%s' % name, token=KEY), 204, 'delete %s' % name)
    d.stop()
    t.eq(d.leftovers(), [], 'no VM, VM dir or tap left')
    teardown_world()
    t.ok(not os.path.exists('/run/netns/%s' % NS_INET), 'the test namespaces are gone')


if __name__ == '__main__':
    vmtest.main(t, clock, test_setup, test_guest_network, test_internet, test_isolation, test_dns, test_restricted,
                test_cleanup)
