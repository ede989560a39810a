#!/usr/bin/env python3
# vm: presuspend hooks, as a new user meets them.  The specification:
# executables in /var/lib/box/hooks/presuspend.d/ run as root before every
# pause or memory checkpoint, 5 seconds for all together.
#
#   1. a hook written as root (exec/run user root) that sleeps 1 s and
#      then appends its uid and the time to a file: an API pause waits for
#      it (the pause takes >= 1 s), and after the wake the file is there,
#      owned by root, uid 0, stamped between the pause's request and its
#      answer.
#   2. a second hook that sleeps 60 s: the pause answers within ~5 s of
#      hooks (not 60), the sleeper is killed (its file never written, no
#      process left), boxd logs the timeout; the first hook still ran.
#   3. the idle pause (idle 30 s, the minimum, action pause) runs them too.
#   4. a sandbox without hooks pauses at once (no directory: nothing runs).
#   5. a memory checkpoint runs them before its snapshot (the stamp is in
#      the checkpoint: a restore brings it back), and so does the automatic
#      one a restore keeps first; a disk-only one does not.

import time

import vmtest
from vmtest import VmBoxd, Tap, run, sh, state, reason_of, wait_event

HOOKS = '/var/lib/box/hooks/presuspend.d'
STAMP = '/var/lib/box/hook-ran'
LATE = '/var/lib/box/hook-late'
SLACK = 3.0     # guest clock against the host's, under TCG

t = Tap()
clock = vmtest.Clock(t)
vmtest.prepare(t)
d = VmBoxd(t)
with clock('boxd start'):
    vmtest.setup_or_bail(d, d.start)
KEY = vmtest.setup_or_bail(d, lambda: d.project_with_key('alpha'))


def write_hook(sandbox, name, body):
    """An executable hook written as root, as a user would."""
    script = ('mkdir -p %s && printf "%%s\\n" "#!/bin/sh" %s > %s/%s && chmod 0755 %s/%s'
              % (HOOKS, ' '.join("'%s'" % line for line in body), HOOKS, name, HOOKS, name))
    r = sh(d, KEY, sandbox, script, user='root')
    t.ok(r.status == 200 and r.exit_code == 0, '%s: hook %s written as root' % (sandbox, name),
         r.describe())


def stamps(sandbox):
    """[(uid, time)] of the stamp file, and its owner's uid."""
    r = sh(d, KEY, sandbox, 'stat -c %%u %s 2>/dev/null || echo none; cat %s 2>/dev/null' % (STAMP, STAMP),
           user='root', timeout=300)
    lines = r.out.splitlines() or ['none']
    got = []
    for line in lines[1:]:
        parts = line.split()
        try:
            got.append((int(parts[0]), float(parts[1])))
        except (IndexError, ValueError):
            got.append((None, None))
    return lines[0], got


def timed_pause(sandbox):
    t0 = time.time()
    r = d.request('POST', '/v1/sandboxes/%s/pause' % sandbox, token=KEY, timeout=120)
    t1 = time.time()
    t.status(r, 200, 'pause %s' % sandbox)
    t.comment('pause %s: %.2f s' % (sandbox, t1 - t0))
    return t0, t1


def wake(sandbox):
    r = d.request('POST', '/v1/sandboxes/%s/wake' % sandbox, token=KEY, timeout=300)
    t.ok(r[0] == 200 and (r[2] or {}).get('state') == 'running', 'wake %s: 200 running' % sandbox,
         r[3][:300])


def test_pause_runs_hooks(t):
    d.create_sandbox(KEY, {'name': 'plain'})
    with clock('pause without hooks'):
        t0, t1 = timed_pause('plain')
    t.ok(t1 - t0 < 5, 'no hooks: the pause does not wait for any', '%.2f s' % (t1 - t0))

    d.create_sandbox(KEY, {'name': 'hooked'})
    write_hook('hooked', '10-stamp', ['sleep 1', 'echo "$(id -u) $(date +%s.%N)" >> ' + STAMP])
    owner, got = stamps('hooked')
    t.eq((owner, got), ('none', []), 'nothing ran before the pause')
    with clock('pause with a 1 s hook'):
        t0, t1 = timed_pause('hooked')
    t.ok(t1 - t0 >= 1.0, 'the pause waited for the hook (>= 1 s)', '%.2f s' % (t1 - t0))
    t.eq(state(d, KEY, 'hooked'), 'paused', 'hooked is paused')
    wake('hooked')
    owner, got = stamps('hooked')
    t.eq(owner, '0', 'the hook\'s file is owned by root')
    t.eq([uid for uid, _ in got], [0], 'the hook ran once, as uid 0')
    at = got[0][1] if got else None
    t.ok(at is not None and t0 - SLACK <= at <= t1 + SLACK,
         'the hook ran between the pause request and its answer',
         'hook at %r, pause from %.2f to %.2f' % (at, t0, t1))


def test_slow_hook(t):
    write_hook('hooked', '20-sleep', ['sleep 60', 'echo late > ' + LATE])
    with clock('pause with a 60 s hook'):
        t0, t1 = timed_pause('hooked')
    t.ok(t1 - t0 < 10, 'a hook that sleeps 60 s does not hold the pause beyond ~5 s of hooks',
         '%.2f s' % (t1 - t0))
    t.ok(t1 - t0 >= 4.5, 'the hooks had their 5 s', '%.2f s' % (t1 - t0))
    wake('hooked')
    owner, got = stamps('hooked')
    t.eq([uid for uid, _ in got], [0, 0], 'the first hook ran again before this pause, as root')
    r = sh(d, KEY, 'hooked', 'cat %s 2>/dev/null || echo absent; pgrep -x -f "sleep 60" || echo none'
           % LATE, user='root')
    t.eq(r.out.split(), ['absent', 'none'], 'the slow hook was killed at the deadline: no file, no process')
    t.ok(d.log_lines('presuspend hooks', '1 timed out') != [],
         'boxd logs the hook that timed out', '\n'.join(d.log_lines('presuspend')))


def test_idle_pause(t):
    ev = d.events(KEY)
    t.ok(ev.wait_connected(5) and ev.status == 200, 'event stream open')
    s = d.create_sandbox(KEY, {'name': 'idler', 'idle': {'timeout_s': 30, 'action': 'pause'}})
    write_hook('idler', '10-stamp', ['echo "$(id -u) $(date +%s.%N)" >> ' + STAMP])
    with clock('idle pause (30 s)'):
        e = wait_event(ev, s['id'], 'sandbox.paused', 90)
    t.eq(reason_of(e), 'idle', 'idler paused by the idle rule')
    wake('idler')
    owner, got = stamps('idler')
    t.eq((owner, [uid for uid, _ in got]), ('0', [0]), 'the idle pause ran the hook, as root')
    ev.close()


def test_checkpoint_runs_hooks(t):
    """A memory checkpoint runs the hooks before its snapshot: the stamp is
    written between the request and the 201, as root, and it is in the
    checkpoint's memory and disk (a restore of it, after the file was
    removed, brings it back).  A disk-only checkpoint runs none."""
    d.create_sandbox(KEY, {'name': 'ckhook'})
    write_hook('ckhook', '10-stamp', ['echo "$(id -u) $(date +%s.%N)" >> ' + STAMP])
    t0 = time.time()
    r = d.request('POST', '/v1/sandboxes/ckhook/checkpoints', {}, token=KEY, timeout=300)
    t1 = time.time()
    t.status(r, 201, 'memory checkpoint of ckhook')
    owner, got = stamps('ckhook')
    t.eq((owner, [uid for uid, _ in got]), ('0', [0]), 'the checkpoint ran the hook once, as root')
    at = got[0][1] if got else None
    t.ok(at is not None and t0 - SLACK <= at <= t1 + SLACK,
         'the hook ran between the checkpoint request and its answer',
         'hook at %r, checkpoint from %.2f to %.2f' % (at, t0, t1))
    r = d.request('POST', '/v1/sandboxes/ckhook/checkpoints', {'memory': False}, token=KEY, timeout=300)
    t.status(r, 201, 'disk-only checkpoint of ckhook')
    t.eq(len(stamps('ckhook')[1]), 1, 'a disk-only checkpoint runs no hook')
    sh(d, KEY, 'ckhook', 'rm -f ' + STAMP, user='root')
    r = d.request('POST', '/v1/sandboxes/ckhook/checkpoints/v1/restore', token=KEY, timeout=300)
    t.status(r, 200, 'restore v1')
    owner, got = stamps('ckhook')
    t.eq((owner, [uid for uid, _ in got]), ('0', [0]),
         'the restored checkpoint holds the hook\'s stamp: it ran before the snapshot')
    # the restore kept the state before it (no stamp file) as auto-1, after
    # running the hooks once more: auto-1 holds that one stamp
    r = d.request('POST', '/v1/sandboxes/ckhook/checkpoints/auto-1/restore', token=KEY, timeout=300)
    t.status(r, 200, 'restore auto-1')
    owner, got = stamps('ckhook')
    t.eq((owner, [uid for uid, _ in got]), ('0', [0]),
         'the restore\'s automatic checkpoint ran the hook first too (its only stamp)')


def test_cleanup(t):
    vmtest.delete_all_and_stop(t, d, KEY)


if __name__ == '__main__':
    vmtest.main(t, clock, test_pause_runs_hooks, test_slow_hook, test_idle_pause,
                test_checkpoint_runs_hooks, test_cleanup)
