#!/usr/bin/env python3
# e2e: [boxd] network_defaults_file replaces the compiled-in list that
# {include: defaults} stands for: GET /v1/network/defaults serves it, the
# 1000-rule limit counts it, and a bad file stops boxd at start with a
# message naming the file and the fault.

import json
import os
import shutil
import subprocess
import tempfile

import boxtest
from boxtest import Boxd, Tap

OWN = [
    {'domain': 'mirror.corp.example', 'action': 'allow', 'ports': [80, 443]},
    {'domain': '*.artifacts.corp.example', 'action': 'allow', 'ports': [443, 8443]},
    {'domain': 'bad.corp.example', 'action': 'deny'},
]


def write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def test_own_defaults(t):
    work = tempfile.mkdtemp(prefix='box-e2e-defaults-')
    try:
        listfile = os.path.join(work, 'defaults.json')
        conf = os.path.join(work, 'boxd.conf')
        write(listfile, json.dumps({'comment': 'ours', 'egress': OWN}))
        write(conf, '[boxd]\nnetwork_defaults_file=%s\n' % listfile)
        d = Boxd(t, extra_args=['--config', conf]).start()
        try:
            key = d.project_with_key('defaults')
            r = d.request('GET', '/v1/network/defaults', token=key)
            t.status(r, 200, 'GET /v1/network/defaults with an own list')
            t.eq((r[2] or {}).get('egress'), OWN, 'the own list is served as written')
            # the limit counts the own list expanded: 3 + 998 = 1001
            rules = [{'domain': 'h%d.example.com' % i, 'action': 'allow'} for i in range(998)]
            r = d.request('POST', '/v1/sandboxes',
                          {'network': {'egress': rules + [{'include': 'defaults'}]}}, token=key)
            t.error(r, 400, 'invalid', '998 rules + include of 3 defaults is too many',
                    message_contains='1001 counting defaults expanded')
            r = d.request('POST', '/v1/sandboxes',
                          {'network': {'egress': rules[:997] + [{'include': 'defaults'}]}},
                          token=key)
            # 1000: within the limit (201 where rules are enforced, 501 where not)
            t.ok(r[0] in (201, 501), '997 rules + include of 3 defaults is within the limit',
                 '%s %s' % (r[0], r[3][:300]))
            t.eq(d.sandbox_ids(key) if r[0] != 201 else [], [], 'a refused create made nothing')
        finally:
            d.stop()

        # an empty value keeps the compiled-in list
        write(conf, '[boxd]\nnetwork_defaults_file=\n')
        d = Boxd(t, extra_args=['--config', conf]).start()
        try:
            key = d.project_with_key('defaults')
            r = d.request('GET', '/v1/network/defaults', token=key)
            eg = (r[2] or {}).get('egress') or []
            t.ok(r[0] == 200 and len(eg) > 10 and
                 any(x.get('domain') == 'pypi.org' for x in eg),
                 'network_defaults_file= (empty): the compiled-in list', len(eg))
        finally:
            d.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_bad_files(t):
    work = tempfile.mkdtemp(prefix='box-e2e-defaults-bad-')
    conf = os.path.join(work, 'boxd.conf')
    listfile = os.path.join(work, 'defaults.json')
    base = [boxtest.BOXD, '--data-dir', os.path.join(work, 'data'), '--listen', '127.0.0.1:0',
            '--hypervisor', 'dummy', '--no-dbus', '--plugin-dir', boxtest.PLUGIN_DIR,
            '--config', conf]
    env = dict(os.environ, BOX_ADMIN_TOKEN=boxtest.random_token())
    allow = {'domain': 'ok.example', 'action': 'allow'}
    cases = [
        ('a missing file', None, 'network_defaults_file'),
        ('not JSON', '{"egress": [', 'not JSON'),
        ('an array', '[]', 'not an object with an egress list'),
        ('no egress member', '{"rules": []}', 'not an object with an egress list'),
        ('an unknown member', json.dumps({'egress': [allow], 'extra': 1}), 'extra'),
        ('an empty list', '{"egress": []}', '0 rules; the defaults are 1 to 1000 rules'),
        ('1001 rules', json.dumps({'egress': [{'domain': 'h%d.example' % i, 'action': 'allow'}
                                              for i in range(1001)]}),
         '1001 rules; the defaults are 1 to 1000 rules'),
        ('an include', json.dumps({'egress': [allow, {'include': 'defaults'}]}),
         'rule 2 is an include'),
        ('an IP address', json.dumps({'egress': [{'domain': '10.0.0.1', 'action': 'allow'}]}),
         'an IP address is invalid'),
        ('a deny with ports', json.dumps({'egress': [{'domain': 'x.example', 'action': 'deny',
                                                      'ports': [22]}]}),
         'a deny rule takes no ports'),
        ('port 0', json.dumps({'egress': [{'domain': 'x.example', 'action': 'allow',
                                           'ports': [0]}]}), 'must be 1 to 65535'),
        ('over 1 MiB', json.dumps({'egress': [allow], 'comment': 'x' * (1024 * 1024)}),
         'at most 1048576'),
    ]
    try:
        for desc, text, want in cases:
            if os.path.exists(listfile):
                os.unlink(listfile)
            if text is not None:
                write(listfile, text)
            write(conf, '[boxd]\nnetwork_defaults_file=%s\n' % listfile)
            r = subprocess.run(base, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, timeout=30)
            out = r.stdout.decode('utf-8', 'replace')
            t.ok(r.returncode != 0 and want in out and listfile in out,
                 'network_defaults_file with %s: boxd refuses to start (%s)' % (desc, want),
                 'exit %d: %s' % (r.returncode, out[-500:]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
    boxtest.main(Tap(), test_own_defaults, test_bad_files)
