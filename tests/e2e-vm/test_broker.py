#!/usr/bin/env python3
# vm: the secrets broker (issue #17 item 5) from inside real guests against
# a test internet in network namespaces on this machine (broker_world.py:
# HTTPS echo, reflecting and WebSocket servers under a test CA the broker
# is told to trust, one under a rogue CA, git over HTTPS; nothing leaves
# the host).  The servers log what they received; the guests only ever
# hold placeholders.  The clients run with the guest's own trust (the
# broker CA in the system bundle and the exported variables).
#
# One boxd, two sandboxes: "br-a" (unrestricted; secrets TOKEN, HDR with
# inject, PFX with a path-prefix host) for the clients, every replacement
# place, the refusals, a value replaced while it runs, and at the end a
# memory checkpoint whose RAM file and the disk are searched for the values;
# "br-r" (restricted, one rule for another name; secret TOKEN) reaches the
# secret's host on 443 without a rule for it.

import base64
import json
import os
import secrets as pysecrets
import socket
import ssl

import vmtest
from vmtest import VmBoxd, Tap, run, sh
from broker_world import ADDR, BrokerWorld, World, host

HERE = os.path.dirname(os.path.abspath(__file__))
t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
W = BrokerWorld('broker')


def value(tag):
    """A distinctive random value (what the memory and disk are searched for)."""
    return 'bv%s-%s' % (tag, pysecrets.token_hex(20))


V1, V2, VH, VP = value('tok'), value('rot'), value('hdr'), value('pfx')
P_TOKEN, P_HDR, P_PFX = '__box_token__', '__box_hdr__', '__box_pfx__'
GUEST_CA = '/tmp/test-ca.pem'

try:
    with clock('test internet (namespaces, certificates, servers)'):
        World.sweep_dead()
        vmtest.atexit.register(W.teardown)
        W.make()
except Exception as e:   # noqa: BLE001
    W.teardown()
    vmtest.bail_out('cannot make the test internet: %s' % e)

d = VmBoxd(t, config={'boxd': {'broker': 'broker'},
                      'plugin.broker': {'ca_bundle': W.ca},
                      'plugin.nftables': {'dns_upstream': '%s:53' % W.inet}})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('broker'))
IDS = {}


def put_secret(name, val, hosts, inject=None):
    body = {'value': val, 'hosts': hosts}
    if inject is not None:
        body['inject'] = inject
    return d.request('PUT', '/v1/secrets/%s' % name, body, token=KEY)


def records(server, since=0):
    return W.records(server)[since:]


def header(rec, name):
    """Every value of header @name in a logged request, in order."""
    return [v for k, v in (rec or {}).get('headers', []) if k.lower() == name.lower()]


def by_id(server, out):
    """The logged request whose id the client printed (the echo's answer)."""
    try:
        rid = json.loads(out.strip().splitlines()[-1])['id']
    except (ValueError, KeyError, IndexError, TypeError):
        return None
    return next((r for r in W.records(server) if r.get('id') == rid), None)


def client(sandbox, *args, timeout=120):
    r = run(d, KEY, sandbox, ['python3', '/tmp/bc.py'] + list(args), timeout=timeout)
    try:
        return json.loads(r.out.strip().splitlines()[-1]), r
    except (ValueError, IndexError):
        return {'error': 'no answer'}, r


def basic(user, pw):
    return 'Basic ' + base64.b64encode(('%s:%s' % (user, pw)).encode()).decode()


def test_setup(t):
    t.status(put_secret('TOKEN', V1, [host(x) for x in ('echo', 'reflect', 'ws', 'bad')]), 200,
             'PUT secret TOKEN (inject null)')
    t.status(put_secret('HDR', VH, [host('inj')], {'header': 'Authorization', 'format': 'Bearer {value}'}), 200,
             'PUT secret HDR (inject Authorization: Bearer {value})')
    t.status(put_secret('PFX', VP, [host('pfx') + '/v1']), 200, 'PUT secret PFX (a path-prefix host)')
    r = d.request('POST', '/v1/sandboxes', {'name': 'br-x', 'env': {'TOKEN': 'mine'}, 'secrets': ['TOKEN']},
                  token=KEY)
    t.error(r, 400, 'invalid', 'a sandbox cannot have a secret\'s name in its env')
    r = d.request('GET', '/v1/secrets/TOKEN', token=KEY)
    t.ok(r[0] == 200 and r[2].get('placeholder') == P_TOKEN and V1.encode() not in r[3],
         'GET /v1/secrets/TOKEN: the placeholder, never the value', r[3][:300])
    for name, body in (('br-a', {'secrets': ['TOKEN', 'HDR', 'PFX']}),
                       ('br-r', {'secrets': ['TOKEN'],
                                 'network': {'egress': [{'domain': host('plain'), 'action': 'allow'}]}})):
        with clock('create %s' % name):
            r = d.request('POST', '/v1/sandboxes', dict(body, name=name), token=KEY, timeout=300)
        t.status(r, 201, 'create %s with secrets %s' % (name, body['secrets']))
        if r[0] != 201:
            continue
        IDS[name] = r[2]['id']
        t.eq(sorted(r[2].get('secrets') or []), sorted(body['secrets']), '%s lists its secrets' % name)
        copy_in(t, name)
    t.error(d.request('DELETE', '/v1/secrets/TOKEN', token=KEY), 409, 'conflict',
            'deleting a secret a sandbox uses is 409 conflict')


def copy_in(t, name):
    """The guest client and the test CA into sandbox @name."""
    for path, data in (('/tmp/bc.py', open(os.path.join(HERE, 'broker_client.py'), 'rb').read()),
                       (GUEST_CA, open(W.ca, 'rb').read())):
        r = run(d, KEY, name, ['sh', '-c', 'cat > %s' % path], stdin=data)
        t.eq((r.status, r.exit_code), (200, 0), '%s: %s copied in' % (name, path))


def test_env(t):
    r = run(d, KEY, 'br-a', ['env'])
    env = dict(x.split('=', 1) for x in r.out.splitlines() if '=' in x)
    t.eq((env.get('TOKEN'), env.get('HDR'), env.get('PFX')), (P_TOKEN, P_HDR, P_PFX),
         'exec: each secret\'s variable holds its placeholder')
    t.eq(env.get('NODE_EXTRA_CA_CERTS'), '/etc/box/ca.pem', 'exec: NODE_EXTRA_CA_CERTS=/etc/box/ca.pem')
    for var in ('SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'CARGO_HTTP_CAINFO'):
        t.ok(env.get(var), 'exec: %s is set' % var, env.get(var))
    t.eq(env.get('UV_NATIVE_TLS'), '1', 'exec: UV_NATIVE_TLS=1')
    t.ok(not any(v in r.out for v in (V1, VH, VP)), 'exec: no value in the environment')
    r = sh(d, KEY, 'br-a', 'grep -c "BEGIN CERTIFICATE" /etc/box/ca.pem; '
           'grep -qxF "$(sed -n 2p /etc/box/ca.pem)" /etc/ssl/certs/ca-certificates.crt && echo in-bundle')
    t.ok(r.out.split()[:1] == ['1'] and 'in-bundle' in r.out,
         'the broker CA is /etc/box/ca.pem and in the system bundle', r.describe())
    # the warm pool's domain took the CA as it warmed up (the engine gives
    # it to the hypervisor): its files are older than the create's
    # set-hostname, and the create's own trust-ca found them in place
    r = sh(d, KEY, 'br-a', 'stat -c %.9Y /etc/box/ca.pem /etc/ssl/certs/ca-certificates.crt /etc/hostname')
    times = [float(x) for x in r.out.split()] if r.exit_code == 0 else []
    t.ok(len(times) == 3 and max(times[:2]) < times[2],
         'the CA files were written before the create (in the warm pool), not by it', r.describe())
    res, r = client('br-a', 'peer', host('echo'), '-')
    t.ok(res.get('issuer') and res.get('issuer') != 'box broker test CA' and res.get('status', '').endswith('200 OK'),
         'a secret host\'s certificate comes from the broker CA, trusted by the guest', (res, r.describe()))
    t.eq(res.get('alpn'), 'http/1.1', 'an intercepted connection offers only http/1.1 in ALPN')


def test_places(t):
    """inject null: path, query, each header, Basic; the body unchanged."""
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 "https://%s/c/$TOKEN?k=$TOKEN&j=x$TOKEN" '
           '-H "X-Token: $TOKEN" -H "X-Two: a-$TOKEN-b" -H "X-Pfx: $PFX" -u "u:$TOKEN" '
           '--data-binary "body $TOKEN"' % host('echo'))
    rec = by_id('echo', r.out)
    t.ok(rec is not None, 'curl: the echo server answered', r.describe())
    rec = rec or {}
    t.eq(rec.get('path'), '/c/%s?k=%s&j=x%s' % (V1, V1, V1), 'curl: the path and the query carry the value')
    t.eq(header(rec, 'x-token'), [V1], 'curl: a header carries the value')
    t.eq(header(rec, 'x-two'), ['a-%s-b' % V1], 'curl: inside a header value too')
    t.eq(header(rec, 'authorization'), [basic('u', V1)], 'curl: the Basic credential (decoded, replaced, re-encoded)')
    t.eq(header(rec, 'x-pfx'), [P_PFX], 'curl: another secret\'s placeholder for a host it does not name goes as is')
    t.eq(rec.get('body'), 'body ' + P_TOKEN, 'curl: the body is not changed')


def test_clients(t):
    res, r = client('br-a', 'urllib', 'https://%s/py?k=%s' % (host('echo'), P_TOKEN))
    rec = by_id('echo', res.get('body', ''))
    t.ok(rec and rec['path'] == '/py?k=' + V1 and header(rec, 'x-token') == [V1],
         'Python urllib: the server got the value', (res, r.describe()))
    res, r = client('br-a', 'requests', 'https://%s/rq?k=%s' % (host('echo'), P_TOKEN))
    rec = by_id('echo', res.get('body', ''))
    t.ok(rec and rec['path'] == '/rq?k=' + V1 and header(rec, 'x-token') == [V1],
         'Python %s: the server got the value' % res.get('which', 'requests'), (res, r.describe()))
    js = ('fetch("https://%s/node?k="+process.env.TOKEN,{headers:{"x-token":process.env.TOKEN}})'
          '.then(r=>r.text()).then(b=>console.log(b)).catch(e=>{console.log("error "+e+" "+e.cause);})'
          % host('echo'))
    r = run(d, KEY, 'br-a', ['node', '-e', js], timeout=120)
    rec = by_id('echo', r.out)
    t.ok(rec and rec['path'] == '/node?k=' + V1 and header(rec, 'x-token') == [V1],
         'Node fetch: the server got the value', r.describe())
    before = len(W.records('echo'))
    url = 'https://u:$TOKEN@%s/git/repo.git' % host('echo')
    r = sh(d, KEY, 'br-a', 'git ls-remote %s && git clone -q %s /tmp/clone && cat /tmp/clone/README && '
           'git -C /tmp/clone config remote.origin.url' % (url, url), timeout=180)
    git = [x for x in records('echo', before) if x['path'].startswith('/git/')]
    t.ok(r.exit_code == 0 and 'refs/heads/main' in r.out and 'hello' in r.out,
         'git ls-remote and clone over HTTPS with the placeholder as the URL\'s password', r.describe())
    t.ok(git and basic('u', V1) in [a for x in git for a in header(x, 'authorization')],
         'git: the server got the value in the Basic credential', [header(x, 'authorization') for x in git])
    t.ok(P_TOKEN in r.out and V1 not in r.out, 'git: the clone\'s remote URL holds the placeholder')


def test_websocket(t):
    before = len(W.records('ws'))
    res, r = client('br-a', 'ws', host('ws'))
    recs = records('ws', before)
    up = next((x for x in recs if 'headers' in x), {})
    msgs = [x['ws'] for x in recs if 'ws' in x]
    t.ok(res.get('status', '').startswith('HTTP/1.1 101') and res.get('echo') == 'msg ' + P_TOKEN,
         'WebSocket: upgraded through the broker, the message echoed', (res, r.describe()))
    t.eq(header(up, 'x-token'), [V1], 'WebSocket: the upgrade request\'s header carries the value')
    t.eq(msgs, ['msg ' + P_TOKEN], 'WebSocket: the message is not changed')


def test_inject(t):
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 https://%s/i -H "Authorization: Bearer mine" -H "X-Token: $TOKEN"'
           ' && curl -sS --max-time 30 https://%s/j' % (host('inj'), host('inj')))
    lines = r.out.strip().splitlines()
    one, two = (by_id('echo', lines[0]) if lines else None), (by_id('echo', lines[-1]) if len(lines) > 1 else None)
    t.eq(header(one, 'authorization'), ['Bearer ' + VH], 'inject: the header replaces the sandbox\'s own')
    t.eq(header(two, 'authorization'), ['Bearer ' + VH], 'inject: the header is set on a request without it')
    t.eq(header(one, 'x-token'), [P_TOKEN], 'inject host: another secret\'s placeholder goes out as it is')


def test_prefix(t):
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 "https://%s/v1/a?k=$PFX" -H "X-P: $PFX" && '
           'curl -sS --max-time 30 "https://%s/v2/a?k=$PFX" -H "X-P: $PFX"' % (host('pfx'), host('pfx')))
    lines = r.out.strip().splitlines()
    one, two = (by_id('echo', lines[0]) if lines else None), (by_id('echo', lines[-1]) if len(lines) > 1 else None)
    t.ok(one and one['path'] == '/v1/a?k=' + VP and header(one, 'x-p') == [VP],
         'path prefix: the value under the prefix', (one, r.describe()))
    t.ok(two and two['path'] == '/v2/a?k=' + P_PFX and header(two, 'x-p') == [P_PFX],
         'path prefix: the placeholder elsewhere on the same host', two)


def test_not_named(t):
    before = len(W.records('plain'))
    res, r = client('br-a', 'peer', host('plain'), GUEST_CA)
    t.eq(res.get('issuer'), 'box broker test CA',
         'a host no secret names is not intercepted: the client sees the real server\'s certificate')
    recs = records('plain', before)
    t.eq([header(x, 'x-token') for x in recs], [[P_TOKEN]], 'and the placeholder goes out as it is')
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 https://%s/; echo "exit $?"' % host('plain'))
    t.ok('exit 60' in r.out, 'without the test CA the guest does not trust it (nobody re-signed it)', r.describe())


def test_refusals(t):
    before = len(W.records('reflect'))
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 -w "\\n%%{http_code}" https://%s/ -H "X-Reflect: $TOKEN"'
           % host('reflect'))
    body, _, code = r.out.rpartition('\n')
    try:
        err = json.loads(body).get('error') or {}
    except ValueError:
        err = {}
    t.ok(code == '502' and err.get('code') == 'broker_failed' and err.get('message'),
         'an answer carrying the value is 502 broker_failed in the error shape', r.describe())
    t.ok(V1 not in r.out, 'and the value does not reach the sandbox')
    t.eq([header(x, 'x-reflect') for x in records('reflect', before)], [[V1]],
         'the reflecting server did get the value')
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 https://%s/ -H "X-Reflect: harmless"' % host('reflect'))
    t.eq(r.out, 'harmless', 'control: an answer without the value passes')
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 -w "\\n%%{http_code}" https://%s/ -H "X-Token: $TOKEN"; '
           'echo " exit $?"' % host('bad'))
    # exit 60 would be the rogue certificate itself reaching the guest (not intercepted)
    t.ok(not r.out.strip().startswith('{"id"') and '\n200 ' not in r.out and 'exit 60' not in r.out,
         'an upstream certificate the broker\'s trust store does not verify is refused', r.describe())
    t.eq(W.records('bad'), [], 'the rogue server got no request')
    ctx = ssl.create_default_context(cafile=W.rogue_ca)
    try:
        with ctx.wrap_socket(socket.create_connection((ADDR['bad'], 443), timeout=10),
                             server_hostname=host('bad')) as s:
            s.sendall(b'GET /control HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' % host('bad').encode())
            s.recv(4096)
    except OSError:
        pass
    t.eq([x['path'] for x in W.records('bad')], ['/control'],
         'control: the rogue server answers a client that trusts its CA (from the host)')


def test_rotation(t):
    t.status(put_secret('TOKEN', V2, [host(x) for x in ('echo', 'reflect', 'ws', 'bad')]), 200,
             'PUT TOKEN: a new value')
    r = sh(d, KEY, 'br-a', 'curl -sS --max-time 30 https://%s/rot -H "X-Token: $TOKEN"' % host('echo'))
    t.eq(header(by_id('echo', r.out), 'x-token'), [V2], 'the next request of the running sandbox carries it')


def test_restricted(t):
    r = sh(d, KEY, 'br-r', 'curl -sS --max-time 30 https://%s/r -H "X-Token: $TOKEN"' % host('echo'))
    t.ok(header(by_id('echo', r.out), 'x-token') == [V2],
         'restricted: the secret\'s host is reached on 443 without a rule for it', r.describe())
    r = sh(d, KEY, 'br-r', 'curl -sS --max-time 30 --cacert %s https://%s/; echo " exit $?"'
           % (GUEST_CA, host('nope')))
    t.ok(r.out.strip().endswith(('exit 6', 'exit 35', 'exit 56')),
         'control: a name neither a rule nor a secret allows is refused', r.describe())
    r = sh(d, KEY, 'br-r', 'curl -sS --max-time 30 --cacert %s https://%s/' % (GUEST_CA, host('plain')))
    t.ok(by_id('plain', r.out) is not None, 'control: the name of its rule works', r.describe())


def grep_file(path, needles):
    """Which of @needles (bytes) occur in the file, read in 4 MiB chunks."""
    found, keep, tail = set(), max(len(x) for x in needles), b''
    with open(path, 'rb') as f:
        while True:
            chunk = f.read(4 << 20)
            if not chunk:
                return found
            buf = tail + chunk
            found.update(x for x in needles if x in buf)
            tail = buf[-keep:]


def grep_tree(root, needles):
    hits = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            p = os.path.join(dirpath, name)
            if os.path.isfile(p) and not os.path.islink(p):
                got = grep_file(p, needles)
                if got:
                    hits[p] = sorted(x.decode() for x in got)
    return hits


def test_no_value_at_rest(t):
    marker = value('marker')
    r = sh(d, KEY, 'br-a', 'printf %%s %s > /var/tmp/marker && sync' % marker)
    t.eq(r.exit_code, 0, 'br-a: a marker written in the guest and the disks synced')
    with clock('memory checkpoint of br-a'):
        r = d.request('POST', '/v1/sandboxes/br-a/checkpoints', {'memory': True}, token=KEY, timeout=300)
    t.status(r, 201, 'a memory checkpoint of br-a')
    cdir = os.path.join(vmtest.VM_DIR, 'checkpoints', '%s.%s' % (IDS['br-a'], (r[2] or {}).get('id')))
    values = [v.encode() for v in (V1, V2, VH, VP)] + [basic('u', v)[6:].encode() for v in (V1, V2)]
    with clock('search the checkpoint and the disk'):
        ckpt = grep_tree(cdir, values + [marker.encode()])
        disk = grep_tree(d.vm_path(IDS['br-a']) or '/nonexistent', values + [marker.encode()])
    t.ok(any(marker in v for v in ckpt.values()), 'control: the guest\'s marker is found in the checkpoint', ckpt)
    t.ok(any(marker in v for v in disk.values()), 'control: and in the sandbox\'s disk files', disk)
    t.eq({p: [v for v in got if v != marker] for p, got in ckpt.items() if got != [marker]}, {},
         'no value (nor its Basic form) in the memory checkpoint\'s files')
    t.eq({p: [v for v in got if v != marker] for p, got in disk.items() if got != [marker]}, {},
         'no value in the sandbox\'s disk files on the host')
    t.ok(not any(v in d.log_text() for v in (V1, V2, VH, VP)), 'no value in boxd\'s log')
    t.eq(grep_tree(d.data_dir, values), {}, 'no value in boxd\'s data directory (sealed at rest)')


def test_cleanup(t):
    vmtest.delete_all_and_stop(t, d, KEY)
    W.teardown()


if __name__ == '__main__':
    vmtest.main(t, clock, test_setup, test_env, test_places, test_clients, test_websocket, test_inject,
                test_prefix, test_not_named, test_refusals, test_rotation, test_restricted,
                test_no_value_at_rest, test_cleanup)
