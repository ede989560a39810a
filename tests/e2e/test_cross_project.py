#!/usr/bin/env python3
# e2e: another project's sandboxes, secrets and events are invisible:
# 404 exactly as for an absent resource.

import boxtest
from boxtest import Boxd, Tap


def normalise(resp, ident):
    """The error body with the identifier asked for replaced by <X>."""
    st, _h, body, raw = resp
    text = raw.decode('utf-8', 'replace').replace(ident, '<X>')
    return (st, text)


def test_cross_project(t):
    d = Boxd(t, extra_args=[]).start()
    try:
        key_a = d.project_with_key('alpha')
        key_b = d.project_with_key('bravo')
        sa = d.create_sandbox(key_a, {'name': 'mine', 'labels': {'owner': 'a'}})
        absent_id = 'sb-' + ('a' * 12 if sa['id'] != 'sb-' + 'a' * 12 else 'b' * 12)
        absent_name = 'not-there'

        calls = [('GET', '', None), ('PATCH', '', {'labels': {'owner': 'b'}}), ('DELETE', '', None),
                 ('POST', '/pause', None), ('POST', '/stop', None), ('POST', '/wake', None)]
        for method, suffix, body in calls:
            for ident, absent, what in [(sa['id'], absent_id, 'id'), ('mine', absent_name, 'name')]:
                r = d.request(method, '/v1/sandboxes/%s%s' % (ident, suffix), body, token=key_b)
                t.error(r, 404, 'not_found', 'B: %s A\'s sandbox by %s%s' % (method, what, suffix))
                r2 = d.request(method, '/v1/sandboxes/%s%s' % (absent, suffix), body, token=key_b)
                t.eq(normalise(r, ident), normalise(r2, absent),
                     'B: %s %s%s on A\'s sandbox answers like an absent one' % (method, what, suffix))

        r = d.request('GET', '/v1/sandboxes/mine', token=key_a)
        t.status(r, 200, 'A\'s sandbox is still there')
        t.eq((r[2] or {}).get('labels'), {'owner': 'a'}, 'B\'s PATCH changed nothing')
        t.eq((r[2] or {}).get('state'), 'running', 'B\'s pause/stop changed nothing')
        t.eq(d.sandbox_ids(key_b), [], 'B lists none of A\'s sandboxes')
        r = d.request('GET', '/v1/sandboxes?label=owner=a', token=key_b)
        t.eq((r[2] or {}).get('sandboxes'), [], 'B\'s label filter finds none of A\'s sandboxes')

        # names are per project
        r = d.request('POST', '/v1/sandboxes', {'name': 'mine'}, token=key_b)
        t.status(r, 201, 'B may use the name A uses')
        sb = r[2] or {}
        t.ok(sb.get('id') != sa['id'], 'B\'s "mine" is another sandbox')
        r = d.request('GET', '/v1/sandboxes/mine', token=key_a)
        t.eq((r[2] or {}).get('id'), sa['id'], 'A\'s "mine" still resolves to A\'s sandbox')
        r = d.request('DELETE', '/v1/sandboxes/mine', token=key_b)
        t.status(r, 204, 'B deletes its own "mine"')
        t.status(d.request('GET', '/v1/sandboxes/mine', token=key_a), 200, 'A\'s "mine" survives that')

        # fork from another project's sandbox
        r = d.request('POST', '/v1/sandboxes', {'from': {'sandbox': sa['id'], 'checkpoint': 'v1'}}, token=key_b)
        t.error(r, 404, 'not_found', 'B: fork from A\'s sandbox')

        # secrets (only when the deployment has a secret key, which is the default)
        r = d.request('PUT', '/v1/secrets/A_TOKEN', {'value': 'alpha-secret-value', 'hosts': ['api.example.com']},
                      token=key_a)
        t.status(r, (200, 201), 'A: PUT secret A_TOKEN')
        created = (r[2] or {}).get('updated_at')
        r = d.request('GET', '/v1/secrets/A_TOKEN', token=key_b)
        t.error(r, 404, 'not_found', 'B: GET A\'s secret')
        r2 = d.request('GET', '/v1/secrets/NO_SUCH', token=key_b)
        t.eq(normalise(r, 'A_TOKEN'), normalise(r2, 'NO_SUCH'), 'B: A\'s secret answers like an absent one')
        t.error(d.request('DELETE', '/v1/secrets/A_TOKEN', token=key_b), 404, 'not_found', 'B: DELETE A\'s secret')
        r = d.request('GET', '/v1/secrets', token=key_b)
        t.eq((r[2] or {}).get('secrets'), [], 'B lists none of A\'s secrets')
        r = d.request('POST', '/v1/sandboxes', {'secrets': ['A_TOKEN']}, token=key_b)
        t.error(r, 400, 'invalid', 'B: create naming A\'s secret')
        r = d.request('GET', '/v1/secrets/A_TOKEN', token=key_a)
        t.status(r, 200, 'A\'s secret still there')
        t.eq((r[2] or {}).get('updated_at'), created, 'A\'s secret untouched')
        r = d.request('PUT', '/v1/secrets/A_TOKEN', {'value': 'bravo-value', 'hosts': ['b.example.com']},
                      token=key_b)
        t.status(r, (200, 201), 'B: PUT its own secret of the same name')
        r = d.request('GET', '/v1/secrets/A_TOKEN', token=key_a)
        t.eq((r[2] or {}).get('hosts'), ['api.example.com'], 'A\'s secret keeps its hosts')

        # events
        ev_b = d.events(key_b)
        t.ok(ev_b.wait_connected(5) and ev_b.status == 200, 'B: event stream open', ev_b.status)
        ev_a = d.events(key_a)
        t.ok(ev_a.wait_connected(5) and ev_a.status == 200, 'A: event stream open', ev_a.status)
        sa2 = d.create_sandbox(key_a, {'name': 'evt'})
        d.request('POST', '/v1/sandboxes/evt/pause', token=key_a)
        d.request('DELETE', '/v1/sandboxes/evt', token=key_a)
        got_a = ev_a.wait_for(lambda e: e['event'] == 'sandbox.deleted', 5)
        t.ok(got_a is not None, 'A sees its own events (sandbox.deleted)')
        seen_b = ev_b.collect(1.5)
        t.eq([e for e in seen_b if (e.get('data') or {}).get('sandbox') == sa2['id']], [],
             'B sees none of A\'s events')
        r = d.request('GET', '/v1/events?sandbox=mine', token=key_b, timeout=5)
        t.error(r, 404, 'not_found', 'B: events ?sandbox=<A\'s name>')
        r = d.request('GET', '/v1/events?sandbox=%s' % sa['id'], token=key_b, timeout=5)
        t.error(r, 404, 'not_found', 'B: events ?sandbox=<A\'s id>')
        ev_a.close()
        ev_b.close()
    finally:
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_cross_project)
