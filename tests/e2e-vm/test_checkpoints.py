#!/usr/bin/env python3
# vm: checkpoints, restore and forks on real microVMs, the API-visible rules
# of issue 13 item 11: a process, its /tmp file and a detached session back
# after a memory restore; a disk-only restore boots fresh with the files;
# fork independence both ways and fork identity (address, hostname, random
# bytes); 1011 closes (exec, file watch, port stream) and SIGHUP on a memory
# checkpoint, 1011 on restore (exec, port stream);
# the in-sandbox POST /checkpoints answered before the pause and its caller
# carrying on, in the source and in a fork; restores keep auto-N memory
# checkpoints, the newest 5 (six restores in all), the pruned one's files gone;
# events, 404/400 and no wake for reading, listing and deleting.

import json
import os
import shlex
import time

import filetest  # noqa: F401  (first: puts tests/e2e-vm and tests/e2e on sys.path)
import streamtest
from streamtest import Frames, exec_ws, wait_session
import vmtest  # noqa: E402
from vmtest import Tap, VmBoxd  # noqa: E402
from filetest import guest

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('ckpt'))
with clock('create the source'):
    SRC = vmtest.setup_or_bail(d, lambda: d.create_sandbox(KEY, {'name': 'ck-src'}))
# A hypervisor plugin without checkpoints (the libvirt plugin before issue 13
# item 6) answers 501: nothing here can be checked then.
PROBE = d.request('POST', '/v1/sandboxes/ck-src/checkpoints', {'memory': False, 'comment': 'probe'},
                  token=KEY, timeout=300)
if PROBE[0] == 501:
    # (the atexit handler of vmtest.prepare() stops boxd and its VMs)
    vmtest.skip_all('the hypervisor plugin takes no checkpoints: %s' % PROBE[3][:200])
d.request('DELETE', '/v1/sandboxes/ck-src/checkpoints/v1', token=KEY)


def sh(script, sandbox='ck-src', **kw):
    return guest(d, KEY, sandbox, script, **kw)


def out(script, sandbox='ck-src'):
    r = sh(script, sandbox)
    return r.out.strip() if r.status == 200 else 'HTTP %s %s' % (r.status, r.describe())


def poll_out(script, sandbox='ck-src'):
    """out(), but an exec/run that a memory checkpoint cut (503: calls in
    flight end, as the spec says) is asked again."""
    for _ in range(20):
        r = sh(script, sandbox)
        if r.status == 200:
            return r.out.strip()
        time.sleep(0.5)
    return 'HTTP %s %s' % (r.status, r.describe())


def checkpoint(body, sandbox='ck-src'):
    return d.request('POST', '/v1/sandboxes/%s/checkpoints' % sandbox, body, token=KEY, timeout=300)


def restore(cp, sandbox='ck-src'):
    return d.request('POST', '/v1/sandboxes/%s/checkpoints/%s/restore' % (sandbox, cp), token=KEY,
                     timeout=300)


def ids(sandbox='ck-src'):
    r = d.request('GET', '/v1/sandboxes/%s/checkpoints' % sandbox, token=KEY)
    return [c['id'] for c in (r[2] or {}).get('checkpoints', [])]


def test_memory_restore(t):
    sh('rm -f /tmp/mark; echo one > /tmp/mark; setsid sleep 10000 >/dev/null 2>&1 < /dev/null & '
       'echo $! > /tmp/pid')
    w = exec_ws(d, KEY, 'ck-src', ['sleep', '10000'], detachable='true')
    sid = (w.recv_json(60) or {}).get('session')
    w.abort()
    with clock('memory checkpoint'):
        r = checkpoint({'comment': 'with a process'})
    t.status(r, 201, 'memory checkpoint v2')
    t.eq((r[2] or {}).get('id'), 'v2', 'its ID is v2 (the probe took v1, deleted: never reused)')
    sh('kill $(cat /tmp/pid); rm -f /tmp/mark')
    killed = d.request('POST', '/v1/sandboxes/ck-src/exec/sessions/%s/signal' % sid,
                                  {'signal': 'KILL'}, token=KEY)
    t.status(killed, 204, 'the detached session is killed after the checkpoint')
    with clock('restore v2'):
        r = restore('v2')
    t.status(r, 200, 'restore v2')
    t.eq((r[2] or {}).get('state'), 'running', 'running after the restore')
    t.eq(out('cat /tmp/mark'), 'one', 'the /tmp file is back')
    t.eq(out('kill -0 $(cat /tmp/pid) && echo alive'), 'alive', 'the process is back')
    s = wait_session(d, KEY, 'ck-src', sid, lambda s: s.get('exited') is False, 10)
    t.ok(s is not None and s.get('exited') is False and s.get('pid'),
         'the detached session is back, running (listed, not exited)', s)
    t.eq(ids()[-1], 'auto-1', 'the state before was kept as auto-1')


def test_disk_only(t):
    sh('echo disk > /var/tmp/disk-file; sync')
    r = checkpoint({'memory': False, 'comment': 'disk'})
    t.eq(((r[2] or {}).get('id'), (r[2] or {}).get('memory')), ('v3', False), 'disk-only checkpoint v3')
    t.eq(out('kill -0 $(cat /tmp/pid) && echo alive'), 'alive', 'a disk-only checkpoint ends nothing')
    t.ok(d.log_lines('disk-only checkpoint v3: disk snapshot in') != [] and
         d.log_lines('disk-only checkpoint v3: the guest was stopped') == [],
         'it was a disk snapshot: the guest\'s vCPUs never stopped (the libvirt plugin\'s log)')
    sh('rm -f /var/tmp/disk-file; echo later > /var/tmp/later; sync')
    with clock('restore v3 (disk only: a fresh boot)'):
        r = restore('v3')
    t.status(r, 200, 'restore v3')
    t.eq(out('cat /var/tmp/disk-file'), 'disk', 'the file of the disk checkpoint is back')
    t.eq(out('test -e /var/tmp/later && echo later || echo absent'), 'absent',
         'what was written after the checkpoint is not in it')
    t.eq(out('test -e /tmp/pid && kill -0 $(cat /tmp/pid) 2>/dev/null && echo alive || echo gone'), 'gone',
         'booted fresh: the process is gone')


ECHO = ('import socket,threading\n'
        's=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n'
        's.bind(("127.0.0.1",9000));s.listen(8)\n'
        'def serve(c):\n'
        '  for b in iter(lambda:c.recv(65536),b""):c.sendall(b)\n'
        'while True:threading.Thread(target=serve,args=(s.accept()[0],),daemon=True).start()\n')


def port_stream():
    """A port stream to the guest's echo server on 9000, checked with one
    byte echoed (None when the server never listened)."""
    end = time.time() + 60
    while time.time() < end:
        r = d.request('GET', '/v1/sandboxes/ck-src/ports', token=KEY)
        if any(p.get('port') == 9000 for p in ((r[2] or {}).get('ports') or [])):
            w = streamtest.ws(d, KEY, '/v1/sandboxes/ck-src/ports/9000/connect')
            w.send_binary(b'x')
            return w if w.recv_binary(30) == b'x' else None
        time.sleep(0.5)
    return None


def test_closes(t):
    sh('setsid python3 -c %s >/dev/null 2>&1 < /dev/null &' % shlex.quote(ECHO))
    pw = port_stream()
    t.ok(pw is not None, 'a port stream to the guest\'s echo server answers')
    sh('rm -f /tmp/hup')
    # "started" is the exec of sh, not its trap: under load the checkpoint's
    # SIGHUP can come before sh ran its first command (it then dies of the
    # signal's default action without writing /tmp/hup), so the shell says
    # when its trap is armed
    w = exec_ws(d, KEY, 'ck-src',
                ['sh', '-c', 'trap "echo hup > /tmp/hup; exit 0" HUP; echo armed; sleep 10000 & wait'])
    f = streamtest.read_until(w, lambda f: b'armed' in f.out(), 120)
    t.ok('started' in f.types() and b'armed' in f.out(), 'a non-detachable session runs, its trap armed',
         f.describe())
    watch = streamtest.ws(d, KEY, '/v1/sandboxes/ck-src/fs/watch?path=/tmp')
    r = checkpoint({})
    t.status(r, 201, 'memory checkpoint')
    f = Frames(w, timeout=60)
    t.eq(f.close_code, 1011, 'the exec socket closed with 1011')
    fw = Frames(watch, timeout=60)
    t.eq(fw.close_code, 1011, 'the file watch closed with 1011')
    if pw is not None:
        t.eq(Frames(pw, timeout=60).close_code, 1011, 'the port stream closed with 1011')
    end = time.time() + 30
    while time.time() < end and out('cat /tmp/hup 2>/dev/null') != 'hup':
        time.sleep(0.5)
    t.eq(out('cat /tmp/hup'), 'hup', 'the non-detachable session got SIGHUP (its trap ran)')
    w = exec_ws(d, KEY, 'ck-src', ['sleep', '10000'], detachable='true')
    w.recv_json(60)
    pw = port_stream()
    t.ok(pw is not None, 'a new port stream answers after the checkpoint')
    r = restore((r[2] or {}).get('id', 'v4'))
    t.status(r, 200, 'restore')
    t.eq(Frames(w, timeout=60).close_code, 1011, 'a session socket closes with 1011 on restore')
    if pw is not None:
        t.eq(Frames(pw, timeout=60).close_code, 1011, 'a port stream closes with 1011 on restore')


def test_fork(t):
    sh('echo src > /tmp/who; hostname > /tmp/src-host')
    r = checkpoint({'comment': 'for forks'})
    cp = (r[2] or {}).get('id')
    # the checkpoint's guest clock falls behind from here: the fork's must
    # be set again
    time.sleep(8)
    with clock('fork'):
        r = d.request('POST', '/v1/sandboxes', {'name': 'ck-fork', 'from': {'sandbox': 'ck-src', 'checkpoint': cp},
                                                'env': {'FORKED': 'yes'}}, token=KEY, timeout=300)
    t.status(r, 201, 'fork -> 201')
    t.eq(out('cat /tmp/who', 'ck-fork'), 'src', 'the fork has the source\'s /tmp file')
    t.eq(out('hostname', 'ck-fork'), 'ck-fork', 'its hostname is its own name')
    t.ok(out('hostname -I', 'ck-fork') != out('hostname -I'), 'its address differs',
         (out('hostname -I', 'ck-fork'), out('hostname -I')))
    mac = 'cat /sys/class/net/e*/address'
    t.ok(out(mac, 'ck-fork') != out(mac), 'its MAC differs', (out(mac, 'ck-fork'), out(mac)))
    guest_now = out('date +%s.%N', 'ck-fork')
    try:
        skew = abs(float(guest_now) - time.time())
    except ValueError:
        skew = None
    t.ok(skew is not None and skew < 4, 'its clock was set at the fork (not the checkpoint\'s, 8 s behind)',
         '%s s off' % skew)
    rnd = 'head -c 16 /dev/urandom | od -An -tx1'
    t.ok(out(rnd, 'ck-fork') != out(rnd), 'its random bytes differ')
    t.eq(out('echo $FORKED', 'ck-fork'), 'yes', 'its env applies')
    sh('echo f > /tmp/only-fork', 'ck-fork')
    sh('echo s > /tmp/only-src')
    t.eq(out('test -e /tmp/only-fork && echo yes || echo no'), 'no', 'the fork\'s write is not in the source')
    t.eq(out('test -e /tmp/only-src && echo yes || echo no', 'ck-fork'), 'no',
         'the source\'s write is not in the fork')
    t.status(d.request('DELETE', '/v1/sandboxes/ck-src/checkpoints/%s' % cp, token=KEY), 204,
             'delete the forked checkpoint')
    t.eq(out('cat /tmp/only-fork', 'ck-fork'), 'f', 'the fork is whole')
    r = checkpoint({}, 'ck-fork')
    t.eq((r[2] or {}).get('id'), 'v1', 'the fork\'s checkpoints start at v1')


def test_insandbox(t):
    """The caller waits for /tmp/go after its answer: the snapshot holds it
    waiting (taken after the answer, before it went on), so in a fork
    /tmp/after appears only once the fork's /tmp/go exists, as in the
    source."""
    script = ('curl -s -X POST --unix-socket /run/box/api.sock -d \'{"comment":"inside"}\' '
              'http://x/checkpoints > /tmp/answer; '
              'while [ ! -e /tmp/go ]; do sleep 0.2; done; echo after > /tmp/after')
    r = sh('rm -f /tmp/answer /tmp/after /tmp/go; setsid sh -c %s >/dev/null 2>&1 < /dev/null &'
           % json.dumps(script), user='box')
    t.eq(r.status, 200, 'a process in the guest posts /checkpoints')
    end = time.time() + 60
    answer = ''
    while time.time() < end and not answer:
        answer = poll_out('cat /tmp/answer 2>/dev/null')
        time.sleep(0.5)
    try:
        cp = json.loads(answer)
    except ValueError:
        cp = {}
    t.ok((cp.get('comment'), cp.get('memory'), cp.get('auto')) == ('inside', True, False),
         'it was answered a Checkpoint', answer)
    end = time.time() + 30
    while time.time() < end and cp.get('id') not in ids():
        time.sleep(0.5)
    t.ok(cp.get('id') in ids(), 'the checkpoint appears in the list', ids())
    sh('touch /tmp/go')
    end = time.time() + 30
    while time.time() < end and out('cat /tmp/after 2>/dev/null') != 'after':
        time.sleep(0.5)
    t.eq(out('cat /tmp/after'), 'after', 'the caller carried on after the answer')
    r = d.request('POST', '/v1/sandboxes', {'name': 'ck-inside', 'from': {'sandbox': 'ck-src',
                                                                            'checkpoint': cp.get('id', 'v0')}},
                  token=KEY, timeout=300)
    t.status(r, 201, 'fork of that checkpoint')
    t.eq(out('cat /tmp/after 2>/dev/null || echo waiting', 'ck-inside'), 'waiting',
         'in the fork the caller is still after its answer, waiting for /tmp/go')
    sh('touch /tmp/go', 'ck-inside')
    end = time.time() + 30
    while time.time() < end and out('cat /tmp/after 2>/dev/null', 'ck-inside') != 'after':
        time.sleep(0.5)
    t.eq(out('cat /tmp/after', 'ck-inside'), 'after', 'in the fork the caller carries on after the answer')
    r = sh('curl -s -X POST --unix-socket /run/box/api.sock -d \'{"memory":false}\' http://x/checkpoints',
           user='box')
    try:
        disk = json.loads(r.out)
    except ValueError:
        disk = {}
    t.ok(disk.get('memory') is False and disk.get('auto') is False,
         'an in-sandbox POST with memory false answers a disk-only Checkpoint', r.out)
    end = time.time() + 30
    while time.time() < end and disk.get('id') not in ids():
        time.sleep(0.5)
    t.ok(disk.get('id') in ids(), 'the disk-only checkpoint appears in the list', ids())


def test_auto_retention(t):
    """Each restore keeps the state first as auto-N, a real memory
    checkpoint of the plugin, and the newest 5 are kept: the three
    restores above made auto-1..3, three more here make six, and the sixth
    prunes the oldest with its files.  Deleting one removes its files."""
    before = [i for i in ids() if i.startswith('auto-')]
    first = checkpoint({'memory': False})
    cp = (first[2] or {}).get('id')
    for n in range(3):
        t.status(restore(cp), 200, 'restore %d of 3' % (n + 1))
    made = [i for i in ids() if i.startswith('auto-') and i not in before]
    t.ok(len(made) == 3, 'each restore kept one more automatic checkpoint', made)
    autos = [i for i in ids() if i.startswith('auto-')]
    t.ok(len(before + made) > 5, 'more than 5 restores were made in all', before + made)
    t.eq(autos, (before + made)[-5:], 'the newest 5 automatic checkpoints are kept, oldest first')
    for cid in (before + made)[:-5]:
        gone = os.path.join(vmtest.VM_DIR, 'checkpoints', '%s.%s' % (SRC['id'], cid))
        t.ok(not os.path.exists(gone), 'the pruned %s went with its files' % cid, gone)
    for cid in made:
        r = d.request('GET', '/v1/sandboxes/ck-src/checkpoints/' + cid, token=KEY)
        t.eq(((r[2] or {}).get('auto'), (r[2] or {}).get('memory')), (True, True),
             '%s is automatic and holds memory' % cid)
    if not made:
        return
    cdir = os.path.join(vmtest.VM_DIR, 'checkpoints', '%s.%s' % (SRC['id'], made[0]))
    t.ok(os.path.isdir(cdir), 'the plugin holds %s on disk' % made[0], cdir)
    t.status(d.request('DELETE', '/v1/sandboxes/ck-src/checkpoints/' + made[0], token=KEY), 204,
             'an automatic checkpoint can be deleted')
    t.ok(not os.path.exists(cdir), 'its files went with it', cdir)


def test_rules(t):
    """The API rules on real VMs: events in the spec's shape on the
    ?sandbox= stream; listing, reading and deleting a paused sandbox's
    checkpoints do not wake it, nor do a missing checkpoint (404) and an
    unknown field (400); a restore of it answers it running."""
    ev = d.events(KEY, 'sandbox=' + SRC['id'])
    t.ok(ev.wait_connected(10) and ev.status == 200, 'event stream ?sandbox= open')
    r = checkpoint({'comment': 'events'})
    cp = (r[2] or {}).get('id')
    e = vmtest.wait_event(ev, SRC['id'], 'checkpoint.created', 60)
    t.eq(vmtest.detail_of(e), {'checkpoint': cp, 'memory': True, 'auto': False},
         'checkpoint.created {checkpoint, memory, auto}')
    t.status(d.request('POST', '/v1/sandboxes/ck-src/pause', token=KEY, timeout=120), 200, 'pause ck-src')
    t.ok(cp in ids(), 'listed while paused')
    t.status(d.request('GET', '/v1/sandboxes/ck-src/checkpoints/' + cp, token=KEY), 200, 'read while paused')
    t.error(d.request('GET', '/v1/sandboxes/ck-src/checkpoints/v999', token=KEY), 404, 'not_found',
            'a missing checkpoint')
    t.error(d.request('POST', '/v1/sandboxes/ck-src/checkpoints', {'comment': 'x', 'colour': 'red'}, token=KEY),
            400, 'invalid', 'an unknown field')
    t.status(d.request('DELETE', '/v1/sandboxes/ck-src/checkpoints/' + cp, token=KEY), 204, 'delete while paused')
    e = vmtest.wait_event(ev, SRC['id'], 'checkpoint.deleted', 30)
    t.eq(vmtest.detail_of(e), {'checkpoint': cp}, 'checkpoint.deleted {checkpoint}')
    t.eq(vmtest.state(d, KEY, 'ck-src'), 'paused', 'none of these woke the sandbox')
    target = [i for i in ids() if not i.startswith('auto-')][-1]
    r = restore(target)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'restore of the paused sandbox: running',
         r[3][:300])
    e = vmtest.wait_event(ev, SRC['id'], 'checkpoint.restored', 60)
    auto = [i for i in ids() if i.startswith('auto-')][-1]
    t.eq(vmtest.detail_of(e), {'checkpoint': target, 'auto': auto}, 'checkpoint.restored {checkpoint, auto}')
    e = vmtest.wait_event(ev, SRC['id'], 'sandbox.running', 30)
    t.eq(vmtest.detail_of(e).get('from'), 'paused', 'then sandbox.running {from: paused}')
    ev.close()


vmtest.main(t, clock, test_memory_restore, test_disk_only, test_closes, test_fork, test_insandbox,
            test_auto_retention, test_rules)
