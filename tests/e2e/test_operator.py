#!/usr/bin/env python3
# e2e: operator routes (projects, keys), authentication and whoami.

import threading

import boxtest
from boxtest import Boxd, Tap

AUTH_MSG = 'valid API key'


def test_projects(t):
    d = Boxd(t).start()
    try:
        r = d.admin('POST', '/v1/projects', {'name': 'alpha'})
        t.status(r, 201, 'POST /v1/projects {name: alpha}')
        p = r[2] or {}
        t.fields(p, boxtest.PROJECT_FIELDS, 'project has exactly name, domains, created_at')
        t.eq(p.get('name'), 'alpha', 'project name echoed')
        t.eq(p.get('domains'), [], 'project domains default []')
        t.ok(boxtest.is_utc_ts(p.get('created_at')), 'project created_at is RFC 3339 UTC',
             repr(p.get('created_at')))
        t.ok(r[1].get('content-type', '').startswith('application/json'),
             'answer Content-Type is application/json', r[1].get('content-type'))

        t.error(d.admin('POST', '/v1/projects', {'name': 'alpha'}), 409, 'already_exists',
                'POST /v1/projects duplicate name')

        for bad in ['Alpha', '-alpha', 'alpha-', 'al--pha', 'a' * 33, '', 'al_pha', 'al.pha',
                    'al pha']:
            t.error(d.admin('POST', '/v1/projects', {'name': bad}), 400, 'invalid',
                    'POST /v1/projects bad name %r' % bad)
        t.error(d.admin('POST', '/v1/projects', {}), 400, 'invalid', 'POST /v1/projects without name')
        t.error(d.admin('POST', '/v1/projects', {'name': 'gamma', 'bogus': 1}), 400, 'invalid',
                'POST /v1/projects unknown field', message='bad request body: json: unknown field bogus')
        t.error(d.admin('POST', '/v1/projects', raw='{"name": '), 400, 'invalid',
                'POST /v1/projects malformed JSON')
        t.error(d.admin('POST', '/v1/projects', {'name': 7}), 400, 'invalid',
                'POST /v1/projects name of the wrong type')
        t.error(d.admin('POST', '/v1/projects', {'name': 'gamma', 'domains': ['not a domain']}),
                400, 'invalid', 'POST /v1/projects invalid domain')

        r = d.admin('POST', '/v1/projects', {'name': 'b' * 32})
        t.status(r, 201, 'POST /v1/projects name of 32 chars')

        r = d.admin('POST', '/v1/projects', {'name': 'beta', 'domains': ['apps.example.com']})
        t.status(r, 201, 'POST /v1/projects with domains')
        t.eq((r[2] or {}).get('domains'), ['apps.example.com'], 'project domains echoed')

        r = d.admin('GET', '/v1/projects')
        t.status(r, 200, 'GET /v1/projects')
        body = r[2] or {}
        t.fields(body, {'projects'}, 'GET /v1/projects is {projects: [...]}')
        names = sorted(x.get('name') for x in body.get('projects', []))
        t.eq(names, sorted(['alpha', 'beta', 'b' * 32]), 'GET /v1/projects lists the created projects only')
        t.ok(all(set(x.keys()) == boxtest.PROJECT_FIELDS for x in body.get('projects', [])),
             'every listed project has exactly name, domains, created_at', body)

        r = d.admin('GET', '/v1/projects/beta')
        t.status(r, 200, 'GET /v1/projects/beta')
        t.eq((r[2] or {}).get('domains'), ['apps.example.com'], 'GET project shows its domains')
        t.error(d.admin('GET', '/v1/projects/nope'), 404, 'not_found', 'GET /v1/projects/nope')

        r = d.admin('PATCH', '/v1/projects/alpha', {'domains': ['a.example.org', 'b.example.org']})
        t.status(r, 200, 'PATCH /v1/projects/alpha {domains}')
        t.eq((r[2] or {}).get('domains'), ['a.example.org', 'b.example.org'], 'PATCH sets domains')
        r = d.admin('GET', '/v1/projects/alpha')
        t.eq((r[2] or {}).get('domains'), ['a.example.org', 'b.example.org'], 'domains kept after PATCH')
        t.error(d.admin('PATCH', '/v1/projects/nope', {'domains': []}), 404, 'not_found',
                'PATCH /v1/projects/nope')
        t.error(d.admin('PATCH', '/v1/projects/alpha', {'name': 'x'}), 400, 'invalid',
                'PATCH /v1/projects name (unknown field)')

        # domains: lowercase DNS names with a dot, one project each (doc/API.md)
        t.error(d.admin('POST', '/v1/projects', {'name': 'gamma', 'domains': ['apps.example.com']}), 409,
                'already_exists', 'POST /v1/projects with a domain another project has')
        t.error(d.admin('PATCH', '/v1/projects/alpha', {'domains': ['apps.example.com']}), 409,
                'already_exists', 'PATCH a domain another project has')
        for bad in ['nodot', 'Apps.Example.com', 'a..example.com', '-x.example.com', '']:
            t.error(d.admin('POST', '/v1/projects', {'name': 'gamma', 'domains': [bad]}), 400, 'invalid',
                    'POST /v1/projects domain %r' % bad)
        t.error(d.admin('GET', '/v1/projects/gamma'), 404, 'not_found', 'no refused POST created gamma')

        # delete: takes sandboxes and keys along
        key = d.make_key('beta')['secret']
        sb = d.create_sandbox(key, {'name': 'doomed', 'protected': True})
        t.status(d.request('PUT', '/v1/secrets/DOOMED', {'value': 'v', 'hosts': ['a.example.com']}, token=key),
                 (200, 201), 'a secret in beta')
        r = d.admin('DELETE', '/v1/projects/beta')
        t.status(r, 204, 'DELETE /v1/projects/beta (with a protected sandbox)')
        t.error(d.admin('GET', '/v1/projects/beta'), 404, 'not_found', 'GET deleted project')
        t.error(d.request('GET', '/v1/whoami', token=key), 401, 'unauthorized',
                'key of a deleted project', message_contains=AUTH_MSG)
        t.error(d.admin('DELETE', '/v1/projects/beta'), 404, 'not_found', 'DELETE deleted project again')
        r = d.admin('GET', '/v1/projects')
        t.ok('beta' not in [x.get('name') for x in (r[2] or {}).get('projects', [])],
             'deleted project not listed', r[3][:300])
        # same name again: a fresh, empty project
        key2 = d.project_with_key('beta')
        ids = d.sandbox_ids(key2)
        t.eq(ids, [], 'a re-created project does not see the deleted one\'s sandboxes')
        t.error(d.request('GET', '/v1/sandboxes/%s' % sb['id'], token=key2), 404, 'not_found',
                'sandbox of the deleted project is gone')
        t.error(d.request('GET', '/v1/secrets/DOOMED', token=key2), 404, 'not_found',
                'secret of the deleted project is gone')

        # concurrent creates of one project name: exactly one wins
        results = []

        def racer():
            results.append(d.admin('POST', '/v1/projects', {'name': 'racy'}))

        threads = [threading.Thread(target=racer) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        t.eq(sorted(r[0] for r in results), [201] + [409] * 7, '8 concurrent POST /v1/projects racy: one 201')
    finally:
        d.stop()


def test_keys(t):
    d = Boxd(t).start()
    try:
        d.make_project('alpha')
        r = d.admin('POST', '/v1/projects/alpha/keys', {'name': 'ci'})
        t.status(r, 201, 'POST /v1/projects/alpha/keys {name: ci}')
        k = r[2] or {}
        t.fields(k, boxtest.KEY_FIELDS | {'secret'}, 'new key has id, name, project, created_at, secret')
        t.match(boxtest.RE_KEY_SECRET, k.get('secret'), 'key secret has the form box_ + 32 base32')
        t.match(boxtest.RE_KEY_ID, k.get('id'), 'key id has the form key- + 12 base32')
        t.eq(k.get('name'), 'ci', 'key name echoed')
        t.eq(k.get('project'), 'alpha', 'key project')
        t.ok(boxtest.is_utc_ts(k.get('created_at')), 'key created_at RFC 3339 UTC', k.get('created_at'))
        secret = k.get('secret', '')

        r2 = d.admin('POST', '/v1/projects/alpha/keys', {'name': 'dev'})
        t.status(r2, 201, 'second key')
        k2 = r2[2] or {}
        t.ok(k2.get('secret') != secret and k2.get('id') != k.get('id'), 'keys differ')

        r = d.admin('GET', '/v1/projects/alpha/keys')
        t.status(r, 200, 'GET /v1/projects/alpha/keys')
        keys = (r[2] or {}).get('keys', [])
        t.fields(r[2] or {}, {'keys'}, 'GET keys is {keys: [...]}')
        t.eq(sorted(x.get('id') for x in keys), sorted([k.get('id'), k2.get('id')]), 'both keys listed')
        t.ok(all(set(x.keys()) == boxtest.KEY_FIELDS for x in keys),
             'listed keys have exactly id, name, project, created_at (no secret)', keys)
        t.ok(secret.encode() not in r[3] and k2.get('secret', '').encode() not in r[3],
             'GET keys never shows a secret')

        t.error(d.admin('POST', '/v1/projects/nope/keys', {'name': 'x'}), 404, 'not_found',
                'POST keys of an unknown project')
        t.error(d.admin('GET', '/v1/projects/nope/keys'), 404, 'not_found', 'GET keys of an unknown project')
        t.error(d.admin('POST', '/v1/projects/alpha/keys', {'name': 'x', 'bogus': True}), 400, 'invalid',
                'POST keys unknown field')

        for bad in ['', 'k' * 65, 'tab\there']:
            t.error(d.admin('POST', '/v1/projects/alpha/keys', {'name': bad}), 400, 'invalid',
                    'POST keys name %r' % bad[:10])
        t.error(d.admin('POST', '/v1/projects/alpha/keys', {}), 400, 'invalid', 'POST keys without name')
        r = d.admin('POST', '/v1/projects/alpha/keys', {'name': 'k' * 64})
        t.status(r, 201, 'POST keys name of 64 chars')
        t.status(d.admin('DELETE', '/v1/projects/alpha/keys/%s' % (r[2] or {}).get('id')), 204,
                 'DELETE that key')

        # whoami
        r = d.request('GET', '/v1/whoami', token=secret)
        t.status(r, 200, 'GET /v1/whoami with the key')
        w = r[2] or {}
        t.fields(w, {'project', 'key'}, 'whoami is {project, key}')
        t.fields(w.get('project', {}), boxtest.PROJECT_FIELDS, 'whoami project has the Project fields')
        t.eq(w.get('project', {}).get('name'), 'alpha', 'whoami project name')
        t.fields(w.get('key', {}), boxtest.KEY_FIELDS, 'whoami key has the Key fields (no secret)')
        t.eq(w.get('key', {}).get('id'), k.get('id'), 'whoami key id')
        t.eq(w.get('key', {}).get('name'), 'ci', 'whoami key name')
        t.ok(secret.encode() not in r[3], 'whoami does not show the secret')

        # delete: stops working at once, the other key still works
        r = d.admin('DELETE', '/v1/projects/alpha/keys/%s' % k.get('id'))
        t.status(r, 204, 'DELETE key')
        t.error(d.request('GET', '/v1/whoami', token=secret), 401, 'unauthorized',
                'deleted key on /v1/whoami at once', message_contains=AUTH_MSG)
        t.error(d.request('GET', '/v1/sandboxes', token=secret), 401, 'unauthorized',
                'deleted key on /v1/sandboxes', message_contains=AUTH_MSG)
        t.status(d.request('GET', '/v1/whoami', token=k2.get('secret', '')), 200,
                 'the other key still works')
        r = d.admin('GET', '/v1/projects/alpha/keys')
        t.eq([x.get('id') for x in (r[2] or {}).get('keys', [])], [k2.get('id')],
             'deleted key no longer listed')
        t.error(d.admin('DELETE', '/v1/projects/alpha/keys/%s' % k.get('id')), 404, 'not_found',
                'DELETE the deleted key again')
        t.error(d.admin('DELETE', '/v1/projects/alpha/keys/key-aaaaaaaaaaaa'), 404, 'not_found',
                'DELETE an unknown key')
        # a key of another project cannot be deleted through this project
        d.make_project('other')
        ko = d.make_key('other')
        t.error(d.admin('DELETE', '/v1/projects/alpha/keys/%s' % ko['id']), 404, 'not_found',
                'DELETE another project\'s key through alpha')
        t.status(d.request('GET', '/v1/whoami', token=ko['secret']), 200,
                 'that key still works afterwards')
    finally:
        d.stop()


def test_auth(t):
    d = Boxd(t).start()
    try:
        key = d.project_with_key('alpha')
        sb = d.create_sandbox(key, {'name': 'authbox'})
        routes = [('GET', '/v1/whoami'), ('GET', '/v1/sandboxes'), ('POST', '/v1/sandboxes'),
                  ('GET', '/v1/sandboxes/authbox'), ('DELETE', '/v1/sandboxes/authbox'),
                  ('POST', '/v1/sandboxes/authbox/pause'), ('GET', '/v1/secrets'),
                  ('GET', '/v1/templates'), ('GET', '/v1/network/defaults'), ('GET', '/v1/events'),
                  ('GET', '/v1/projects'), ('POST', '/v1/projects'), ('GET', '/v1/projects/alpha/keys')]
        for method, path in routes:
            body = {} if method == 'POST' else None
            t.error(d.request(method, path, body), 401, 'unauthorized',
                    '%s %s without a key' % (method, path), message_contains=AUTH_MSG)
        for cred, what in [('garbage', 'garbage'), ('box_' + 'a' * 32, 'well-formed unknown key'),
                           (key + 'x', 'key with an extra char'), ('', 'empty bearer')]:
            t.error(d.request('GET', '/v1/sandboxes', token=cred), 401, 'unauthorized',
                    'GET /v1/sandboxes with %s' % what, message_contains=AUTH_MSG)
        t.error(d.request('GET', '/v1/sandboxes', headers={'Authorization': key}), 401, 'unauthorized',
                'key without the Bearer scheme', message_contains=AUTH_MSG)
        t.error(d.request('GET', '/v1/sandboxes', headers={'Authorization': 'Basic ' + key}), 401,
                'unauthorized', 'key with the Basic scheme', message_contains=AUTH_MSG)

        # admin token on project routes
        for method, path in [('GET', '/v1/whoami'), ('GET', '/v1/sandboxes'), ('POST', '/v1/sandboxes'),
                             ('GET', '/v1/sandboxes/%s' % sb['id']), ('GET', '/v1/secrets'),
                             ('GET', '/v1/templates'), ('GET', '/v1/events')]:
            body = {} if method == 'POST' else None
            t.error(d.admin(method, path, body), 401, 'unauthorized',
                    'admin token on %s %s' % (method, path))
        # project key on operator routes
        for method, path, body in [('GET', '/v1/projects', None),
                                   ('POST', '/v1/projects', {'name': 'sneaky'}),
                                   ('GET', '/v1/projects/alpha', None),
                                   ('PATCH', '/v1/projects/alpha', {'domains': ['x.example.com']}),
                                   ('DELETE', '/v1/projects/alpha', None),
                                   ('POST', '/v1/projects/alpha/keys', {'name': 'more'}),
                                   ('GET', '/v1/projects/alpha/keys', None)]:
            t.error(d.request(method, path, body, token=key), 401, 'unauthorized',
                    'project key on %s %s' % (method, path))
        r = d.admin('GET', '/v1/projects')
        t.eq(sorted(x.get('name') for x in (r[2] or {}).get('projects', [])), ['alpha'],
             'refused operator calls changed nothing')
        r = d.admin('GET', '/v1/projects/alpha/keys')
        t.eq(len((r[2] or {}).get('keys', [])), 1, 'no key was added by the refused call')
        t.status(d.request('GET', '/v1/sandboxes/authbox', token=key), 200,
                 'sandbox still there after refused deletes')
        t.ok(d.request('GET', '/v1/projects/alpha', token=key)[0] == 401 and
             d.admin('GET', '/v1/projects/alpha')[0] == 200,
             'the admin token works where the project key does not')

        # a path that exists with another method: 405, code invalid, Allow (doc/API.md)
        r = d.request('PUT', '/v1/sandboxes', {}, token=key)
        t.error(r, 405, 'invalid', 'PUT /v1/sandboxes')
        t.ok('GET' in r[1].get('allow', '') and 'POST' in r[1].get('allow', ''),
             '405 has an Allow header with GET and POST', r[1].get('allow'))
        # bodies larger than 1 MiB are 400 invalid (doc/API.md)
        big = {'labels': {'k': 'v'}, 'env': {'BIG': 'x' * (1024 * 1024 + 10)}}
        t.error(d.request('POST', '/v1/sandboxes', big, token=key), 400, 'invalid', 'create with a body > 1 MiB')

        # unknown route with a valid key: an error in the usual shape
        t.error(d.request('GET', '/v1/no-such-route', token=key), 404, 'not_found', 'GET /v1/no-such-route')
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_projects, test_keys, test_auth)
