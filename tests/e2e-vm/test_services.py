#!/usr/bin/env python3
# vm: supervised services in a real guest (issue 14 items 1-2, 5, 8), one
# sandbox throughout:
#   1. PUT -> running with a live pid, as user box, with the sandbox env,
#      HOME and USER; the definition file on the guest disk;
#   2. needs order (web needs db), an unknown need and a cycle 400;
#   3. a crash loop reaches `crashed` after the documented pauses
#      (1+2+4+8 s) with restarts 4;
#   4. pause then wake: the same pid; stop then wake: running again, a new pid;
#   5. through checkpoints: a memory checkpoint keeps the pid; a restore of
#      it brings back the pid of the checkpoint, running; a fork of it has
#      the service running with that pid and, restarted, the fork's env (the
#      sandbox env is never in a snapshot); a restore of a disk-only
#      checkpoint boots fresh: running since the restore, a new pid,
#      restarts 0, the sandbox's env;
#   6. log rotation at 8 MiB with two old files kept;
#   7. the in-sandbox socket's /services from inside the guest;
#   8. logs: tail=N the last N lines (also on the in-sandbox socket), a
#      follow streaming new lines and ended by a pause, wake=false on the
#      paused sandbox 409 and it stays paused.

import datetime
import json
import time

import vmtest
from vmtest import VmBoxd, Tap, sh

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
# no background materialisation of the memory checkpoints: its QEMU would
# share the CPUs with the restore and fork right after (test_ckpt_crash.py
# tests it)
d = VmBoxd(t, config={'plugin.libvirt': {'checkpoint_materialise': 'false'}})
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))
SB = 'svc'
BASE = '/v1/sandboxes/%s/services' % SB
LOGS = '/var/log/box/services'


def put(name, body, status=200):
    r = d.request('PUT', BASE + '/' + name, body, token=KEY, timeout=120)
    t.status(r, status, 'PUT %s' % name)
    return r[2] or {}


def get(name, sandbox=SB):
    return d.request('GET', '/v1/sandboxes/%s/services/%s' % (sandbox, name), token=KEY,
                     timeout=300)[2] or {}


def guest(script):
    return sh(d, KEY, SB, script, user='root', timeout=300)


def test_put_and_env(t):
    d.create_sandbox(KEY, {'name': SB, 'env': {'GREETING': 'hi'}})
    with clock('PUT db to running'):
        db = put('db', {'cmd': ['sh', '-c', 'echo "db $HOME $USER $GREETING $OWN"; exec sleep 100000'],
                        'env': {'OWN': 'mine'}})
    t.eq(db.get('state'), 'running', 'db runs')
    pid = db.get('pid')
    r = guest('stat -c %%U /proc/%s; cat %s/db.json; sleep 1; cat %s/db.log' % (pid, '/var/lib/box/services', LOGS))
    lines = r.out.splitlines()
    t.eq(lines[0] if lines else None, 'box', 'its process runs as box (pid %s)' % pid)
    t.ok(len(lines) > 1 and json.loads(lines[1]).get('cmd', [None])[0] == 'sh',
         'the definition is on the guest disk', r.out[:300])
    t.eq(lines[-1] if lines else None, 'db /home/box box hi mine',
         'env: HOME and USER of box, the sandbox env, its own')


def test_needs(t):
    web = put('web', {'cmd': ['sleep', '100000'], 'needs': ['db']})
    t.eq((web.get('state'), web.get('needs')), ('running', ['db']), 'web (needs db) runs')
    t.error(d.request('PUT', BASE + '/x', {'cmd': ['true'], 'needs': ['nope']}, token=KEY),
            400, 'invalid', 'an unknown need', message_contains='nope')
    t.error(d.request('PUT', BASE + '/db', {'cmd': ['true'], 'needs': ['web']}, token=KEY),
            400, 'invalid', 'a cycle', message_contains='db -> web -> db')
    # stopped db: web started again waits for it
    d.request('POST', BASE + '/db/stop', token=KEY)
    r = d.request('POST', BASE + '/web/restart', token=KEY)
    t.eq((r[2] or {}).get('state'), 'starting', 'web waits for db (starting)')
    d.request('POST', BASE + '/db/start', token=KEY)
    deadline = time.time() + 20
    while time.time() < deadline and get('web').get('state') != 'running':
        time.sleep(0.5)
    t.eq(get('web').get('state'), 'running', 'web runs once db does')


def test_crash_loop(t):
    t0 = time.time()
    put('bad', {'cmd': ['sh', '-c', 'exit 3']})
    s = {}
    while time.time() < t0 + 90:
        s = get('bad')
        if s.get('state') == 'crashed':
            break
        time.sleep(0.5)
    took = time.time() - t0
    t.eq((s.get('state'), s.get('restarts')), ('crashed', 4), 'crashed after 5 tries')
    t.ok(14 <= took <= 60, 'after the pauses 1+2+4+8 s', '%.1f s' % took)
    r = guest('grep -c "exited with status 3" %s/bad.log' % LOGS)
    t.eq(r.out.strip(), '5', 'each try is in its log')
    d.request('DELETE', BASE + '/bad', token=KEY)


def test_pause_and_stop(t):
    before = get('db').get('pid')
    t.status(d.request('POST', '/v1/sandboxes/%s/pause' % SB, token=KEY, timeout=300), 200, 'pause')
    t.status(d.request('POST', '/v1/sandboxes/%s/wake' % SB, token=KEY, timeout=300), 200, 'wake')
    t.eq(get('db').get('pid'), before, 'pause and wake: the same pid')
    t.status(d.request('POST', '/v1/sandboxes/%s/stop' % SB, token=KEY, timeout=300), 200, 'stop')
    with clock('wake from stop through GET services/db'):
        db = get('db')
    t.ok(db.get('state') == 'running' and db.get('pid') not in (None, before),
         'stop and wake: running again with a new pid', db)
    t.eq(get('web').get('state'), 'running', 'web too')


def alive(pid, sandbox=SB):
    """Whether @pid is a live `sleep` in @sandbox (exec again when a
    checkpoint or restore cut the call)."""
    for _ in range(10):
        r = sh(d, KEY, sandbox, 'tr "\\0" " " < /proc/%s/cmdline' % pid, user='root', timeout=300)
        if r.status == 200:
            return 'sleep' in r.out
        time.sleep(0.5)
    return False


def last_log_line(name, sandbox=SB):
    r = sh(d, KEY, sandbox, 'sleep 1; tail -n 1 %s/%s.log' % (LOGS, name), user='root', timeout=300)
    return r.out.strip()


def ts(text):
    """An RFC 3339 UTC time as a number (0 when absent)."""
    try:
        return datetime.datetime.fromisoformat(text.replace('Z', '+00:00')).timestamp()
    except (AttributeError, ValueError):
        return 0


def checkpoint(body):
    r = d.request('POST', '/v1/sandboxes/%s/checkpoints' % SB, body, token=KEY, timeout=300)
    t.status(r, 201, 'checkpoint %s' % json.dumps(body))
    return (r[2] or {}).get('id')


def restore(cp):
    r = d.request('POST', '/v1/sandboxes/%s/checkpoints/%s/restore' % (SB, cp), token=KEY, timeout=300)
    t.status(r, 200, 'restore %s' % cp)


def test_checkpoints(t):
    db = get('db')
    pid, restarts = db.get('pid'), db.get('restarts')
    with clock('memory checkpoint'):
        mem = checkpoint({'comment': 'services'})
    db = get('db')
    t.eq((db.get('state'), db.get('pid')), ('running', pid), 'a memory checkpoint: running, the same pid')
    later = d.request('POST', BASE + '/db/restart', token=KEY, timeout=120)[2] or {}
    t.ok(later.get('pid') not in (None, pid), 'restarted after the checkpoint: another pid', later)
    with clock('restore of the memory checkpoint'):
        restore(mem)
    db = get('db')
    t.eq((db.get('state'), db.get('pid'), db.get('restarts')), ('running', pid, restarts),
         'restored: running with the pid and restarts of the checkpoint')
    t.ok(alive(pid), 'that process runs in the guest (pid %s)' % pid)

    with clock('fork of the memory checkpoint'):
        r = d.request('POST', '/v1/sandboxes', {'name': 'svc-fork', 'from': {'sandbox': SB, 'checkpoint': mem},
                                                'env': {'GREETING': 'forked'}}, token=KEY, timeout=300)
    t.status(r, 201, 'fork -> 201')
    fdb = get('db', 'svc-fork')
    t.eq((fdb.get('state'), fdb.get('pid')), ('running', pid), 'the fork\'s db runs, the pid of the checkpoint')
    t.ok(alive(pid, 'svc-fork'), 'that process runs in the fork')
    t.eq(get('web', 'svc-fork').get('state'), 'running', 'the fork\'s web runs too')
    r = d.request('POST', '/v1/sandboxes/svc-fork/services/db/restart', token=KEY, timeout=120)
    t.eq((r[2] or {}).get('state'), 'running', 'restart in the fork')
    t.eq(last_log_line('db', 'svc-fork'), 'db /home/box box forked mine',
         'restarted in the fork: the fork\'s env, not the source\'s')
    t.status(d.request('DELETE', '/v1/sandboxes/svc-fork', token=KEY, timeout=300), 204, 'delete the fork')

    # a pid of no boot (a fresh boot may well give db the pid it had at
    # the previous one), restarts 1
    pid = (d.request('POST', BASE + '/db/restart', token=KEY, timeout=120)[2] or {}).get('pid')
    r = d.request('POST', '/v1/sandboxes/%s/checkpoints' % SB, {'memory': False}, token=KEY, timeout=300)
    t.status(r, 201, 'disk-only checkpoint')
    disk, taken = (r[2] or {}).get('id'), ts((r[2] or {}).get('created_at'))
    t.eq(get('db').get('pid'), pid, 'a disk-only checkpoint ends nothing')
    with clock('restore of the disk-only checkpoint'):
        restore(disk)
    db = get('db')
    t.ok(db.get('state') == 'running' and db.get('pid') not in (None, pid) and db.get('restarts') == 0
         and ts(db.get('started_at')) > taken,
         'disk-only restore: booted fresh, running since the restore, a new pid, restarts 0', (db, taken))
    t.eq(get('web').get('state'), 'running', 'web too')
    t.eq(last_log_line('db'), 'db /home/box box hi mine', 'started with the sandbox\'s env')
    r = d.request('PATCH', '/v1/sandboxes/%s' % SB, {'env': {'GREETING': 'patched'}}, token=KEY, timeout=120)
    t.status(r, 200, 'PATCH the sandbox env')
    d.request('POST', BASE + '/db/restart', token=KEY, timeout=120)
    t.eq(last_log_line('db'), 'db /home/box box patched mine', 'restarted: the env as PATCHed')
    for cp in (mem, disk):
        d.request('DELETE', '/v1/sandboxes/%s/checkpoints/%s' % (SB, cp), token=KEY)


def test_rotation(t):
    put('loud', {'cmd': ['sh', '-c', 'head -c 20000000 /dev/zero | tr "\\0" x; exec sleep 100000'],
                 'user': 'root'})
    r = None
    deadline = time.time() + 240
    while time.time() < deadline:
        r = guest('stat -c "%%n %%s" %s/loud.log* 2>/dev/null' % LOGS)
        total = sum(int(line.split()[1]) for line in r.out.splitlines() if len(line.split()) == 2)
        if total >= 20000000:
            break
        time.sleep(2)
    sizes = dict(line.split() for line in (r.out if r else '').splitlines() if len(line.split()) == 2)
    t.eq(sorted(sizes), ['%s/loud.log' % LOGS, '%s/loud.log.1' % LOGS, '%s/loud.log.2' % LOGS],
         'the current log and two old ones')
    t.eq((sizes.get('%s/loud.log.1' % LOGS), sizes.get('%s/loud.log.2' % LOGS)), ('8388608', '8388608'),
         'the old files are 8 MiB each')
    t.eq(sizes.get('%s/loud.log' % LOGS), str(20000000 - 2 * 8388608), 'the rest in the current one')
    d.request('DELETE', BASE + '/loud', token=KEY)


def test_insandbox(t):
    r = sh(d, KEY, SB, 'curl -s --unix-socket /run/box/api.sock http://x/services/db', user='box')
    try:
        body = json.loads(r.out)
    except ValueError:
        body = {}
    t.ok((body.get('name'), body.get('state')) == ('db', 'running'),
         'GET /services/db on the in-sandbox socket, as box', r.out[:300])


def test_logs(t):
    script = ('i=0; while [ $i -lt 50 ]; do echo line$i; i=$((i+1)); done; '
              'while :; do if [ -e /tmp/more ]; then rm /tmp/more; echo more; fi; sleep 0.1; done')
    put('talk', {'cmd': ['sh', '-c', script], 'user': 'root'})
    deadline = time.time() + 60
    r = None
    while time.time() < deadline:
        r = d.request('GET', BASE + '/talk/logs?tail=1', token=KEY, timeout=60)
        if r[3] == b'line49\n':
            break
        time.sleep(0.5)
    r = d.request('GET', BASE + '/talk/logs?tail=5', token=KEY, timeout=60)
    t.eq((r[0], r[3]), (200, b''.join(b'line%d\n' % i for i in range(45, 50))),
         'logs?tail=5: the last 5 lines')
    r = sh(d, KEY, SB, "curl -s --unix-socket /run/box/api.sock 'http://x/services/talk/logs?tail=2'",
           user='box')
    t.eq(r.out, 'line48\nline49\n', '/services/talk/logs?tail=2 on the in-sandbox socket')
    f = vmtest.boxtest.Follow(d, BASE + '/talk/logs?tail=1&follow=true', KEY)
    t.eq(f.next(timeout=60), ('line', b'line49\n'), 'follow starts with the tail')
    with clock('a line written in the guest reaches a follower'):
        guest('touch /tmp/more')
        got = f.next(timeout=60)
    t.eq(got, ('line', b'more\n'), 'follow streams a new line')
    t.status(d.request('POST', '/v1/sandboxes/%s/pause' % SB, token=KEY, timeout=300), 200, 'pause')
    t.eq(f.next(timeout=60), ('end', True), 'the pause ended the follow cleanly')
    f.close()
    t.error(d.request('GET', BASE + '/talk/logs?wake=false', token=KEY, timeout=60), 409, 'conflict',
            'wake=false on the paused sandbox')
    t.eq((d.request('GET', '/v1/sandboxes/%s' % SB, token=KEY)[2] or {}).get('state'), 'paused',
         'and it stays paused')
    r = d.request('GET', BASE + '/talk/logs?tail=1', token=KEY, timeout=300)
    t.eq((r[0], r[3]), (200, b'more\n'), 'the default wakes it')
    d.request('DELETE', BASE + '/talk', token=KEY, timeout=120)

def test_cleanup(t):
    vmtest.delete_all_and_stop(t, d, KEY)


if __name__ == '__main__':
    vmtest.main(t, clock, test_put_and_env, test_needs, test_crash_loop, test_pause_and_stop,
                test_checkpoints, test_rotation, test_insandbox, test_logs, test_cleanup)
