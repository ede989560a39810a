#!/usr/bin/env python3
# Writes tests/e2e/fixtures/data-v2.{sql,json}: a data directory of the
# release before the generic record store (sqlite schema version 2),
# written by that release's own boxd through its API, for test_migrate.py
# and the sqlite plugin's migration test.
#
#   BOXD=<old build>/core/boxd BOX_PLUGIN_DIR=<old build>/plugins \
#     python3 tests/e2e/make_v2_fixture.py
#
# The old release has no API that writes checkpoint records or meta values,
# so those rows are added in the old format (box-sqlite-store-*.c of that
# release) after boxd has stopped; boxd is then started once more on a copy
# to record what a fork from a checkpoint answered.

import json
import os
import shutil
import sqlite3
import sys

import boxtest
from boxtest import Boxd, Tap

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, 'fixtures')
DEADLINE = '2036-01-01T00:00:00Z'
SECRET_VALUE = 'migrate-secret-6d1f0a'


def must(r, status, what):
    if r[0] != status:
        raise RuntimeError('%s -> %s %s' % (what, r[0], r[3][:300]))
    return r[2]


def populate(d):
    tokens = {}
    d.make_project('alpha', ['apps.example.com'])
    d.make_project('bravo')
    ci = d.make_key('alpha', 'ci')
    second = d.make_key('alpha', 'second')
    other = d.make_key('bravo', 'e2e')
    tokens = {'alpha': ci['secret'], 'alpha2': second['secret'], 'bravo': other['secret']}
    a, b = tokens['alpha'], tokens['bravo']
    must(d.request('PUT', '/v1/secrets/TOKEN', {'value': SECRET_VALUE, 'hosts': ['api.example.com'],
                                                 'placeholder_prefix': 'tk_'}, token=a), 200, 'secret')
    must(d.request('PUT', '/v1/secrets/HEADER', {'value': SECRET_VALUE + '2', 'hosts': ['*.example.org'],
                                                  'inject': {'header': 'X-Api-Key', 'format': '{value}'}},
                   token=a), 200, 'secret 2')
    must(d.request('PUT', '/v1/secrets/TOKEN', {'value': 'bravo-' + SECRET_VALUE, 'hosts': ['b.example.com']},
                   token=b), 200, 'bravo secret')
    d.create_sandbox(a, {'name': 'runner', 'labels': {'team': 'a', 'env': 'prod'}, 'env': {'E': '1'},
                         'idle': {'timeout_s': 900, 'action': 'stop'}, 'protected': True,
                         'deadline': {'at': DEADLINE, 'action': 'delete'},
                         'network': {'egress': [{'domain': 'example.com', 'action': 'allow', 'ports': [443]}]},
                         'http_port': 9000})
    d.create_sandbox(a, {'name': 'sleeper', 'labels': {'team': 'b'}})
    d.create_sandbox(a, {'name': 'stopper', 'secrets': ['TOKEN']})
    d.create_sandbox(b, {'name': 'other', 'labels': {'team': 'a'}})
    must(d.request('POST', '/v1/sandboxes/sleeper/pause', token=a), 200, 'pause')
    must(d.request('POST', '/v1/sandboxes/stopper/stop', token=a), 200, 'stop')
    must(d.request('PUT', '/v1/sandboxes/runner/ports/8080', {'access': 'public'}, token=a), 200, 'port')
    return tokens


def snapshot(d, tokens):
    a, b = tokens['alpha'], tokens['bravo']
    return {
        'projects': must(d.admin('GET', '/v1/projects'), 200, 'projects'),
        'keys': {p: must(d.admin('GET', '/v1/projects/%s/keys' % p), 200, 'keys') for p in ('alpha', 'bravo')},
        'sandboxes': {'alpha': must(d.request('GET', '/v1/sandboxes', token=a), 200, 'list'),
                      'bravo': must(d.request('GET', '/v1/sandboxes', token=b), 200, 'list')},
        'secrets': {'alpha': must(d.request('GET', '/v1/secrets', token=a), 200, 'secrets'),
                    'bravo': must(d.request('GET', '/v1/secrets', token=b), 200, 'secrets')},
        'ports': must(d.request('GET', '/v1/sandboxes/runner/ports/settings', token=a), 200, 'ports'),
    }


def add_old_rows(db_path, sandboxes):
    """Checkpoints and meta rows as the old plugin wrote them."""
    runner = [s for s in sandboxes['alpha']['sandboxes'] if s['name'] == 'runner'][0]['id']
    con = sqlite3.connect(db_path)
    rows = [('v1', 'first', True, False, 1700000000000000), ('v2', None, False, False, 1700000000000000),
            ('auto-1', 'idle', True, True, 1700000000000000), ('v10', 'later', False, False, 1700000005000000)]
    for seq, (cid, comment, memory, auto, at) in enumerate(rows, 1):
        data = json.dumps({'id': cid, 'sandbox': runner, 'project': 'alpha', 'comment': comment,
                           'memory': memory, 'auto': auto, 'created_at': at}, separators=(',', ':'))
        con.execute('INSERT INTO checkpoints (sandbox_id, id, project, created_at, created_seq, data) '
                    'VALUES (?, ?, ?, ?, ?, ?)', (runner, cid, 'alpha', at, seq, data))
    con.execute('INSERT INTO meta (key, value) VALUES (?, ?)', ('node-id', b'node-\x00\x01\xff'))
    con.commit()
    con.close()
    return runner, [r[0] for r in rows]


def dump(db_path):
    con = sqlite3.connect(db_path)
    version = con.execute('PRAGMA user_version').fetchone()[0]
    app_id = con.execute('PRAGMA application_id').fetchone()[0]
    lines = list(con.iterdump())
    con.close()
    return '\n'.join(lines + ['PRAGMA application_id = %d;' % app_id, 'PRAGMA user_version = %d;' % version]) + '\n'


def main():
    t = Tap()
    d = Boxd(t)
    try:
        d.start()
        tokens = populate(d)
        snap = snapshot(d, tokens)
        d.stop()
        db_path = os.path.join(d.data_dir, 'sqlite', 'box.db')
        runner, checkpoints = add_old_rows(db_path, snap['sandboxes'])
        with open(os.path.join(d.data_dir, 'secret.key'), 'rb') as f:
            secret_key = f.read().hex()
        # the dummy hypervisor's VMs, so that the sandboxes keep their states
        dummy_dir = os.path.join(d.data_dir, 'dummy')
        dummy = {}
        for entry in sorted(os.listdir(dummy_dir)):
            with open(os.path.join(dummy_dir, entry)) as f:
                dummy[entry] = f.read()
        sql = dump(db_path)

        # what the old boxd answers to forks from those checkpoints
        copy = Boxd(t, admin_token=d.admin_token)
        shutil.copytree(d.data_dir, copy.data_dir)
        copy.start()
        forks = {}
        for cid in ('v1', 'v9'):
            r = copy.request('POST', '/v1/sandboxes', {'name': 'fork-' + cid,
                                                        'from': {'sandbox': 'runner', 'checkpoint': cid}},
                             token=tokens['alpha'])
            forks[cid] = [r[0], (r[2] or {}).get('error') if r[0] >= 400 else None]
        copy.stop()
    finally:
        for x in t.daemons:
            x.cleanup()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, 'data-v2.sql'), 'w') as f:
        f.write(sql)
    with open(os.path.join(OUT, 'data-v2.json'), 'w') as f:
        json.dump({'schema_version': 2, 'tokens': tokens, 'secret_key_hex': secret_key, 'dummy_state': dummy,
                   'secret_value': SECRET_VALUE, 'runner': runner, 'checkpoints': checkpoints,
                   'meta': {'node-id': b'node-\x00\x01\xff'.hex()}, 'forks': forks, 'api': snap},
                  f, indent=1, sort_keys=True)
        f.write('\n')
    print('wrote %s/data-v2.{sql,json}' % OUT)


if __name__ == '__main__':
    sys.exit(main())
