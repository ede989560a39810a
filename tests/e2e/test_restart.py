#!/usr/bin/env python3
# e2e: records survive a restart (SIGTERM) and a SIGKILL in the middle of a
# burst of writes: every acknowledged write is there afterwards.  A SIGHUP
# does not end boxd, with or without the edge.

import os
import random
import signal
import sqlite3
import subprocess
import tempfile
import threading
import time

import boxtest
from boxtest import Boxd, Tap

SECRET_VALUE = 'restart-secret-0b8e55d1c2'


def test_restart(t):
    d = Boxd(t).start()
    key = d.project_with_key('alpha', ['apps.example.com'])
    key2 = d.make_key('alpha', 'second')
    key_b = d.project_with_key('bravo')
    r = d.request('PUT', '/v1/secrets/TOKEN', {'value': SECRET_VALUE, 'hosts': ['api.example.com'],
                                                'placeholder_prefix': 'tk_'}, token=key)
    t.status(r, (200, 201), 'PUT secret before the restart')
    secret_before = r[2]
    s_run = d.create_sandbox(key, {'name': 'runner', 'labels': {'a': 'b'}, 'env': {'E': '1'},
                                   'idle': {'timeout_s': 900, 'action': 'stop'}, 'protected': True,
                                   'deadline': {'at': boxtest.future(86400), 'action': 'delete'},
                                   'network': {'egress': []},
                                   'http_port': 9000})
    s_paused = d.create_sandbox(key, {'name': 'sleeper'})
    s_stopped = d.create_sandbox(key, {'name': 'stopper', 'secrets': ['TOKEN']})
    s_b = d.create_sandbox(key_b, {'name': 'other'})
    t.status(d.request('POST', '/v1/sandboxes/sleeper/pause', token=key), 200, 'pause sleeper')
    t.status(d.request('POST', '/v1/sandboxes/stopper/stop', token=key), 200, 'stop stopper')
    before = {x['id']: x for x in d.request('GET', '/v1/sandboxes', token=key)[2]['sandboxes']}
    projects_before = d.admin('GET', '/v1/projects')[2]
    keys_before = d.admin('GET', '/v1/projects/alpha/keys')[2]
    d.stop('boxd stops on SIGTERM with exit code 0 (first run)')

    d.start()
    try:
        t.eq(d.admin('GET', '/v1/projects')[2], projects_before, 'projects unchanged after the restart')
        t.eq(d.admin('GET', '/v1/projects/alpha/keys')[2], keys_before, 'keys unchanged after the restart')
        r = d.request('GET', '/v1/whoami', token=key)
        t.status(r, 200, 'first key works after the restart')
        t.status(d.request('GET', '/v1/whoami', token=key2['secret']), 200, 'second key works after the restart')
        t.status(d.request('GET', '/v1/whoami', token=key_b), 200, 'other project\'s key works after the restart')
        t.error(d.request('GET', '/v1/whoami', token='box_' + 'a' * 32), 401, 'unauthorized',
                'an unknown key is still refused')

        after = {x['id']: x for x in d.request('GET', '/v1/sandboxes', token=key)[2]['sandboxes']}
        t.eq(sorted(after), sorted(before), 'same sandboxes after the restart')
        stable = ['id', 'name', 'project', 'template', 'image', 'resources', 'env', 'labels', 'idle', 'deadline',
                  'protected', 'http_port', 'network', 'secrets', 'url', 'urls', 'created_at']
        for sid, s in before.items():
            a = after.get(sid, {})
            t.eq({k: a.get(k) for k in stable}, {k: s.get(k) for k in stable},
                 'sandbox %s: record kept across the restart' % s['name'])
        t.comment('states after restart: %r' % {a.get('name'): a.get('state') for a in after.values()})
        t.eq(after.get(s_paused['id'], {}).get('state'), 'paused', 'paused sandbox still paused')
        t.eq(after.get(s_stopped['id'], {}).get('state'), 'stopped', 'stopped sandbox still stopped')
        t.ok(after.get(s_run['id'], {}).get('state') in ('running', 'paused', 'stopped', 'error'),
             'running sandbox has a valid state', after.get(s_run['id'], {}).get('state'))
        t.status(d.request('GET', '/v1/sandboxes/other', token=key_b), 200, 'other project\'s sandbox kept')
        t.eq((d.request('GET', '/v1/sandboxes/other', token=key_b)[2] or {}).get('id'), s_b['id'],
             'other project\'s sandbox keeps its id')
        t.error(d.request('POST', '/v1/sandboxes', {'name': 'runner'}, token=key), 409, 'already_exists',
                'names stay taken after the restart')
        t.error(d.request('DELETE', '/v1/sandboxes/runner', token=key), 409, 'conflict',
                'protected stays protected after the restart')

        r = d.request('GET', '/v1/secrets/TOKEN', token=key)
        t.eq(r[2], secret_before, 'secret record unchanged after the restart')
        r = d.request('POST', '/v1/sandboxes', {'name': 'uses-secret', 'secrets': ['TOKEN']}, token=key)
        t.status(r, 201, 'create naming the secret after the restart (secret key reloaded)')
        t.status(d.request('POST', '/v1/sandboxes/stopper/wake', token=key), 200, 'wake a sandbox with a secret')
        t.error(d.request('DELETE', '/v1/secrets/TOKEN', token=key), 409, 'conflict',
                'secret in use after the restart')
        r = d.request('PUT', '/v1/secrets/TOKEN', {'value': SECRET_VALUE + 'x', 'hosts': ['api.example.com']},
                      token=key)
        t.status(r, (200, 201), 'replace the secret after the restart')
        t.eq((r[2] or {}).get('created_at'), secret_before.get('created_at'), 'created_at kept')
        s_new = d.create_sandbox(key, {'name': 'post-restart'})
        t.ok(s_new['id'] not in before, 'new sandbox after the restart gets a new id')
    finally:
        d.stop('boxd stops on SIGTERM with exit code 0 (second run)')
    t.eq(boxtest.grep_dir(d.data_dir, SECRET_VALUE.encode()), [], 'secret value not in plaintext on disk')
    for k in (key, key2['secret'], key_b):
        t.eq(boxtest.grep_dir(d.data_dir, k.encode()), [], 'key %s... not stored on disk (only its hash)' % k[:8])
        t.ok(k not in d.log_text(), 'key %s... not in boxd\'s log' % k[:8])


def test_sighup(t):
    d = Boxd(t).start()   # no --edge-listen: nothing to reload
    key = d.project_with_key('hup')
    for i in range(2):
        d.proc.send_signal(signal.SIGHUP)
        end = time.time() + 10
        while d.log_text().count('SIGHUP: nothing to reload') <= i and time.time() < end:
            time.sleep(0.05)
        t.ok(d.log_text().count('SIGHUP: nothing to reload') > i,
             'SIGHUP %d without the edge: logged' % (i + 1), d.log_text()[-1000:])
        t.ok(d.alive(), '... and boxd lives')
        t.status(d.request('GET', '/v1/whoami', token=key), 200, '... and answers')
    d.stop()


def test_one_boxd_per_data_dir(t):
    d = Boxd(t).start()
    key = d.project_with_key('alpha')
    second = Boxd(t, data_dir=d.data_dir, admin_token=d.admin_token)
    try:
        second.start(wait=False)
        try:
            rc = second.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            rc = 'still running'
        if rc == 'still running':
            second.stop('(stopping the second boxd)')
        else:
            second.logf.close()
            second.proc = None
        t.eq(rc, 1, 'a second boxd on the same data dir exits with 1')
        t.ok('is in use by another boxd (pid %d)' % d.proc.pid in second.log_text(),
             'saying which boxd holds it', second.log_text()[-600:])
        t.status(d.request('GET', '/v1/whoami', token=key), 200, 'the first one keeps serving')
    finally:
        d.stop()
    second.start()
    t.status(second.request('GET', '/v1/whoami', token=key), 200,
             'once the first stopped, a boxd starts on the same data dir')
    second.stop()


def test_kill9_burst(t):
    # The creator makes as many sandboxes as it can until the kill (often
    # hundreds on the dummy hypervisor): no project quota here, this test is
    # about what survives a SIGKILL (tests/e2e/test_limits.py has the quotas).
    conf = os.path.join(tempfile.mkdtemp(prefix='box-e2e-restart-'), 'boxd.conf')
    with open(conf, 'w') as f:
        f.write('[quota]\nsandboxes=0\ncpus=0\nmemory_mib=0\ndisk_gib=0\n')
    d = Boxd(t, extra_args=['--config', conf]).start()
    key = d.project_with_key('alpha')
    target = d.create_sandbox(key, {'name': 'target', 'labels': {'n': '0'}})
    acked_creates = {}     # id -> seq
    acked_patch = [0]
    stop = threading.Event()
    errors = []

    def creator():
        i = 0
        while not stop.is_set():
            i += 1
            try:
                r = d.request('POST', '/v1/sandboxes', {'name': 'burst-%d' % i, 'labels': {'seq': str(i)}},
                              token=key, timeout=10)
            except Exception:   # noqa: BLE001 - boxd was killed
                return
            if r[0] == 201:
                acked_creates[r[2]['id']] = i
            else:
                errors.append(('create', r[0], r[3][:200]))

    def patcher():
        i = 0
        while not stop.is_set():
            i += 1
            try:
                r = d.request('PATCH', '/v1/sandboxes/target', {'labels': {'n': str(i)}}, token=key, timeout=10)
            except Exception:   # noqa: BLE001 - boxd was killed
                return
            if r[0] == 200:
                acked_patch[0] = i
            else:
                errors.append(('patch', r[0], r[3][:200]))

    threads = [threading.Thread(target=creator, daemon=True), threading.Thread(target=patcher, daemon=True)]
    for th in threads:
        th.start()
    goal = random.randint(20, 80)
    t.comment('killing after about %d acknowledged writes of each kind' % goal)
    end = time.time() + 15
    while time.time() < end and (len(acked_creates) < goal or acked_patch[0] < goal):
        time.sleep(0.05)
    d.kill9()
    stop.set()
    for th in threads:
        th.join(15)
    n_creates, n_patch = len(acked_creates), acked_patch[0]
    t.comment('acknowledged before SIGKILL: %d creates, %d label PATCHes' % (n_creates, n_patch))
    t.eq(errors, [], 'no write was refused during the burst')
    t.ok(n_creates >= 5 and n_patch >= 5, 'the burst got writes acknowledged before the kill',
         (n_creates, n_patch))

    d.start()
    try:
        r = d.request('GET', '/v1/sandboxes', token=key)
        t.status(r, 200, 'store opens and lists after SIGKILL')
        listed = {x['id']: x for x in (r[2] or {}).get('sandboxes', [])}
        missing = [sid for sid in acked_creates if sid not in listed]
        t.eq(missing, [], 'every acknowledged create is present after SIGKILL')
        bad_labels = [sid for sid, i in acked_creates.items()
                      if sid in listed and listed[sid].get('labels') != {'seq': str(i)}]
        t.eq(bad_labels, [], 'acknowledged creates kept their labels')
        extra = [x['name'] for sid, x in listed.items() if sid not in acked_creates and sid != target['id']]
        t.ok(len(extra) <= 1, 'at most the one in-flight create is present unacknowledged', extra)
        n = (listed.get(target['id'], {}).get('labels') or {}).get('n')
        t.ok(n in (str(n_patch), str(n_patch + 1)),
             'the last acknowledged PATCH is kept (label n=%d, or the in-flight %d)' % (n_patch, n_patch + 1),
             'got n=%r' % n)
        for sid in list(acked_creates)[:3]:
            t.status(d.request('GET', '/v1/sandboxes/%s' % sid, token=key), 200, 'GET acknowledged %s' % sid)
        r = d.request('POST', '/v1/sandboxes', {'name': 'after-crash'}, token=key)
        t.status(r, 201, 'creates work after the crash')
        r = d.request('PATCH', '/v1/sandboxes/target', {'labels': {'n': 'final'}}, token=key)
        t.status(r, 200, 'PATCH works after the crash')
    finally:
        d.stop('boxd stops on SIGTERM with exit code 0 after the crash restart')
    dbs = boxtest.sqlite_files(d.data_dir)
    t.comment('SQLite files: %r' % dbs)
    for p in dbs:
        try:
            con = sqlite3.connect('file:%s?mode=ro' % p, uri=True)
            res = con.execute('PRAGMA integrity_check').fetchall()
            con.close()
        except sqlite3.Error as e:
            res = [('error: %s' % e,)]
        t.eq(res, [('ok',)], 'integrity_check of %s' % p.replace(d.data_dir, '<data-dir>'))


if __name__ == '__main__':
    boxtest.main(Tap(), test_restart, test_sighup, test_one_boxd_per_data_dir, test_kill9_burst)
