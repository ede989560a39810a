#!/usr/bin/env python3
# e2e: identity tokens (issue 17 item 3) against the real boxd: the OIDC
# discovery document and the JWKS with no key (every field, the kid the
# RFC 7638 thumbprint computed by tests/e2e/jwtcheck.py from the key's
# numbers), the signing key file (0600), no token route under /v1 (404);
# GET /identity/token on the real in-sandbox socket (the dummy hypervisor
# runs the real guest agent on this host with --api-socket, so the request
# takes the agent's channel as in a VM): every claim, verified by PyJWT
# against the JWKS, ttl bounds and the 400s, labels as the sandbox is now;
# rotation through boxctl on a private D-Bus session bus (the new key
# signs, the old key and a token it signed still verify, both kept across
# a restart); and a deployment configured without a signing key (501
# unsupported on all three routes and from boxctl).
# The in-sandbox part needs root and BOX_AGENT (the agent switches users).

import contextlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse

import boxtest
import jwtcheck
from boxtest import Boxd, Tap

BOX_AGENT = os.environ.get('BOX_AGENT', '')
BOXCTL = os.environ.get('BOXCTL', os.path.join(boxtest.BUILD_ROOT, 'tools', 'boxctl'))
AUD = 'https://svc.example/api'
CLAIMS = ['iss', 'sub', 'aud', 'iat', 'nbf', 'exp', 'jti', 'project', 'sandbox', 'sandbox_name',
          'template', 'labels']


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=30):
        super().__init__('box', timeout=timeout)
        self.sock_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.sock_path)


def inside(sock_path, path):
    """GET @path on the in-sandbox socket: (status, headers, json, raw)."""
    conn = UnixHTTPConnection(sock_path)
    try:
        conn.request('GET', path)
        resp = conn.getresponse()
        raw = resp.read()
        st = resp.status
    finally:
        conn.close()
    try:
        body = json.loads(raw.decode('utf-8'))
    except ValueError:
        body = None
    return (st, {}, body, raw)


def token_path(audience=AUD, ttl=None):
    q = {}
    if audience is not None:
        q['audience'] = audience
    if ttl is not None:
        q['ttl_s'] = ttl
    return '/identity/token' + ('?' + urllib.parse.urlencode(q) if q else '')


class Bus:
    """A private D-Bus session bus (dbus-daemon), for boxd --session-bus and boxctl --session."""

    def __init__(self):
        self.proc = subprocess.Popen(['dbus-daemon', '--session', '--nofork', '--print-address=1'],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.address = self.proc.stdout.readline().decode().strip()

    def env(self):
        return {'DBUS_SESSION_BUS_ADDRESS': self.address}

    def close(self):
        self.proc.terminate()
        self.proc.wait()


def boxctl(bus, *args):
    env = dict(os.environ)
    env.update(bus.env())
    p = subprocess.run([BOXCTL, '--session'] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env, timeout=60)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def wait_bus_name(bus, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        rc, _out, _err = boxctl(bus, 'status')
        if rc == 0:
            return True
        time.sleep(0.1)
    return False


def jwks_of(t, d):
    r = d.request('GET', '/.well-known/jwks.json')
    t.status(r, 200, 'GET /.well-known/jwks.json with no key')
    return r[2] or {}


def test_discovery(t):
    d = Boxd(t).start()
    issuer = 'http://127.0.0.1:%d' % d.port
    r = d.request('GET', '/.well-known/openid-configuration')
    t.status(r, 200, 'GET /.well-known/openid-configuration with no key')
    doc = r[2] or {}
    t.fields(doc, ['issuer', 'jwks_uri', 'id_token_signing_alg_values_supported',
                   'response_types_supported', 'subject_types_supported', 'claims_supported'],
             'discovery has the spec\'s fields')
    t.eq(doc.get('issuer'), issuer, 'issuer is the API\'s own listen address as http://')
    t.eq(doc.get('jwks_uri'), issuer + '/.well-known/jwks.json', 'jwks_uri')
    t.eq(doc.get('id_token_signing_alg_values_supported'), ['RS256'], 'RS256 only')
    t.eq(doc.get('response_types_supported'), ['id_token'], 'response_types_supported')
    t.eq(doc.get('subject_types_supported'), ['public'], 'subject_types_supported')
    t.eq(doc.get('claims_supported'), CLAIMS, 'claims_supported is exactly the spec\'s list')
    jwks = jwks_of(t, d)
    t.eq(jwtcheck.check_jwks(jwks), [], 'the JWKS holds RSA keys {kty, use, alg, kid, n, e}; '
         'kid is the RFC 7638 thumbprint')
    t.eq(len(jwks.get('keys', [])), 1, 'one key')
    r = d.request('GET', '/.well-known/jwks.json', token='box_notakey')
    t.status(r, 200, 'a bad key is not even looked at')
    key_file = os.path.join(d.data_dir, 'identity', 'signing.pem')
    t.ok(os.path.exists(key_file), 'the signing key is in the data directory')
    t.eq(oct(os.stat(key_file).st_mode & 0o777), '0o600', 'key file mode 0600')
    kid = (jwks.get('keys') or [{}])[0].get('kid')
    d.stop()
    d.start()
    t.eq([k.get('kid') for k in jwks_of(t, d).get('keys', [])], [kid],
         'the same key after a restart')

    key = d.project_with_key('idp')
    sb = d.create_sandbox(key, {'name': 'tok'})
    r = d.request('GET', '/v1/sandboxes/%s/identity/token?audience=x' % sb['id'], token=key)
    t.error(r, 404, 'not_found', 'no token route under /v1')
    r = d.request('GET', '/v1/sandboxes/tok/identity/token?audience=x', token=key)
    t.error(r, 404, 'not_found', 'no token route under /v1 (by name)')
    r = d.request('GET', '/v1/identity/token?audience=x', token=key)
    t.error(r, 404, 'not_found', 'no /v1/identity/token')
    r = d.request('GET', '/identity/token?audience=x', token=key)
    t.status(r, (401, 404), 'no /identity/token on the API socket')
    d.stop()


@contextlib.contextmanager
def agent_boxd(t, what, extra_conf=''):
    """(boxd, its temporary directory, its private bus) for a boxd whose
    dummy hypervisor runs the real agent, or None after a skip."""
    if not os.access(BOX_AGENT, os.X_OK) or os.geteuid() != 0:
        t.skip(what, 'needs root and BOX_AGENT')
        yield None
        return
    tmp = tempfile.mkdtemp(prefix='box-e2e-identity-')
    bus = Bus()
    try:
        conf = os.path.join(tmp, 'boxd.conf')
        with open(conf, 'w') as f:
            f.write('[boxd]\n%s\n[plugin.dummy]\nagent=%s\n' % (extra_conf, BOX_AGENT))
        d = Boxd(t, extra_args=['--config', conf, '--session-bus'], env=bus.env()).start()
        t.ok(wait_bus_name(bus), 'boxd is on the private bus')
        yield d, tmp, bus
    finally:
        bus.close()
        shutil.rmtree(tmp, ignore_errors=True)


def make_sandbox(t, d, key, tmp, name, labels):
    sock = os.path.join(tmp, name, 'api.sock')
    args = '--fd {fd} --api-socket %s' % sock
    sb = d.create_sandbox(key, {'name': name, 'labels': labels,
                                'env': {'BOX_DUMMY_AGENT_ARGS': args}})
    deadline = time.time() + 20
    while not os.path.exists(sock) and time.time() < deadline:
        time.sleep(0.05)
    t.ok(os.path.exists(sock), 'the agent\'s in-sandbox socket is there')
    return sb, sock


def test_tokens_and_rotation(t):
    with agent_boxd(t, 'the in-sandbox token route through the real agent') as env:
        if env is None:
            return
        d, tmp, bus = env
        issuer = 'http://127.0.0.1:%d' % d.port
        key = d.project_with_key('idp')
        sb, sock = make_sandbox(t, d, key, tmp, 'worker', {'team': 'a', 'tier': 'x'})

        r = inside(sock, token_path(ttl=120))
        t.status(r, 200, 'GET /identity/token inside the sandbox')
        body = r[2] or {}
        t.fields(body, ['token', 'expires_at'], '{token, expires_at}')
        jwks = jwks_of(t, d)
        try:
            claims, header = jwtcheck.verify(jwks, body.get('token', ''), AUD, issuer=issuer)
        except Exception as e:  # noqa: BLE001 - the check fails with the reason
            claims, header = {}, {}
            t.ok(False, 'the token verifies against the JWKS', repr(e))
        else:
            t.ok(True, 'the token verifies against the JWKS (PyJWT, RS256)')
        t.eq(header, {'alg': 'RS256', 'kid': jwks['keys'][0]['kid'], 'typ': 'JWT'},
             'header {alg RS256, kid, typ JWT}')
        t.eq(sorted(claims), sorted(CLAIMS), 'exactly the spec\'s claims')
        t.eq(claims.get('iss'), issuer, 'iss')
        t.eq(claims.get('sub'), 'project:idp:sandbox:%s' % sb['id'], 'sub')
        t.eq(claims.get('aud'), AUD, 'aud')
        t.eq((claims.get('project'), claims.get('sandbox'), claims.get('sandbox_name'),
              claims.get('template')), ('idp', sb['id'], 'worker', sb['template']),
             'project, sandbox, sandbox_name, template')
        t.eq(claims.get('labels'), {'team': 'a', 'tier': 'x'}, 'labels')
        now = time.time()
        t.ok(abs(claims.get('iat', 0) - now) < 30 and claims.get('nbf') == claims.get('iat'),
             'iat is now, nbf = iat', claims)
        t.eq(claims.get('exp', 0) - claims.get('iat', 0), 120, 'exp = iat + ttl_s')
        t.eq(boxtest.parse_ts(body.get('expires_at', '')).timestamp(), float(claims.get('exp', 0)),
             'expires_at is exp')

        r = inside(sock, token_path())
        t.status(r, 200, 'a token with the default ttl')
        c2, _h = jwtcheck.verify(jwks, (r[2] or {}).get('token', ''), AUD)
        t.eq(c2['exp'] - c2['iat'], 600, 'ttl_s defaults to 600')
        t.ok(c2['jti'] != claims.get('jti'), 'jti differs between tokens')
        r = inside(sock, token_path(ttl=3600))
        t.status(r, 200, 'ttl_s=3600')
        r = inside(sock, token_path(ttl=1))
        t.status(r, 200, 'ttl_s=1')
        for bad in ('0', '3601', '-1', 'abc', '1.5', ''):
            t.error(inside(sock, token_path(ttl=bad)), 400, 'invalid', 'ttl_s=%r' % bad)
        t.error(inside(sock, token_path(audience=None)), 400, 'invalid', 'no audience')
        t.error(inside(sock, token_path(audience='')), 400, 'invalid', 'an empty audience')
        t.error(inside(sock, token_path() + '&other=1'), 400, 'invalid', 'an unknown parameter')
        t.error(inside(sock, token_path(audience='a' * 1025)), 400, 'invalid', 'a long audience')
        r = inside(sock, '/v1/sandboxes/%s/identity/token?audience=x' % sb['id'])
        t.status(r, 404, 'no /v1 path on the in-sandbox socket either')

        # names and labels as the sandbox is now
        r = d.request('PATCH', '/v1/sandboxes/worker', {'labels': {'team': 'b'}}, token=key)
        t.status(r, 200, 'PATCH labels')
        r = inside(sock, token_path())
        c3, _h = jwtcheck.verify(jwks, (r[2] or {}).get('token', ''), AUD)
        t.eq(c3.get('labels'), {'team': 'b'}, 'labels as the sandbox is now')

        # rotation through boxctl
        old_token = body.get('token', '')
        old_kid = jwks['keys'][0]['kid']
        rc, out, err = boxctl(bus, '--json', 'rotate-signing-key')
        t.ok(rc == 0, 'boxctl --json rotate-signing-key', err)
        rot = json.loads(out) if rc == 0 else {}
        t.eq(rot.get('retired_kid'), old_kid, 'the old kid is retired')
        t.ok(boxtest.is_utc_ts(rot.get('retired_until', '')) and
             3500 < boxtest.parse_ts(rot['retired_until']).timestamp() - time.time() <= 3602,
             'it stays listed for the longest token lifetime', rot)
        jwks2 = jwks_of(t, d)
        t.eq([k['kid'] for k in jwks2.get('keys', [])], [rot.get('kid'), old_kid],
             'the JWKS lists the new key and the old one')
        t.eq(jwtcheck.check_jwks(jwks2), [], 'both kids are thumbprints')
        jwtcheck.verify(jwks2, old_token, AUD)
        t.ok(True, 'a token the old key signed still verifies')
        r = inside(sock, token_path())
        _c, h4 = jwtcheck.verify(jwks2, (r[2] or {}).get('token', ''), AUD)
        t.eq(h4.get('kid'), rot.get('kid'), 'the new key signs')
        rc, out, err = boxctl(bus, 'rotate-signing-key')
        t.ok(rc == 0 and 'is now' in out, 'boxctl rotate-signing-key (table)', out + err)
        new_kid = jwks_of(t, d)['keys'][0]['kid']
        files = sorted(os.listdir(os.path.join(d.data_dir, 'identity')))
        t.ok(len(files) == 3, 'the signing key and two retired ones on disk', files)
        t.ok(all(oct(os.stat(os.path.join(d.data_dir, 'identity', f)).st_mode & 0o777) == '0o600'
                 for f in files), 'every key file is 0600')

        d.stop()
        d.start()
        t.ok(wait_bus_name(bus), 'boxd is back on the bus')
        jwks3 = jwks_of(t, d)
        t.eq([k['kid'] for k in jwks3.get('keys', [])], [new_kid, rot.get('kid'), old_kid],
             'after a restart: the signing key, then the retired ones, newest first')
        jwtcheck.verify(jwks3, old_token, AUD)
        t.ok(True, 'the first token still verifies after the restart')
        d.stop()


def test_without_key(t):
    with agent_boxd(t, 'a deployment without a signing key, inside', 'identity=false') as env:
        if env is None:
            return
        d, tmp, bus = env
        for path in ('/.well-known/openid-configuration', '/.well-known/jwks.json'):
            t.error(d.request('GET', path), 501, 'unsupported', 'without a signing key: GET ' + path)
        key = d.project_with_key('idp')
        _sb, sock = make_sandbox(t, d, key, tmp, 'nokey', {})
        t.error(inside(sock, token_path()), 501, 'unsupported', 'without a signing key: token')
        t.error(inside(sock, token_path(ttl='0')), 501, 'unsupported',
                'without a signing key: token (even with a bad ttl_s)')
        rc, _out, err = boxctl(bus, 'rotate-signing-key')
        t.ok(rc == 1 and 'signing key' in err, 'boxctl rotate-signing-key fails (exit 1)', err)
        t.ok(not os.path.exists(os.path.join(d.data_dir, 'identity')), 'no key was made')
        d.stop()


if __name__ == '__main__':
    boxtest.main(Tap(), test_discovery, test_tokens_and_rotation, test_without_key)
