#!/usr/bin/env python3
# e2e: checkpoints, restore and forks (issue 13 items 1-4 and 8, API side),
# on the dummy hypervisor: routes and shapes, IDs never reused, auto-N
# retention, 404s and 400s, no wake for reading and deleting, events on the
# project stream and ?sandbox=, 501 by capability, the quota refusal that
# writes nothing, a failed checkpoint that leaves nothing, the fork rules,
# and a boxd killed between the hypervisor's checkpoint and its record.

import os
import sqlite3
import tempfile
import threading
import time

import boxtest
from boxtest import Boxd, Tap

FIELDS = {'id', 'sandbox', 'comment', 'memory', 'auto', 'created_at'}


def boxd_with(t, conf_text):
    conf = os.path.join(tempfile.mkdtemp(prefix='box-e2e-conf-'), 'boxd.conf')
    with open(conf, 'w') as f:
        f.write(conf_text)
    return Boxd(t, extra_args=['--config', conf])


def ids(d, key, sb):
    r = d.request('GET', '/v1/sandboxes/%s/checkpoints' % sb, token=key)
    return [c['id'] for c in (r[2] or {}).get('checkpoints', [])]


def state(d, key, sb):
    return (d.request('GET', '/v1/sandboxes/%s' % sb, token=key)[2] or {}).get('state')


def check_routes(t, d, key):
    sb = d.create_sandbox(key, {'name': 'cp'})
    ev = d.events(key, 'sandbox=cp')
    ev.wait_connected(5)
    r = d.request('POST', '/v1/sandboxes/cp/checkpoints', {'comment': 'first'}, token=key)
    t.status(r, 201, 'POST checkpoints -> 201')
    c = r[2] or {}
    t.eq(set(c.keys()), FIELDS, 'a Checkpoint has exactly the spec\'s fields')
    t.eq((c.get('id'), c.get('sandbox'), c.get('comment'), c.get('memory'), c.get('auto')),
         ('v1', sb['id'], 'first', True, False), 'v1 of the sandbox, memory by default')
    t.ok(boxtest.is_utc_ts(c.get('created_at')), 'created_at is RFC 3339 UTC', c.get('created_at'))
    e = ev.wait_for(lambda e: e.get('event') == 'checkpoint.created', 5)
    t.eq((e or {}).get('data', {}).get('detail'), {'checkpoint': 'v1', 'memory': True, 'auto': False},
         'checkpoint.created detail on ?sandbox=')
    t.eq((e or {}).get('data', {}).get('sandbox'), sb['id'], 'the event names the sandbox')
    r = d.request('POST', '/v1/sandboxes/cp/checkpoints', {'memory': False}, token=key)
    t.eq(((r[2] or {}).get('id'), (r[2] or {}).get('memory'), (r[2] or {}).get('comment')),
         ('v2', False, ''), 'v2 disk only, comment "" when none')
    t.status(d.request('POST', '/v1/sandboxes/cp/checkpoints', token=key), 201, 'no body at all is {}')
    t.eq(ids(d, key, 'cp'), ['v1', 'v2', 'v3'], 'list, oldest first')
    r = d.request('GET', '/v1/sandboxes/%s/checkpoints/v2' % sb['id'], token=key)
    t.eq(((r[2] or {}).get('id'), (r[2] or {}).get('memory')), ('v2', False), 'GET one, by sandbox ID')
    r = d.request('DELETE', '/v1/sandboxes/cp/checkpoints/v3', token=key)
    t.status(r, 204, 'DELETE -> 204')
    e = ev.wait_for(lambda e: e.get('event') == 'checkpoint.deleted', 5)
    t.eq((e or {}).get('data', {}).get('detail'), {'checkpoint': 'v3'}, 'checkpoint.deleted detail')
    r = d.request('POST', '/v1/sandboxes/cp/checkpoints', token=key)
    t.eq((r[2] or {}).get('id'), 'v4', 'after deleting v3 the next is v4 (never reused)')

    # 404s and 400s
    t.error(d.request('GET', '/v1/sandboxes/cp/checkpoints/v3', token=key), 404, 'not_found',
            'GET a deleted checkpoint')
    t.error(d.request('GET', '/v1/sandboxes/cp/checkpoints/v99', token=key), 404, 'not_found',
            'GET a missing checkpoint')
    t.error(d.request('DELETE', '/v1/sandboxes/cp/checkpoints/v99', token=key), 404, 'not_found',
            'DELETE a missing checkpoint')
    t.error(d.request('POST', '/v1/sandboxes/cp/checkpoints/v99/restore', token=key), 404, 'not_found',
            'restore a missing checkpoint')
    t.error(d.request('POST', '/v1/sandboxes/nope/checkpoints', token=key), 404, 'not_found',
            'checkpoint of a missing sandbox')
    t.error(d.request('GET', '/v1/sandboxes/nope/checkpoints', token=key), 404, 'not_found',
            'list of a missing sandbox')
    for body, what in (({'memory': True, 'extra': 1}, 'an unknown field'),
                       ({'memory': 'yes'}, 'memory not a boolean'),
                       ({'comment': 5}, 'comment not a string'),
                       ({'comment': 'x' * 257}, 'a comment of 257 bytes'),
                       ({'comment': 'a\nb'}, 'a comment with a control character')):
        t.error(d.request('POST', '/v1/sandboxes/cp/checkpoints', body, token=key), 400, 'invalid',
                'POST checkpoints with %s' % what)
    t.status(d.request('POST', '/v1/sandboxes/cp/checkpoints', {'comment': 'é' * 128}, token=key), 201,
             'a comment of 256 bytes of UTF-8')
    t.error(d.request('POST', '/v1/sandboxes/cp/checkpoints/v1/restore', {'x': 1}, token=key), 400,
            'invalid', 'restore with a body')
    t.eq(ids(d, key, 'cp'), ['v1', 'v2', 'v4', 'v5'], 'the refusals wrote nothing')

    # another project sees nothing
    other = d.project_with_key('other')
    for method, path in (('GET', '/v1/sandboxes/cp/checkpoints'), ('GET', '/v1/sandboxes/cp/checkpoints/v1'),
                         ('DELETE', '/v1/sandboxes/cp/checkpoints/v1'),
                         ('POST', '/v1/sandboxes/cp/checkpoints'),
                         ('POST', '/v1/sandboxes/cp/checkpoints/v1/restore')):
        t.error(d.request(method, path, token=other), 404, 'not_found', 'another project: %s %s' % (method, path))
    t.eq(ids(d, key, 'cp'), ['v1', 'v2', 'v4', 'v5'], 'and changed nothing')
    ev.close()
    return sb


def check_no_wake(t, d, key):
    d.create_sandbox(key, {'name': 'sleepy'})
    d.request('POST', '/v1/sandboxes/sleepy/checkpoints', token=key)
    t.status(d.request('POST', '/v1/sandboxes/sleepy/pause', token=key), 200, 'pause')
    ev = d.events(key, 'sandbox=sleepy')
    ev.wait_connected(5)
    t.status(d.request('GET', '/v1/sandboxes/sleepy/checkpoints', token=key), 200, 'list a paused one')
    t.status(d.request('GET', '/v1/sandboxes/sleepy/checkpoints/v1', token=key), 200, 'get')
    r = d.request('POST', '/v1/sandboxes/sleepy/checkpoints', token=key)
    t.eq(((r[2] or {}).get('id'), (r[2] or {}).get('memory')), ('v2', True),
         'a memory checkpoint of a paused sandbox (its snapshot)')
    t.status(d.request('DELETE', '/v1/sandboxes/sleepy/checkpoints/v1', token=key), 204, 'delete')
    t.eq(state(d, key, 'sleepy'), 'paused', 'still paused after list, get, checkpoint, delete')
    seen = [e.get('event') for e in ev.collect(0.5)]
    t.eq(seen, ['checkpoint.created', 'checkpoint.deleted'], 'and no sandbox.running event')
    ev.close()
    t.status(d.request('POST', '/v1/sandboxes/sleepy/stop', token=key), 200, 'stop')
    r = d.request('POST', '/v1/sandboxes/sleepy/checkpoints', {'memory': False}, token=key)
    t.eq((r[2] or {}).get('id'), 'v3', 'a disk-only one of a stopped sandbox is v3')
    t.eq(state(d, key, 'sleepy'), 'stopped', 'and it stays stopped')
    ev = d.events(key, 'sandbox=sleepy')
    ev.wait_connected(5)
    r = d.request('POST', '/v1/sandboxes/sleepy/checkpoints', token=key)
    t.eq(((r[2] or {}).get('id'), (r[2] or {}).get('memory')), ('v4', True),
         'a memory checkpoint of a stopped sandbox is v4')
    t.eq(state(d, key, 'sleepy'), 'running', 'it woke the sandbox first (a route under it wakes it)')
    seen = [(e.get('event'), (e.get('data') or {}).get('detail')) for e in ev.collect(0.5)]
    t.eq(seen, [('sandbox.running', {'from': 'stopped'}),
                ('checkpoint.created', {'checkpoint': 'v4', 'memory': True, 'auto': False})],
         'sandbox.running from stopped, then checkpoint.created')
    ev.close()


def check_restore(t, d, key):
    sb = d.create_sandbox(key, {'name': 'rs'})
    d.request('POST', '/v1/sandboxes/rs/checkpoints', {'comment': 'base'}, token=key)
    ev = d.events(key)
    ev.wait_connected(5)
    r = d.request('POST', '/v1/sandboxes/rs/checkpoints/v1/restore', token=key)
    t.status(r, 200, 'restore -> 200')
    t.eq(((r[2] or {}).get('id'), (r[2] or {}).get('state')), (sb['id'], 'running'),
         'answers the Sandbox, running')
    e = ev.wait_for(lambda e: e.get('event') == 'checkpoint.created', 5)
    t.eq((e or {}).get('data', {}).get('detail'), {'checkpoint': 'auto-1', 'memory': True, 'auto': True},
         'the automatic checkpoint is announced')
    e = ev.wait_for(lambda e: e.get('event') == 'checkpoint.restored', 5)
    t.eq((e or {}).get('data', {}).get('detail'), {'checkpoint': 'v1', 'auto': 'auto-1'},
         'checkpoint.restored detail on the project stream')
    r = d.request('GET', '/v1/sandboxes/rs/checkpoints/auto-1', token=key)
    t.eq(((r[2] or {}).get('auto'), (r[2] or {}).get('memory'), (r[2] or {}).get('comment')),
         (True, True, ''), 'auto-1 is automatic, with memory')
    for n in range(2, 8):
        t.status(d.request('POST', '/v1/sandboxes/rs/checkpoints/v1/restore', token=key), 200,
                 'restore %d' % n)
    got = ids(d, key, 'rs')
    t.eq(got, ['v1'] + ['auto-%d' % n for n in range(3, 8)], 'after 7 restores the newest 5 autos are kept')
    deleted = [e for e in ev.collect(0.5) if e.get('event') == 'checkpoint.deleted']
    t.eq([e['data']['detail']['checkpoint'] for e in deleted], ['auto-1', 'auto-2'],
         'the pruned ones are announced deleted')
    # restoring an automatic checkpoint is a restore like any other
    r = d.request('POST', '/v1/sandboxes/rs/checkpoints/auto-7/restore', token=key)
    t.status(r, 200, 'restore of auto-7')
    t.eq(ids(d, key, 'rs')[-1], 'auto-8', 'keeps auto-8 first')
    r = d.request('POST', '/v1/sandboxes/rs/checkpoints', token=key)
    t.eq((r[2] or {}).get('id'), 'v2', 'client numbers are untouched by restores: v2')
    # restore of a paused sandbox wakes it
    d.request('POST', '/v1/sandboxes/rs/pause', token=key)
    r = d.request('POST', '/v1/sandboxes/rs/checkpoints/v2/restore', token=key)
    t.eq((r[2] or {}).get('state'), 'running', 'restore of a paused sandbox: running')
    e = ev.wait_for(lambda e: e.get('event') == 'sandbox.running', 5)
    t.eq(((e or {}).get('data') or {}).get('detail'), {'from': 'paused'}, 'sandbox.running from paused')
    ev.close()
    # deleting the sandbox deletes its checkpoints
    t.status(d.request('DELETE', '/v1/sandboxes/rs', token=key), 204, 'delete the sandbox')
    con = sqlite3.connect(boxtest.sqlite_files(d.data_dir)[0])
    n = con.execute("SELECT COUNT(*) FROM records WHERE scope = ?", (sb['id'],)).fetchone()[0]
    con.close()
    t.eq(n, 0, 'no record of its checkpoints is left')


def check_fork(t, d, key):
    src = d.create_sandbox(key, {'name': 'src', 'env': {'A': '1'}, 'labels': {'k': 'v'},
                                 'resources': {'cpus': 1, 'memory_mib': 512, 'disk_gib': 3}})
    d.request('POST', '/v1/sandboxes/src/checkpoints', token=key)
    for extra, what in (({'template': 'base'}, 'template'), ({'resources': {'cpus': 1}}, 'resources'),
                        ({'image': 'r.example/x@sha256:' + '0' * 64}, 'image')):
        body = dict({'from': {'sandbox': 'src', 'checkpoint': 'v1'}}, **extra)
        t.error(d.request('POST', '/v1/sandboxes', body, token=key), 400, 'invalid', 'fork with %s' % what)
    t.error(d.request('POST', '/v1/sandboxes', {'from': {'sandbox': 'src', 'checkpoint': 'v9'}}, token=key),
            404, 'not_found', 'fork of a missing checkpoint')
    t.error(d.request('POST', '/v1/sandboxes', {'from': {'sandbox': 'nope', 'checkpoint': 'v1'}}, token=key),
            404, 'not_found', 'fork of a missing sandbox')
    other = d.project_with_key('forker')
    t.error(d.request('POST', '/v1/sandboxes', {'from': {'sandbox': src['id'], 'checkpoint': 'v1'}},
                      token=other), 404, 'not_found', 'fork of another project\'s checkpoint')
    t.error(d.request('POST', '/v1/sandboxes', {'from': {'sandbox': 'src'}}, token=key), 400, 'invalid',
            'from without a checkpoint')
    r = d.request('POST', '/v1/sandboxes', {'name': 'fk', 'from': {'sandbox': 'src', 'checkpoint': 'v1'},
                                            'env': {'B': '2'}}, token=key)
    t.status(r, 201, 'fork -> 201')
    fk = r[2] or {}
    t.ok(fk.get('id') not in (None, src['id']), 'the fork is a new sandbox', fk.get('id'))
    t.eq(fk.get('resources'), src.get('resources'), 'resources come from the checkpoint')
    t.eq((fk.get('env'), fk.get('labels')), ({'B': '2'}, {}), 'env and labels are the fork\'s own')
    t.eq(fk.get('state'), 'running', 'running')
    r = d.request('POST', '/v1/sandboxes/fk/checkpoints', token=key)
    t.eq((r[2] or {}).get('id'), 'v1', 'the fork\'s checkpoints start at v1')
    # network and secrets come from the source unless given
    t.status(d.request('PUT', '/v1/secrets/S_TOKEN', {'value': 'v', 'hosts': ['api.example.com']}, token=key),
             (200, 201), 'a secret')
    d.create_sandbox(key, {'name': 'sec', 'secrets': ['S_TOKEN']})
    d.request('POST', '/v1/sandboxes/sec/checkpoints', token=key)
    r = d.request('POST', '/v1/sandboxes', {'name': 'sec-f1', 'from': {'sandbox': 'sec', 'checkpoint': 'v1'}},
                  token=key)
    t.eq((r[2] or {}).get('secrets'), ['S_TOKEN'], 'a fork without secrets has the source\'s')
    r = d.request('POST', '/v1/sandboxes', {'name': 'sec-f2', 'from': {'sandbox': 'sec', 'checkpoint': 'v1'},
                                            'secrets': []}, token=key)
    t.eq((r[2] or {}).get('secrets'), [], 'a fork given secrets has its own')
    t.status(d.request('DELETE', '/v1/sandboxes/src/checkpoints/v1', token=key), 204,
             'delete the source\'s checkpoint')
    t.status(d.request('DELETE', '/v1/sandboxes/src', token=key), 204, 'delete the source')
    t.eq(state(d, key, 'fk'), 'running', 'the fork is whole')


def test_checkpoints(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        with t.section('routes, IDs, 404s, 400s, events'):
            check_routes(t, d, key)
        with t.section('reading and deleting do not wake'):
            check_no_wake(t, d, key)
        with t.section('restore and auto-N'):
            check_restore(t, d, key)
        with t.section('fork'):
            check_fork(t, d, key)
        t.ok(d.alive(), 'boxd is still up')
    finally:
        d.stop()


def test_capabilities(t):
    d = boxd_with(t, '[plugin.dummy]\ncapabilities=checkpoints\n').start()
    try:
        key = d.project_with_key('alpha')
        d.create_sandbox(key, {'name': 'nomem'})
        t.error(d.request('POST', '/v1/sandboxes/nomem/checkpoints', token=key), 501, 'unsupported',
                'no memory snapshots: a memory checkpoint is 501')
        r = d.request('POST', '/v1/sandboxes/nomem/checkpoints', {'memory': False}, token=key)
        t.eq(((r[2] or {}).get('id'), (r[2] or {}).get('memory')), ('v1', False),
             'a disk-only one works, and the refusal took no number')
        r = d.request('POST', '/v1/sandboxes/nomem/checkpoints/v1/restore', token=key)
        t.status(r, 200, 'restore')
        r = d.request('GET', '/v1/sandboxes/nomem/checkpoints/auto-1', token=key)
        t.eq((r[2] or {}).get('memory'), False, 'its automatic checkpoint is disk only')
    finally:
        d.stop()
    d = boxd_with(t, '[plugin.dummy]\ncapabilities=memory-snapshots\n').start()
    try:
        key = d.project_with_key('alpha')
        d.create_sandbox(key, {'name': 'none'})
        for body in ({}, {'memory': False}):
            t.error(d.request('POST', '/v1/sandboxes/none/checkpoints', body, token=key), 501,
                    'unsupported', 'no checkpoints: POST %r is 501' % body)
        t.error(d.request('POST', '/v1/sandboxes/nope/checkpoints', token=key), 404, 'not_found',
                'a missing sandbox is still 404')
        t.eq(ids(d, key, 'none'), [], 'nothing written')
    finally:
        d.stop()


def test_quota_and_failures(t):
    # The sandbox below is small: 1 GiB disk + 256 MiB; the quota of 3 GiB holds the sandbox (1280 MiB) and one
    # memory checkpoint (1280 MiB) but not a second (3840 > 3072).
    d = boxd_with(t, '[quota]\ndisk_gib=3\n').start()
    try:
        key = d.project_with_key('alpha')
        d.create_sandbox(key, {'name': 'q', 'resources': {'cpus': 1, 'memory_mib': 256, 'disk_gib': 1}})
        t.status(d.request('POST', '/v1/sandboxes/q/checkpoints', token=key), 201, 'the first fits')
        ev = d.events(key)
        ev.wait_connected(5)
        r = d.request('POST', '/v1/sandboxes/q/checkpoints', token=key)
        t.error(r, 409, 'conflict', 'the second is over the disk quota', message_contains='quota exceeded')
        t.eq(ids(d, key, 'q'), ['v1'], 'the refusal wrote no record')
        t.eq([e.get('event') for e in ev.collect(0.5)], [], 'and no event')
        t.status(d.request('DELETE', '/v1/sandboxes/q/checkpoints/v1', token=key), 204, 'delete v1')
        r = d.request('POST', '/v1/sandboxes/q/checkpoints', token=key)
        t.eq((r[2] or {}).get('id'), 'v2', 'then it fits, and the refusal spent no number')
        ev.close()
    finally:
        d.stop()


def pending_count(d):
    """The checkpoint-pending records, once reconciliation had its chance."""
    con = sqlite3.connect(boxtest.sqlite_files(d.data_dir)[0])
    deadline = time.time() + 5
    n = 1
    while time.time() < deadline and n:
        n = con.execute("SELECT COUNT(*) FROM records WHERE kind = 'checkpoint-pending'").fetchone()[0]
        time.sleep(0.1)
    con.close()
    return n


def test_failure_and_crash(t):
    d = boxd_with(t, '[plugin.dummy]\nscript=checkpoint fail times=1 code=capacity\n').start()
    try:
        key = d.project_with_key('alpha')
        d.create_sandbox(key, {'name': 'f'})
        r = d.request('POST', '/v1/sandboxes/f/checkpoints', token=key)
        t.error(r, 503, 'capacity', 'a checkpoint the hypervisor has no room for')
        t.eq(ids(d, key, 'f'), [], 'leaves no record')
        r = d.request('POST', '/v1/sandboxes/f/checkpoints', token=key)
        t.eq((r[2] or {}).get('id'), 'v2', 'the failed one spent v1 (documented: numbers are never reused)')
    finally:
        d.stop()

    # boxd killed after the hypervisor made the checkpoint, before its record
    d = boxd_with(t, '[plugin.dummy]\nscript=checkpoint delay ms=3000\n').start()
    conf = d.extra_args[1]
    key = d.project_with_key('alpha')
    d.create_sandbox(key, {'name': 'k'})
    threading.Thread(target=lambda: d.request('POST', '/v1/sandboxes/k/checkpoints', token=key, timeout=10),
                     daemon=True).start()
    time.sleep(1.0)
    d.kill9()
    with open(conf, 'w') as f:
        f.write('')
    d.start()
    t.eq(ids(d, key, 'k'), [], 'after the kill, no checkpoint record')
    t.eq(pending_count(d), 0, 'the pending mark was reconciled away')
    r = d.request('POST', '/v1/sandboxes/k/checkpoints', token=key)
    t.eq((r[2] or {}).get('id'), 'v2', 'v1 is never handed out again')
    t.ok('checkpoint v1 left by a crash deleted' in d.log_text(), 'the log names what was deleted')

    # killed in the middle of a restore: the automatic checkpoint was
    # acknowledged (recorded) before the restore began, and stays
    with open(conf, 'w') as f:
        f.write('[plugin.dummy]\nscript=restore delay ms=3000\n')
    d.stop('boxd stops to take a new script')
    d.start()
    threading.Thread(target=lambda: d.request('POST', '/v1/sandboxes/k/checkpoints/v2/restore', token=key,
                                              timeout=10), daemon=True).start()
    time.sleep(1.0)
    d.kill9()
    with open(conf, 'w') as f:
        f.write('')
    d.start()
    t.eq(ids(d, key, 'k'), ['v2', 'auto-1'], 'after a kill during the restore, auto-1 is kept')
    t.eq(pending_count(d), 0, 'and nothing is left pending')
    r = d.request('POST', '/v1/sandboxes/k/checkpoints/v2/restore', token=key)
    t.eq(((r[2] or {}).get('state'), ids(d, key, 'k')), ('running', ['v2', 'auto-1', 'auto-2']),
         'the restore can be asked again: running, auto-2 kept')
    d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_checkpoints, test_capabilities, test_quota_and_failures,
                 test_failure_and_crash)
