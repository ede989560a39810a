#!/usr/bin/env python3
# e2e: secrets: routes, placeholders, validation, use by sandboxes, values
# never shown or stored in plaintext, and a deployment without a secret key.

import time

import boxtest
from boxtest import Boxd, Tap

VALUE = 'e2e-VALUE-7f3a9c1be44d-do-not-leak'
VALUE2 = 'e2e-SECOND-91bd02aa7e6c-do-not-leak'


def test_secrets(t):
    # every debug message on, so that the log check below sees everything boxd could log
    d = Boxd(t, env={'G_MESSAGES_DEBUG': 'all'}).start()
    try:
        key = d.project_with_key('alpha')
        r = d.request('PUT', '/v1/secrets/GITHUB_TOKEN', {'value': VALUE, 'hosts': ['api.github.com']}, token=key)
        t.status(r, (200, 201), 'PUT /v1/secrets/GITHUB_TOKEN')
        s = r[2] or {}
        t.fields(s, boxtest.SECRET_FIELDS, 'secret has exactly name, hosts, placeholder, inject, created_at, updated_at')
        t.eq(s.get('name'), 'GITHUB_TOKEN', 'secret name')
        t.eq(s.get('hosts'), ['api.github.com'], 'secret hosts')
        t.eq(s.get('placeholder'), '__box_github_token__', 'placeholder __box_<lowercase name>__')
        t.ok('inject' in s and s['inject'] is None, 'inject null by default', s.get('inject'))
        t.ok(boxtest.is_utc_ts(s.get('created_at')) and boxtest.is_utc_ts(s.get('updated_at')),
             'secret timestamps RFC 3339 UTC', s)
        t.ok(VALUE.encode() not in r[3], 'PUT answer does not carry the value')

        r = d.request('PUT', '/v1/secrets/NPM_TOKEN', {'value': 'x', 'hosts': ['registry.npmjs.org', '*.npmjs.com/pkg'],
                                                        'placeholder_prefix': 'npm_'}, token=key)
        t.status(r, (200, 201), 'PUT secret with placeholder_prefix, a wildcard and a path prefix')
        t.eq((r[2] or {}).get('placeholder'), 'npm___box_npm_token__', 'placeholder with the prefix')
        t.ok('placeholder_prefix' not in (r[2] or {}), 'placeholder_prefix is write only')

        inj = {'header': 'Authorization', 'format': 'Bearer {value}'}
        r = d.request('PUT', '/v1/secrets/API_KEY', {'value': VALUE2, 'hosts': ['api.example.com'], 'inject': inj},
                      token=key)
        t.status(r, (200, 201), 'PUT secret with inject')
        t.eq((r[2] or {}).get('inject'), inj, 'inject echoed')

        r = d.request('GET', '/v1/secrets/GITHUB_TOKEN', token=key)
        t.status(r, 200, 'GET /v1/secrets/GITHUB_TOKEN')
        t.eq(r[2], s, 'GET answers what PUT answered')
        t.error(d.request('GET', '/v1/secrets/NOPE', token=key), 404, 'not_found', 'GET unknown secret')
        r = d.request('GET', '/v1/secrets', token=key)
        t.status(r, 200, 'GET /v1/secrets')
        t.fields(r[2] or {}, {'secrets'}, 'list is {secrets: [...]}')
        t.eq(sorted(x.get('name') for x in (r[2] or {}).get('secrets', [])), ['API_KEY', 'GITHUB_TOKEN', 'NPM_TOKEN'],
             'all three listed')
        t.ok(all(set(x.keys()) == boxtest.SECRET_FIELDS for x in (r[2] or {}).get('secrets', [])),
             'listed secrets have exactly the Secret fields')
        t.ok(VALUE.encode() not in r[3] and VALUE2.encode() not in r[3], 'list does not carry values')

        # replace: created_at kept, updated_at moves
        time.sleep(1.1)
        r = d.request('PUT', '/v1/secrets/GITHUB_TOKEN', {'value': VALUE + '-2', 'hosts': ['*.github.com']}, token=key)
        t.status(r, (200, 201), 'PUT replaces')
        s2 = r[2] or {}
        t.eq(s2.get('created_at'), s.get('created_at'), 'created_at kept on replace')
        a, b = boxtest.parse_ts(s.get('updated_at')), boxtest.parse_ts(s2.get('updated_at'))
        t.ok(a is not None and b is not None and b > a, 'updated_at moves on replace',
             (s.get('updated_at'), s2.get('updated_at')))
        t.eq(s2.get('hosts'), ['*.github.com'], 'hosts replaced')

        # validation
        good = {'value': 'v', 'hosts': ['api.example.com']}
        bad = [
            ('lower', good, 'lowercase name'),
            ('Mixed_Case', good, 'mixed-case name'),
            ('1ABC', good, 'name starting with a digit'),
            ('A-B', good, 'name with -'),
            ('A' * 65, good, 'name of 65 chars'),
            ('S', {'value': 'a\rb', 'hosts': ['h.example.com']}, 'value with CR'),
            ('S', {'value': 'a\nb', 'hosts': ['h.example.com']}, 'value with LF'),
            ('S', {'value': 'a\u0000b', 'hosts': ['h.example.com']}, 'value with NUL'),
            ('S', {'value': 'x' * 8193, 'hosts': ['h.example.com']}, 'value of 8193 bytes'),
            ('S', {'value': '', 'hosts': ['h.example.com']}, 'empty value'),
            ('S', {'hosts': ['h.example.com']}, 'value missing'),
            ('S', {'value': 'v'}, 'hosts missing'),
            ('S', {'value': 'v', 'hosts': []}, 'hosts empty'),
            ('S', {'value': 'v', 'hosts': ['']}, 'an empty host'),
            ('S', {'value': 'v', 'hosts': ['h.example.com'], 'inject': {'header': 'Host', 'format': '{value}'}},
             'inject header Host'),
            ('S', {'value': 'v', 'hosts': ['h.example.com'],
                   'inject': {'header': 'Content-Length', 'format': '{value}'}}, 'inject header Content-Length'),
            ('S', {'value': 'v', 'hosts': ['h.example.com'],
                   'inject': {'header': 'transfer-encoding', 'format': '{value}'}}, 'inject header transfer-encoding'),
            ('S', {'value': 'v', 'hosts': ['h.example.com'],
                   'inject': {'header': 'Connection', 'format': '{value}'}}, 'inject header Connection'),
            ('S', {'value': 'v', 'hosts': ['h.example.com'],
                   'inject': {'header': 'Upgrade', 'format': '{value}'}}, 'inject header Upgrade'),
            ('S', {'value': 'v', 'hosts': ['h.example.com'], 'placeholder_prefix': 'a b'}, 'prefix with a space'),
            ('S', {'value': 'v', 'hosts': ['h.example.com'], 'placeholder_prefix': 'p' * 65}, 'prefix of 65 chars'),
            ('S', {'value': 'v', 'hosts': 'h.example.com'}, 'hosts a string'),
            ('S', {'value': 5, 'hosts': ['h.example.com']}, 'value a number'),
            ('S', {'value': 'v', 'hosts': ['https://h.example.com']}, 'host with a scheme'),
            ('S', {'value': 'v', 'hosts': ['h.example.com:8443']}, 'host with a port (443 only)'),
            ('S', {'value': 'v', 'hosts': ['*']}, 'host * (not *.<suffix>)'),
            ('S', {'value': 'v', 'hosts': ['a.com'], 'name': 'S'}, 'name in the body (unknown field)'),
            ('S', {'value': 'v', 'hosts': ['a.com'], 'inject': {'header': 'Bad Header', 'format': '{value}'}},
             'inject header with a space'),
            ('S', {'value': 'v', 'hosts': ['a.com'], 'inject': {'header': 'X-A'}}, 'inject without format'),
        ]
        for name, body, desc in bad:
            t.error(d.request('PUT', '/v1/secrets/%s' % name, body, token=key), 400, 'invalid', 'PUT secret: ' + desc)
        t.error(d.request('PUT', '/v1/secrets/S', {'value': 'v', 'hosts': ['h.example.com'], 'bogus': 1}, token=key),
                400, 'invalid', 'PUT secret: unknown field', message='bad request body: json: unknown field bogus')
        t.error(d.request('PUT', '/v1/secrets/S', raw='{"value":', token=key), 400, 'invalid',
                'PUT secret: malformed JSON')
        r = d.request('GET', '/v1/secrets', token=key)
        t.eq(sorted(x.get('name') for x in (r[2] or {}).get('secrets', [])), ['API_KEY', 'GITHUB_TOKEN', 'NPM_TOKEN'],
             'no refused PUT created a secret')
        # the boundaries are accepted
        t.status(d.request('PUT', '/v1/secrets/%s' % ('A' * 64), good, token=key), (200, 201), 'PUT name of 64 chars')
        t.status(d.request('PUT', '/v1/secrets/_X9', {'value': 'y' * 8192, 'hosts': ['h.example.com'],
                                                       'placeholder_prefix': 'p' * 64}, token=key),
                 (200, 201), 'PUT value of 8192 bytes, prefix of 64 chars, name _X9')
        t.status(d.request('DELETE', '/v1/secrets/%s' % ('A' * 64), token=key), 204, 'DELETE the 64-char one')
        r = d.request('PUT', '/v1/secrets/PATHS', {'value': 'v', 'hosts': ['*.example.com/api/v1', 'example.org/x']},
                      token=key)
        t.status(r, (200, 201), 'PUT hosts with path prefixes')
        t.eq((r[2] or {}).get('hosts'), ['*.example.com/api/v1', 'example.org/x'], 'hosts with paths echoed')
        t.status(d.request('DELETE', '/v1/secrets/PATHS', token=key), 204, 'DELETE PATHS')

        # use by sandboxes
        r = d.request('POST', '/v1/sandboxes', {'name': 'user', 'secrets': ['GITHUB_TOKEN']}, token=key)
        t.status(r, 201, 'create naming a secret')
        t.eq((r[2] or {}).get('secrets'), ['GITHUB_TOKEN'], 'sandbox secrets echoed')
        t.ok(VALUE.encode() not in r[3], 'sandbox record does not carry the value')
        r = d.request('POST', '/v1/sandboxes', {'secrets': ['NO_SUCH_SECRET']}, token=key)
        t.error(r, 400, 'invalid', 'create naming an unknown secret', message_contains='NO_SUCH_SECRET')
        r = d.request('POST', '/v1/sandboxes', {'secrets': ['GITHUB_TOKEN'], 'env': {'GITHUB_TOKEN': 'x'}}, token=key)
        t.error(r, 400, 'invalid', 'create with a secret that is also an env key')
        r = d.request('POST', '/v1/sandboxes', {'secrets': ['bad-name']}, token=key)
        t.error(r, 400, 'invalid', 'create naming an invalid secret name')
        r = d.request('PATCH', '/v1/sandboxes/user', {'env': {'GITHUB_TOKEN': 'x'}}, token=key)
        t.error(r, 400, 'invalid', 'PATCH env with a key the sandbox uses as a secret')
        r = d.request('PATCH', '/v1/sandboxes/user', {'secrets': ['GITHUB_TOKEN', 'NO_SUCH_SECRET']}, token=key)
        t.error(r, 400, 'invalid', 'PATCH naming an unknown secret', message_contains='NO_SUCH_SECRET')
        t.eq((d.request('GET', '/v1/sandboxes/user', token=key)[2] or {}).get('secrets'), ['GITHUB_TOKEN'],
             'refused PATCHes kept the secrets')
        r = d.request('PATCH', '/v1/sandboxes/user', {'secrets': ['GITHUB_TOKEN', 'API_KEY']}, token=key)
        t.status(r, 200, 'PATCH secrets')
        t.eq((r[2] or {}).get('secrets'), ['GITHUB_TOKEN', 'API_KEY'], 'secrets replaced')

        t.error(d.request('DELETE', '/v1/secrets/GITHUB_TOKEN', token=key), 409, 'conflict',
                'DELETE a secret a sandbox uses')
        t.error(d.request('DELETE', '/v1/secrets/API_KEY', token=key), 409, 'conflict',
                'DELETE another secret the sandbox uses')
        t.status(d.request('GET', '/v1/secrets/GITHUB_TOKEN', token=key), 200, 'still there after the refused DELETE')
        t.status(d.request('PATCH', '/v1/sandboxes/user', {'secrets': ['API_KEY']}, token=key), 200,
                 'PATCH drops GITHUB_TOKEN')
        r = d.request('DELETE', '/v1/secrets/GITHUB_TOKEN', token=key)
        t.status(r, 204, 'DELETE the unused secret')
        t.error(d.request('GET', '/v1/secrets/GITHUB_TOKEN', token=key), 404, 'not_found', 'GET the deleted secret')
        t.error(d.request('DELETE', '/v1/secrets/GITHUB_TOKEN', token=key), 404, 'not_found', 'DELETE it again')
        t.status(d.request('DELETE', '/v1/sandboxes/user', token=key), 204, 'delete the sandbox')
        t.status(d.request('DELETE', '/v1/secrets/API_KEY', token=key), 204,
                 'DELETE a secret once its sandbox is gone')

        # the values are nowhere in plaintext
        for path in ('/v1/secrets', '/v1/sandboxes', '/v1/whoami'):
            r = d.request('GET', path, token=key)
            t.ok(VALUE.encode() not in r[3] and VALUE2.encode() not in r[3], 'no value in GET %s' % path)
        d.stop()
        for v in (VALUE, VALUE + '-2', VALUE2):
            hits = boxtest.grep_dir(d.data_dir, v.encode())
            t.eq(hits, [], 'secret value %s... not in plaintext in the data dir' % v[:12])
            t.ok(v not in d.log_text(), 'secret value %s... not in boxd\'s log' % v[:12])
    finally:
        d.stop()


def test_no_secret_key(t):
    d = Boxd(t, extra_args=['--no-secret-key']).start()
    try:
        key = d.project_with_key('alpha')
        for method, path, body in [('PUT', '/v1/secrets/S', {'value': 'v', 'hosts': ['h.example.com']}),
                                   ('GET', '/v1/secrets', None), ('GET', '/v1/secrets/S', None),
                                   ('DELETE', '/v1/secrets/S', None)]:
            t.error(d.request(method, path, body, token=key), 501, 'unsupported',
                    'no secret key: %s %s' % (method, path))
        t.error(d.request('POST', '/v1/sandboxes', {'name': 'withsec', 'secrets': ['S']}, token=key), 501,
                'unsupported', 'no secret key: create naming a secret')
        r = d.request('POST', '/v1/sandboxes', {'name': 'plain'}, token=key)
        t.status(r, 201, 'no secret key: create without secrets works')
        t.error(d.request('PATCH', '/v1/sandboxes/plain', {'secrets': ['S']}, token=key), 501, 'unsupported',
                'no secret key: PATCH naming a secret')
        t.eq(d.sandbox_ids(key), [(r[2] or {}).get('id')], 'only the plain sandbox exists')
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_secrets, test_no_secret_key)
