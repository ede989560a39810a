#!/usr/bin/env python3
# vm: a sandbox's life in a real microVM (States and transitions): create,
# what the guest looks like, pause/wake (processes and /tmp kept), stop/wake
# (a fresh boot on the same disk), sub-API calls waking a sleeping sandbox,
# PATCH env, the events of each step, and delete (VM, disk and tap gone).

import time

import vmtest
from vmtest import VmBoxd, Tap, run, sh, state, wait_event, reason_of, detail_of

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
EV = d.events(KEY)
EV.wait_connected(5)
S = {}          # the sandbox of the file: its record after create
MARK = 'sleep 1717'


def guest_facts(sandbox):
    """boot id, the marker process's pid ('' when none), the /tmp and disk files."""
    r = sh(d, KEY, sandbox, 'cat /proc/sys/kernel/random/boot_id; pgrep -f "^%s$" || echo; '
                            'cat /tmp/e2e-tmp 2>/dev/null || echo NO-TMP; '
                            'cat /home/box/e2e-disk 2>/dev/null || echo NO-DISK' % MARK)
    lines = r.out.splitlines() + [''] * 4
    return {'status': r.status, 'boot': lines[0], 'pid': lines[1], 'tmp': lines[2], 'disk': lines[3]}


def test_create(t):
    t.ok(EV.status == 200, 'event stream open', EV.status)
    with clock('create (first, may build the template snapshot)') as c:
        r = d.request('POST', '/v1/sandboxes', {'name': 'life', 'env': {'X': 'one'},
                                                'resources': {'disk_gib': 7}}, token=KEY, timeout=300)
    t.status(r, 201, 'create')
    body = r[2] or {}
    S.update(body)
    t.eq(body.get('state'), 'running', 'created sandbox is running')
    t.eq(body.get('resources'), {'cpus': 2, 'memory_mib': 2048, 'disk_gib': 7},
         'resources: the template\'s CPUs and memory, the disk asked for')
    t.ok(c.seconds < 120, 'first create within 120 s (%.1f s)' % c.seconds)
    e = wait_event(EV, body.get('id'), 'sandbox.created', 10)
    t.ok(e is not None, 'event sandbox.created')
    e = wait_event(EV, body.get('id'), 'sandbox.running', 10)
    t.ok(e is not None, 'event sandbox.running when it comes up', getattr(EV, 'skipped', None))
    t.comment('sandbox.running at create: detail %r' % detail_of(e))

    with clock('create (second: a fork from the warm pool)') as c:
        r = d.request('POST', '/v1/sandboxes', {}, token=KEY, timeout=120)
    t.status(r, 201, 'create with a generated name')
    other = r[2] or {}
    t.ok(c.seconds < 30, 'second create within 30 s (%.1f s)' % c.seconds)
    r2 = run(d, KEY, other.get('name', '?'), ['hostname'])
    t.eq(r2.out.strip(), other.get('name'), 'hostname = the generated name')
    with clock('create + first exec/run true') as c:
        r = d.request('POST', '/v1/sandboxes', {'name': 'third'}, token=KEY, timeout=120)
        r3 = run(d, KEY, 'third', ['true'])
    t.ok(r[0] == 201 and r3.status == 200 and r3.exit_code == 0, 'create then exec/run true',
         (r[0], r3.describe()))
    for name in (other.get('name'), 'third'):
        t.status(d.request('DELETE', '/v1/sandboxes/%s' % name, token=KEY), 204, 'delete %s' % name)


def test_guest(t):
    r = run(d, KEY, 'life', ['id', '-u'])
    t.eq((r.status, r.out), (200, '1000\n'), 'id -u: 1000 (box, the default user)')
    r = run(d, KEY, 'life', ['id', '-u'], user='root')
    t.eq((r.status, r.out), (200, '0\n'), 'id -u as root: 0')
    r = run(d, KEY, 'life', ['hostname'])
    t.eq(r.out, 'life\n', 'hostname = sandbox name')
    r = run(d, KEY, 'life', ['cat', '/etc/hostname'])
    t.comment('/etc/hostname: %r' % r.out)
    r = run(d, KEY, 'life', ['df', '-B1', '--output=size', '/'])
    size = int(r.out.split()[-1]) if r.status == 200 and r.out.split()[-1:] and r.out.split()[-1].isdigit() else 0
    want = 7 << 30
    t.ok(0.9 * want <= size <= want, 'df /: the disk is resources.disk_gib (7 GiB) big (%d bytes)' % size,
         r.describe())
    r = run(d, KEY, 'life', ['sh', '-c', 'grep " /tmp " /proc/mounts'])
    t.ok(r.status == 200 and r.out.split()[:3][2:] == ['tmpfs'], '/tmp is a tmpfs', r.describe())
    r = run(d, KEY, 'life', ['sh', '-c', 'touch /tmp/x && ls -ld /tmp'])
    t.ok(r.out.startswith('drwxrwxrwt'), 'box may write /tmp; it is sticky and world-writable', r.describe())
    tools = 'python3 node git curl wget jq sudo pip3 npm ps ip less unzip xz ssh make vi'
    r = sh(d, KEY, 'life', 'for p in %s; do command -v $p >/dev/null || echo "missing $p"; done; '
                           'python3 -m venv --help >/dev/null || echo "missing venv"' % tools)
    t.ok((r.status, r.exit_code, r.out) == (200, 0, ''), 'the base image has the usual tools (%s, venv)' % tools,
         r.describe())


def test_pause_wake(t):
    sid = S.get('id')
    r = sh(d, KEY, 'life', 'setsid sh -c "exec %s" </dev/null >/dev/null 2>&1 & '
                           'echo tmp-data > /tmp/e2e-tmp; echo disk-data > /home/box/e2e-disk; sync' % MARK)
    t.eq((r.status, r.exit_code), (200, 0), 'start a background process, write a /tmp and a disk file')
    time.sleep(0.5)
    before = guest_facts('life')
    t.ok(before['pid'].isdigit() and before['tmp'] == 'tmp-data' and before['disk'] == 'disk-data',
         'the process runs, both files are there', before)

    with clock('pause (running)'):
        r = d.request('POST', '/v1/sandboxes/life/pause', token=KEY)
    t.status(r, 200, 'pause')
    t.eq((r[2] or {}).get('state'), 'paused', 'pause answers the sandbox, paused')
    e = wait_event(EV, sid, 'sandbox.paused', 10)
    t.eq(reason_of(e), 'request', 'event sandbox.paused reason request')
    t.eq(state(d, KEY, 'life'), 'paused', 'GET: paused (reading does not wake)')
    r = d.request('GET', '/v1/sandboxes', token=KEY)
    t.eq([x['state'] for x in (r[2] or {}).get('sandboxes', []) if x['name'] == 'life'], ['paused'],
         'list: paused (listing does not wake)')
    r = d.request('POST', '/v1/sandboxes/life/pause', token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'paused', 'pause twice: 200, a no-op', r[3][:300])

    with clock('wake (paused)'):
        r = d.request('POST', '/v1/sandboxes/life/wake', token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake: 200 running', r[3][:300])
    e = wait_event(EV, sid, 'sandbox.running', 10)
    t.eq(detail_of(e).get('from'), 'paused', 'event sandbox.running from paused')
    extra = [x for x in getattr(EV, 'skipped', []) if (x.get('data') or {}).get('sandbox') == sid]
    t.eq([x.get('event') for x in extra], [], 'the second pause sent no event')
    after = guest_facts('life')
    t.eq(after, before, 'after pause/wake: same boot, same process (pid), /tmp and disk files kept')
    r = d.request('POST', '/v1/sandboxes/life/wake', token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake a running sandbox: 200, a no-op',
         r[3][:300])

    # a sub-API call wakes a paused sandbox
    t.status(d.request('POST', '/v1/sandboxes/life/pause', token=KEY), 200, 'pause again')
    wait_event(EV, sid, 'sandbox.paused', 10)
    with clock('exec/run on a paused sandbox (wakes it)'):
        r = run(d, KEY, 'life', ['cat', '/tmp/e2e-tmp'])
    t.eq((r.status, r.out), (200, 'tmp-data\n'), 'exec/run on a paused sandbox: 200, it ran')
    t.eq(state(d, KEY, 'life'), 'running', 'state running after the call')
    e = wait_event(EV, sid, 'sandbox.running', 10)
    t.eq(detail_of(e).get('from'), 'paused', 'event sandbox.running from paused (woken by the call)')
    t.eq(guest_facts('life')['pid'], before['pid'], 'the process is still the same')


def test_env(t):
    r = d.request('PATCH', '/v1/sandboxes/life', {'env': {'X': 'two', 'Y': 'new'}}, token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('env') == {'X': 'two', 'Y': 'new'}, 'PATCH env: 200, env replaced',
         r[3][:300])
    r = run(d, KEY, 'life', ['printenv', 'X', 'Y'])
    t.eq((r.status, r.out), (200, 'two\nnew\n'), 'the new env reaches a process started afterwards')
    pid = guest_facts('life')['pid']
    r = run(d, KEY, 'life', ['sh', '-c', 'tr "\\0" "\\n" < /proc/%s/environ | grep "^X="' % pid], user='root')
    t.eq(r.out, 'X=one\n', 'a process started before keeps the env it had')
    t.status(d.request('POST', '/v1/sandboxes/life/pause', token=KEY), 200, 'pause')
    t.status(d.request('POST', '/v1/sandboxes/life/wake', token=KEY), 200, 'wake')
    r = run(d, KEY, 'life', ['printenv', 'X', 'Y'])
    t.eq((r.status, r.out), (200, 'two\nnew\n'), 'the env survives a pause/wake')
    r = d.request('PATCH', '/v1/sandboxes/life', {'env': {'X': 'three'}}, token=KEY)
    t.status(r, 200, 'PATCH env again (Y removed)')
    r = run(d, KEY, 'life', ['sh', '-c', 'echo "$X/${Y-unset}"'])
    t.eq(r.out, 'three/unset\n', 'a replaced env drops the variables left out')
    r = d.request('PATCH', '/v1/sandboxes/life', {'labels': {'k': 'v'}}, token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('env') == {'X': 'three'}, 'a PATCH without env keeps it',
         r[3][:300])


def test_stop_wake(t):
    sid = S.get('id')
    before = guest_facts('life')
    with clock('stop (running)'):
        r = d.request('POST', '/v1/sandboxes/life/stop', token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'stopped', 'stop: 200 stopped', r[3][:300])
    e = wait_event(EV, sid, 'sandbox.stopped', 10)
    t.eq(reason_of(e), 'request', 'event sandbox.stopped reason request')
    r = d.request('POST', '/v1/sandboxes/life/stop', token=KEY)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'stopped', 'stop twice: 200, a no-op', r[3][:300])
    t.error(d.request('POST', '/v1/sandboxes/life/pause', token=KEY), 409, 'conflict',
            'pause of a stopped sandbox')
    t.eq(state(d, KEY, 'life'), 'stopped', 'still stopped after the refused pause')
    dom = d.domain_of(sid)
    t.ok(dom is not None and dom not in vmtest.running_domains(), 'no QEMU runs for a stopped sandbox', dom)

    with clock('exec/run on a stopped sandbox (boots it)'):
        r = run(d, KEY, 'life', ['printenv', 'X'], timeout=300)
    t.eq((r.status, r.out), (200, 'three\n'), 'exec/run on a stopped sandbox: 200; the env survives stop/wake')
    t.eq(state(d, KEY, 'life'), 'running', 'state running after the call')
    e = wait_event(EV, sid, 'sandbox.running', 10)
    t.eq(detail_of(e).get('from'), 'stopped', 'event sandbox.running from stopped')
    after = guest_facts('life')
    t.ok(after['boot'] != before['boot'] and after['boot'] != '', 'a fresh boot (new boot id)',
         (before['boot'], after['boot']))
    t.eq((after['disk'], after['tmp'], after['pid']), ('disk-data', 'NO-TMP', ''),
         'after stop/wake: the disk file kept; the /tmp file and the process gone')
    r = run(d, KEY, 'life', ['hostname'])
    t.eq(r.out, 'life\n', 'hostname after a fresh boot')
    r = run(d, KEY, 'life', ['df', '-B1', '--output=size', '/'])
    size = int(r.out.split()[-1]) if r.out.split()[-1:] and r.out.split()[-1].isdigit() else 0
    t.ok(0.9 * (7 << 30) <= size <= (7 << 30), 'the disk keeps its size after a boot (%d)' % size)
    r = sh(d, KEY, 'life', 'grep " /tmp " /proc/mounts')
    t.ok(r.out.split()[2:3] == ['tmpfs'], '/tmp is a tmpfs after a boot', r.describe())

    t.status(d.request('POST', '/v1/sandboxes/life/stop', token=KEY), 200, 'stop again')
    wait_event(EV, sid, 'sandbox.stopped', 10)
    with clock('wake (stopped)'):
        r = d.request('POST', '/v1/sandboxes/life/wake', token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake from stopped: 200 running', r[3][:300])
    e = wait_event(EV, sid, 'sandbox.running', 10)
    t.eq(detail_of(e).get('from'), 'stopped', 'event sandbox.running from stopped (wake)')
    t.eq(guest_facts('life')['disk'], 'disk-data', 'disk file still there')


def test_delete(t):
    sid = S.get('id')
    dom = d.domain_of(sid)
    vm_dir = d.vm_path(sid)
    tap = (d.net_records().get(sid) or {}).get('ifname')
    t.ok(dom in vmtest.all_domains(), 'the sandbox has its libvirt domain', dom)
    t.ok(vm_dir is not None and vmtest.os.path.exists(vmtest.os.path.join(vm_dir, 'disk.qcow2')),
         'the sandbox has its disk file', vm_dir)
    t.ok(tap is not None and vmtest.os.path.exists('/sys/class/net/%s' % tap), 'the sandbox has its tap', tap)
    with clock('delete (running)'):
        r = d.request('DELETE', '/v1/sandboxes/life', token=KEY)
    t.status(r, 204, 'delete')
    t.eq(r[3], b'', 'delete answers no body')
    t.error(d.request('GET', '/v1/sandboxes/life', token=KEY), 404, 'not_found', 'GET after delete')
    t.error(d.request('DELETE', '/v1/sandboxes/life', token=KEY), 404, 'not_found', 'delete twice')
    t.error(d.request('POST', '/v1/sandboxes/life/exec/run', {'cmd': ['true']}, token=KEY), 404, 'not_found',
            'exec/run after delete')
    e = wait_event(EV, sid, 'sandbox.deleted', 10)
    t.eq(reason_of(e), 'request', 'event sandbox.deleted reason request')
    t.ok(dom not in vmtest.all_domains(), 'virsh list --all does not show its domain', dom)
    t.ok(not vmtest.os.path.exists(vm_dir), 'its disk and VM files are gone', vm_dir)
    t.ok(not vmtest.os.path.exists('/sys/class/net/%s' % tap), 'its tap is gone', tap)
    t.eq(d.vm_records(), {}, 'the plugin keeps no record of it')
    r = d.request('GET', '/v1/sandboxes', token=KEY)
    t.eq((r[2] or {}).get('sandboxes'), [], 'no sandbox left')

    # a paused one goes as well
    s = d.create_sandbox(KEY, {'name': 'paused-del'})
    t.status(d.request('POST', '/v1/sandboxes/paused-del/pause', token=KEY), 200, 'pause another sandbox')
    dom = d.domain_of(s['id'])
    t.status(d.request('DELETE', '/v1/sandboxes/paused-del', token=KEY), 204, 'delete it while paused')
    t.ok(dom is not None and dom not in vmtest.all_domains(), 'its domain is gone', dom)
    EV.close()
    d.stop()
    t.eq(d.leftovers(), [], 'after the last delete and a SIGTERM, boxd leaves no VM, VM dir or tap behind')


if __name__ == '__main__':
    vmtest.main(t, clock, test_create, test_guest, test_pause_wake, test_env, test_stop_wake, test_delete)
