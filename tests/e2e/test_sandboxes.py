#!/usr/bin/env python3
# e2e: sandbox records: create defaults, get, list filters, PATCH, delete,
# pause/stop/wake with the dummy hypervisor, templates, network defaults.

import datetime
import threading
import time

import boxtest
from boxtest import Boxd, Tap, SANDBOX_DOMAIN


def check_sandbox_shape(t, s, what):
    t.fields(s, boxtest.SANDBOX_FIELDS, '%s: exactly the Sandbox fields' % what)


def test_create_defaults(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        r = d.request('POST', '/v1/sandboxes', {}, token=key)
        t.status(r, 201, 'POST /v1/sandboxes {}')
        s = r[2] or {}
        t.ok(r[1].get('content-type', '').startswith('application/json'), 'create answers JSON',
             r[1].get('content-type'))
        check_sandbox_shape(t, s, 'created sandbox')
        t.match(boxtest.RE_SANDBOX_ID, s.get('id'), 'id is sb- + 12 base32')
        t.match(boxtest.RE_GEN_NAME, s.get('name'), 'generated name is <adjective>-<noun>-<4 digits>')
        t.eq(s.get('project'), 'alpha', 'project')
        t.eq(s.get('template'), 'base', 'template default base')
        t.eq(s.get('image'), '', 'image ""')
        t.eq(s.get('state'), 'running', 'state running (create answers once running)')
        t.eq(s.get('resources'), {'cpus': 2, 'memory_mib': 2048, 'disk_gib': 20},
             'resources from the base template')
        t.eq(s.get('env'), {}, 'env {}')
        t.eq(s.get('labels'), {}, 'labels {}')
        t.eq(s.get('idle'), {'timeout_s': 300, 'action': 'pause'}, 'idle default {300, pause}')
        t.ok('deadline' in s and s['deadline'] is None, 'deadline null', s.get('deadline'))
        t.eq(s.get('protected'), False, 'protected false')
        t.eq(s.get('http_port'), 8080, 'http_port 8080')
        t.eq(s.get('network'), {'egress': []}, 'network {egress: []}')
        t.eq(s.get('secrets'), [], 'secrets []')
        t.eq(s.get('url'), 'https://%s--alpha.%s' % (s.get('name'), SANDBOX_DOMAIN),
             'url https://<name>--<project>.<sandbox_domain>')
        t.eq(s.get('urls'), [], 'urls [] without project domains')
        for f in ('created_at', 'updated_at', 'last_active_at'):
            t.ok(boxtest.is_utc_ts(s.get(f)), '%s is RFC 3339 UTC' % f, repr(s.get(f)))
        c = boxtest.parse_ts(s.get('created_at'))
        now = datetime.datetime.now(datetime.timezone.utc)
        t.ok(c is not None and abs((now - c).total_seconds()) < 60, 'created_at is about now',
             repr(s.get('created_at')))

        # two generated names differ
        s2 = d.create_sandbox(key)
        t.ok(s2.get('name') != s.get('name') and s2.get('id') != s.get('id'),
             'two sandboxes get different ids and names')

        # project domains -> urls
        key_b = d.project_with_key('beta', ['apps.example.com', 'b.example.net'])
        sb = d.create_sandbox(key_b, {'name': 'web'})
        t.eq(sb.get('urls'), ['https://web.apps.example.com', 'https://web.b.example.net'],
             'urls under each project domain')
        t.eq(sb.get('url'), 'https://web--beta.%s' % SANDBOX_DOMAIN, 'url with the given name')
        r = d.admin('PATCH', '/v1/projects/beta', {'domains': ['c.example.org']})
        t.status(r, 200, 'PATCH project domains')
        r = d.request('GET', '/v1/sandboxes/web', token=key_b)
        t.eq((r[2] or {}).get('urls'), ['https://web.c.example.org'], 'urls follow the project domains')

        # everything given
        body = {'name': 'full', 'template': 'base', 'resources': {'cpus': 1, 'memory_mib': 128, 'disk_gib': 1},
                'env': {'A_b1': 'x', '_Z': ''}, 'labels': {'team': 'core', 'k' * 63: 'v' * 255},
                'idle': {'timeout_s': 30, 'action': 'stop'},
                'deadline': {'at': boxtest.future(3600), 'action': 'pause'}, 'protected': True,
                'http_port': 3000,
                'network': {'egress': [{'domain': 'example.com', 'action': 'allow'},
                                       {'domain': '*.example.org', 'action': 'allow', 'ports': [22]},
                                       {'domain': 'bad.example.com', 'action': 'deny'}]}}
        # egress rules are refused until something enforces them (issue
        # 16): the whole create fails and leaves nothing behind
        before = d.sandbox_ids(key)
        r = d.request('POST', '/v1/sandboxes', body, token=key)
        t.error(r, 501, 'unsupported', 'create with egress rules')
        t.eq(d.sandbox_ids(key), before, 'a create with egress rules created nothing')
        t.status(d.request('GET', '/v1/sandboxes/full', token=key), 404, 'no sandbox named full')
        body['network'] = {'egress': []}
        r = d.request('POST', '/v1/sandboxes', body, token=key)
        t.status(r, 201, 'create with every field')
        f = r[2] or {}
        t.eq(f.get('resources'), {'cpus': 1, 'memory_mib': 128, 'disk_gib': 1}, 'lower bounds of resources accepted')
        t.eq(f.get('env'), body['env'], 'env echoed')
        t.eq(f.get('labels'), body['labels'], 'labels echoed (63-char key, 255-char value)')
        t.eq(f.get('idle'), {'timeout_s': 30, 'action': 'stop'}, 'idle echoed (minimum 30)')
        dl = f.get('deadline') or {}
        t.eq(dl.get('action'), 'pause', 'deadline action echoed')
        t.ok(boxtest.parse_ts(dl.get('at')) == boxtest.parse_ts(body['deadline']['at']),
             'deadline at echoed', dl)
        t.eq(f.get('protected'), True, 'protected echoed')
        t.eq(f.get('http_port'), 3000, 'http_port echoed')
        t.eq(f.get('network'), {'egress': []}, 'an empty egress list echoed')

        # cpus 0 -> template
        r = d.request('POST', '/v1/sandboxes', {'resources': {'cpus': 0, 'memory_mib': 512}}, token=key)
        t.status(r, 201, 'create with cpus 0')
        t.eq((r[2] or {}).get('resources'), {'cpus': 2, 'memory_mib': 512, 'disk_gib': 20},
             'cpus 0 and omitted disk come from the template')

        # a name of 31 chars with a 23-char project is 54: allowed
        key_l = d.project_with_key('validation-project-abcd')
        r = d.request('POST', '/v1/sandboxes', {'name': 'n' * 31}, token=key_l)
        t.status(r, 201, 'name + project = 54 chars')
        r = d.request('POST', '/v1/sandboxes', {'name': 'm' * 32}, token=key_l)
        t.error(r, 400, 'invalid', 'name + project = 55 chars')
        r = d.request('POST', '/v1/sandboxes', {'name': 'x' * 32}, token=key)
        t.status(r, 201, 'name of 32 chars (short project)')
        r = d.request('POST', '/v1/sandboxes', {'name': 'a1-b2-c3'}, token=key)
        t.status(r, 201, 'name with digits and single dashes')
        r = d.request('POST', '/v1/sandboxes', {'name': '9lives'}, token=key)
        t.status(r, 201, 'name starting with a digit')

        # explicit null / empty objects mean the defaults
        r = d.request('POST', '/v1/sandboxes', {'deadline': None, 'idle': {}, 'network': {}, 'env': {},
                                                'labels': {}, 'secrets': []}, token=key)
        t.status(r, 201, 'create with deadline null, idle {}, network {}')
        x = r[2] or {}
        t.ok(x.get('deadline', 'x') is None and x.get('idle') == {'timeout_s': 300, 'action': 'pause'}
             and x.get('network') == {'egress': []}, 'null and {} give the defaults', x)

        # concurrent creates of one name: exactly one wins
        results = []

        def racer():
            results.append(d.request('POST', '/v1/sandboxes', {'name': 'race'}, token=key))

        threads = [threading.Thread(target=racer) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        t.eq(sorted(r[0] for r in results), [201] + [409] * 7, '8 concurrent creates of one name: one 201, seven 409')
        t.ok(all((r[2] or {}).get('error', {}).get('code') == 'already_exists' for r in results if r[0] == 409),
             'the losers get already_exists')
        r = d.request('GET', '/v1/sandboxes', token=key)
        t.eq(len([x for x in (r[2] or {}).get('sandboxes', []) if x.get('name') == 'race']), 1,
             'one sandbox named race listed')
    finally:
        d.stop()


def test_get_list(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        s1 = d.create_sandbox(key, {'name': 'one', 'labels': {'team': 'a', 'env': 'prod'}})
        s2 = d.create_sandbox(key, {'name': 'two', 'labels': {'team': 'a', 'env': 'dev'}})
        s3 = d.create_sandbox(key, {'name': 'three', 'labels': {'team': 'b', 'x': 'a=b'}})

        r = d.request('GET', '/v1/sandboxes/%s' % s1['id'], token=key)
        t.status(r, 200, 'GET by id')
        t.eq(r[2], s1, 'GET by id answers the created record')
        r = d.request('GET', '/v1/sandboxes/one', token=key)
        t.status(r, 200, 'GET by name')
        t.eq((r[2] or {}).get('id'), s1['id'], 'GET by name answers the same sandbox')
        t.error(d.request('GET', '/v1/sandboxes/nope', token=key), 404, 'not_found', 'GET unknown name')
        t.error(d.request('GET', '/v1/sandboxes/sb-aaaaaaaaaaaa', token=key), 404, 'not_found',
                'GET unknown id')

        def names(query):
            r = d.request('GET', '/v1/sandboxes' + query, token=key)
            if r[0] != 200:
                return ('status', r[0], r[3][:200])
            return sorted(x['name'] for x in r[2]['sandboxes'])

        r = d.request('GET', '/v1/sandboxes', token=key)
        t.status(r, 200, 'GET /v1/sandboxes')
        t.fields(r[2] or {}, {'sandboxes'}, 'list is {sandboxes: [...]}')
        t.ok(all(set(x.keys()) == boxtest.SANDBOX_FIELDS for x in (r[2] or {}).get('sandboxes', [])),
             'listed sandboxes have exactly the Sandbox fields')
        t.eq(names(''), ['one', 'three', 'two'], 'list all')
        t.eq(names('?label=team=a'), ['one', 'two'], 'label=team=a')
        t.eq(names('?label=team=a&label=env=prod'), ['one'], 'label=team=a&label=env=prod (AND)')
        t.eq(names('?label=team=b&label=env=prod'), [], 'labels that no sandbox has together')
        t.eq(names('?label=team=c'), [], 'label value nobody has')
        t.eq(names('?label=x=a%3Db'), ['three'], 'label value containing "=" (URL-encoded)')
        t.eq(names('?state=running'), ['one', 'three', 'two'], 'state=running')
        t.eq(names('?state=paused'), [], 'state=paused before any pause')

        r = d.request('POST', '/v1/sandboxes/two/pause', token=key)
        t.status(r, 200, 'pause two')
        t.eq(names('?state=paused'), ['two'], 'state=paused after the pause')
        t.eq(names('?state=running'), ['one', 'three'], 'state=running after the pause')
        t.eq(names('?state=paused&label=team=a'), ['two'], 'state and label together')
        t.eq(names('?state=running&label=team=a'), ['one'], 'state=running&label=team=a')
        t.ok(s2 and s3, 'fixtures created')
    finally:
        d.stop()


def test_patch(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        s = d.create_sandbox(key, {'name': 'pat', 'env': {'A': '1', 'B': '2'}, 'labels': {'l1': 'x', 'l2': 'y'},
                                   'idle': {'timeout_s': 600, 'action': 'stop'}})
        time.sleep(1.1)

        def patch(body, desc):
            r = d.request('PATCH', '/v1/sandboxes/pat', body, token=key)
            t.status(r, 200, 'PATCH %s' % desc)
            return r[2] or {}

        p = patch({'env': {'C': '3'}}, 'env {C}')
        t.eq(p.get('env'), {'C': '3'}, 'env replaces the whole map')
        t.eq(p.get('labels'), {'l1': 'x', 'l2': 'y'}, 'labels untouched by an env PATCH')
        ua = boxtest.parse_ts(p.get('updated_at'))
        t.ok(ua is not None and ua > boxtest.parse_ts(s['updated_at']), 'updated_at moves on PATCH',
             (s['updated_at'], p.get('updated_at')))
        t.eq(p.get('created_at'), s['created_at'], 'created_at kept on PATCH')
        t.eq(p.get('id'), s['id'], 'id kept')

        p = patch({'labels': {'l3': 'z'}}, 'labels {l3}')
        t.eq(p.get('labels'), {'l3': 'z'}, 'labels replace the whole map')
        t.eq(p.get('env'), {'C': '3'}, 'env untouched by a labels PATCH')
        p = patch({'labels': {}}, 'labels {}')
        t.eq(p.get('labels'), {}, 'labels {} clears them')

        p = patch({'idle': {'action': 'none'}}, 'idle {action: none}')
        t.eq(p.get('idle'), {'timeout_s': 600, 'action': 'none'}, 'idle merges: timeout kept')
        p = patch({'idle': {'timeout_s': 45}}, 'idle {timeout_s: 45}')
        t.eq(p.get('idle'), {'timeout_s': 45, 'action': 'none'}, 'idle merges: action kept')

        at = boxtest.future(7200)
        p = patch({'deadline': {'at': at, 'action': 'stop'}}, 'deadline set')
        dl = p.get('deadline') or {}
        t.ok(dl.get('action') == 'stop' and boxtest.parse_ts(dl.get('at')) == boxtest.parse_ts(at),
             'deadline object sets it', p.get('deadline'))
        p = patch({'protected': True}, 'protected true')
        t.eq(p.get('protected'), True, 'protected set')
        t.ok((p.get('deadline') or {}).get('action') == 'stop', 'omitted deadline is kept', p.get('deadline'))
        p = patch({'deadline': None}, 'deadline null')
        t.ok('deadline' in p and p['deadline'] is None, 'deadline null clears it', p.get('deadline'))
        p = patch({'http_port': 3000}, 'http_port 3000')
        t.eq(p.get('http_port'), 3000, 'http_port set')
        p = patch({'network': {'egress': []}}, 'network with no rules')
        t.eq(p.get('network'), {'egress': []}, 'an empty egress list accepted')
        # rules are refused until something enforces them (issue 16), in
        # every state: stored but unenforced they would fail open
        for action, state in [(None, 'running'), ('pause', 'paused'), ('stop', 'stopped'),
                              ('wake', 'running')]:
            if action is not None:
                t.status(d.request('POST', '/v1/sandboxes/pat/%s' % action, token=key), 200, action + ' pat')
            was = d.request('GET', '/v1/sandboxes/pat', token=key)[2] or {}
            t.eq(was.get('state'), state, 'pat is ' + state)
            for rules in ([{'domain': 'a.example.com', 'action': 'allow'}], [{'domain': '*', 'action': 'deny'}],
                          [{'include': 'defaults'}]):
                r = d.request('PATCH', '/v1/sandboxes/pat', {'network': {'egress': rules}, 'labels': {'x': 'y'}},
                              token=key)
                t.error(r, 501, 'unsupported', 'PATCH %s sandbox with egress %s' % (state, rules))
            now = d.request('GET', '/v1/sandboxes/pat', token=key)[2]
            t.eq(now, was, 'refused egress PATCHes on the %s sandbox changed nothing' % state)
        p = patch({}, 'empty body')
        t.eq(p.get('http_port'), 3000, 'an empty PATCH changes nothing')
        t.eq(p.get('protected'), True, 'an empty PATCH keeps protected')
        r = d.request('GET', '/v1/sandboxes/%s' % s['id'], token=key)
        t.eq(r[2], p, 'GET after PATCH answers the PATCHed record')

        before = d.request('GET', '/v1/sandboxes/pat', token=key)[2]
        bad = [
            ({'idle': {'timeout_s': 29}}, 'idle.timeout_s 29'),
            ({'idle': {'action': 'sleep'}}, 'idle.action sleep'),
            ({'labels': {'k' * 64: 'v'}}, 'label key 64 chars'),
            ({'labels': {'a=b': 'v'}}, 'label key with ='),
            ({'labels': {'k': 'v' * 256}}, 'label value 256 chars'),
            ({'env': {'1A': 'x'}}, 'env name starting with a digit'),
            ({'env': {'A-B': 'x'}}, 'env name with -'),
            ({'deadline': {'at': '2001-01-01T00:00:00Z', 'action': 'delete'}}, 'deadline in the past'),
            ({'deadline': {'at': boxtest.future(3600), 'action': 'explode'}}, 'deadline action explode'),
            ({'network': {'egress': [{'domain': '10.0.0.1', 'action': 'allow'}]}}, 'rule with an IP'),
            ({'network': {'egress': [{'domain': 'x.com', 'action': 'deny', 'ports': [443]}]}}, 'deny with ports'),
            ({'http_port': 70000}, 'http_port 70000'),
            ({'protected': 'yes'}, 'protected as a string'),
            ({'name': 'renamed'}, 'name (not an UpdateSandbox field)'),
            ({'template': 'base'}, 'template (not an UpdateSandbox field)'),
            ({'resources': {'cpus': 4}}, 'resources (not an UpdateSandbox field)'),
        ]
        for body, desc in bad:
            t.error(d.request('PATCH', '/v1/sandboxes/pat', body, token=key), 400, 'invalid', 'PATCH ' + desc)
        r = d.request('PATCH', '/v1/sandboxes/pat', {'bogus': 1}, token=key)
        t.error(r, 400, 'invalid', 'PATCH unknown field', message='bad request body: json: unknown field bogus')
        t.error(d.request('PATCH', '/v1/sandboxes/pat', raw='{', token=key), 400, 'invalid', 'PATCH malformed JSON')
        # a refused PATCH with a valid part changes nothing either
        t.error(d.request('PATCH', '/v1/sandboxes/pat', {'labels': {'ok': 'v'}, 'idle': {'timeout_s': 1}},
                          token=key), 400, 'invalid', 'PATCH with a good and a bad field')
        after = d.request('GET', '/v1/sandboxes/pat', token=key)[2]
        t.eq(after, before, 'refused PATCHes changed nothing')
        t.error(d.request('PATCH', '/v1/sandboxes/nope', {'labels': {}}, token=key), 404, 'not_found',
                'PATCH unknown sandbox')
    finally:
        d.stop()


def test_delete_and_states(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        s = d.create_sandbox(key, {'name': 'keep', 'protected': True})
        t.error(d.request('DELETE', '/v1/sandboxes/keep', token=key), 409, 'conflict', 'DELETE protected sandbox')
        t.status(d.request('GET', '/v1/sandboxes/keep', token=key), 200, 'protected sandbox still there')
        t.status(d.request('PATCH', '/v1/sandboxes/keep', {'protected': False}, token=key), 200, 'unprotect')
        r = d.request('DELETE', '/v1/sandboxes/%s' % s['id'], token=key)
        t.status(r, 204, 'DELETE by id')
        t.eq(r[3], b'', '204 has no body')
        t.error(d.request('GET', '/v1/sandboxes/keep', token=key), 404, 'not_found', 'GET deleted sandbox')
        t.error(d.request('DELETE', '/v1/sandboxes/keep', token=key), 404, 'not_found', 'DELETE again')
        t.eq(d.sandbox_ids(key), [], 'deleted sandbox not listed')
        s2 = d.create_sandbox(key, {'name': 'keep'})
        t.ok(s2.get('id') != s['id'], 'the name is free again after a delete, with a new id', s2.get('id'))
        r = d.request('DELETE', '/v1/sandboxes/keep', token=key)
        t.status(r, 204, 'DELETE by name')

        s = d.create_sandbox(key, {'name': 'st'})

        def act(verb, want_state, desc):
            r = d.request('POST', '/v1/sandboxes/st/%s' % verb, token=key)
            t.status(r, 200, desc)
            t.eq((r[2] or {}).get('state'), want_state, '%s answers state %s' % (desc, want_state))
            g = d.request('GET', '/v1/sandboxes/st', token=key)
            t.eq((g[2] or {}).get('state'), want_state, 'GET after %s: %s' % (desc, want_state))
            return r[2] or {}

        p = act('pause', 'paused', 'pause running')
        t.fields(p, boxtest.SANDBOX_FIELDS, 'pause answers a Sandbox')
        act('pause', 'paused', 'pause paused (no-op)')
        act('wake', 'running', 'wake paused')
        act('wake', 'running', 'wake running (no-op)')
        act('stop', 'stopped', 'stop running')
        act('stop', 'stopped', 'stop stopped (no-op)')
        t.error(d.request('POST', '/v1/sandboxes/st/pause', token=key), 409, 'conflict', 'pause stopped')
        g = d.request('GET', '/v1/sandboxes/st', token=key)
        t.eq((g[2] or {}).get('state'), 'stopped', 'still stopped after the refused pause')
        act('wake', 'running', 'wake stopped')
        act('pause', 'paused', 'pause again')
        act('stop', 'stopped', 'stop paused')
        for verb in ('pause', 'stop', 'wake'):
            t.error(d.request('POST', '/v1/sandboxes/nope/%s' % verb, token=key), 404, 'not_found',
                    '%s unknown sandbox' % verb)
        # delete in any state
        r = d.request('DELETE', '/v1/sandboxes/st', token=key)
        t.status(r, 204, 'DELETE stopped sandbox')
        s3 = d.create_sandbox(key, {'name': 'pz'})
        t.status(d.request('POST', '/v1/sandboxes/pz/pause', token=key), 200, 'pause pz')
        r = d.request('PATCH', '/v1/sandboxes/pz', {'labels': {'a': 'b'}, 'env': {'E': '1'},
                                                     'network': {'egress': []}},
                      token=key)
        t.status(r, 200, 'PATCH a paused sandbox')
        t.eq((r[2] or {}).get('state'), 'paused', 'PATCH does not wake a paused sandbox')
        t.eq((d.request('GET', '/v1/sandboxes/pz', token=key)[2] or {}).get('labels'), {'a': 'b'},
             'PATCH of a paused sandbox kept')
        t.status(d.request('DELETE', '/v1/sandboxes/%s' % s3['id'], token=key), 204, 'DELETE paused sandbox')
        t.eq(d.sandbox_ids(key), [], 'nothing left')
    finally:
        d.stop()


def test_catalogue(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        r = d.request('GET', '/v1/templates', token=key)
        t.status(r, 200, 'GET /v1/templates')
        body = r[2] or {}
        t.fields(body, {'templates'}, 'templates is {templates: [...]}')
        base = [x for x in body.get('templates', []) if x.get('name') == 'base']
        t.eq(len(base), 1, 'template base present once')
        if base:
            t.fields(base[0], {'name', 'image', 'resources'}, 'template has exactly name, image, resources')
            t.eq(base[0].get('resources'), {'cpus': 2, 'memory_mib': 2048, 'disk_gib': 20},
                 'base: 2 CPUs, 2048 MiB, 20 GiB')
            t.ok(isinstance(base[0].get('image'), str), 'template image is a string', base[0])

        r = d.request('GET', '/v1/network/defaults', token=key)
        t.status(r, 200, 'GET /v1/network/defaults')
        body = r[2] or {}
        t.fields(body, {'egress'}, 'network defaults is {egress: [...]}')
        eg = body.get('egress') or []
        t.ok(len(eg) > 0, 'network defaults not empty', len(eg))
        t.ok(all(set(x.keys()) == {'domain', 'action', 'ports'} and x['action'] == 'allow'
                 and x['ports'] == [80, 443] and isinstance(x['domain'], str) and x['domain'] != ''
                 for x in eg),
             'each default is {domain, action: allow, ports: [80, 443]}',
             [x for x in eg if not (isinstance(x, dict) and x.get('action') == 'allow'
                                    and x.get('ports') == [80, 443])][:5])
        t.ok(len(set(x.get('domain') for x in eg)) == len(eg), 'default domains are distinct')
        t.ok(len(eg) <= 1000, 'defaults fit in 1000 rules', len(eg))
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_create_defaults, test_get_list, test_patch, test_delete_and_states,
                 test_catalogue)
