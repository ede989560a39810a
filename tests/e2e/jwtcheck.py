#!/usr/bin/env python3
# An independent verifier of box's identity tokens, for the tests only:
# PyJWT (Debian's python3-jwt, with python3-cryptography) checks the RS256
# signature against a JWKS, and the RFC 7638 thumbprint of each key is
# computed here from the key's numbers, not from box's n and e strings.
#
# As a program (tests/engine/identity-test.c):
#   jwtcheck.py JWKS_FILE TOKEN_FILE AUDIENCE
# prints the verified claims as JSON on the first line and the header as
# JSON on the second; exits 1 when the token does not verify, 2 when the
# JWKS is malformed (a kid that is not its key's thumbprint included).

import base64
import hashlib
import json
import sys

try:
    import jwt
except ImportError:   # a python3 that is not Debian's: use Debian's modules
    sys.path.append('/usr/lib/python3/dist-packages')
    import jwt
from jwt.algorithms import RSAAlgorithm


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b'=').decode('ascii')


def int_bytes(n):
    return n.to_bytes((n.bit_length() + 7) // 8, 'big')


def thumbprint(jwk):
    """RFC 7638 for an RSA JWK, from the key PyJWT parsed: e, kty, n in
    lexicographic order, no white space, n and e without leading zeros."""
    numbers = RSAAlgorithm.from_jwk(json.dumps(jwk)).public_numbers()
    canonical = json.dumps({'e': b64url(int_bytes(numbers.e)), 'kty': 'RSA',
                            'n': b64url(int_bytes(numbers.n))},
                           separators=(',', ':'), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode('ascii')).digest())


def check_jwks(jwks):
    """The JWKS's problems as strings (empty: none)."""
    problems = []
    keys = jwks.get('keys') if isinstance(jwks, dict) else None
    if not isinstance(keys, list) or not keys:
        return ['no keys list']
    for k in keys:
        if set(k) != {'kty', 'use', 'alg', 'kid', 'n', 'e'}:
            problems.append('members %r' % sorted(k))
        if (k.get('kty'), k.get('use'), k.get('alg')) != ('RSA', 'sig', 'RS256'):
            problems.append('kty/use/alg %r' % ((k.get('kty'), k.get('use'), k.get('alg')),))
        try:
            if thumbprint(k) != k.get('kid'):
                problems.append('kid %s is not the thumbprint %s' % (k.get('kid'), thumbprint(k)))
        except Exception as e:  # noqa: BLE001 - any parse failure is a problem
            problems.append('key does not parse: %s' % e)
    return problems


def verify(jwks, token, audience, issuer=None):
    """(claims, header) of @token verified against @jwks, or raises
    jwt.InvalidTokenError."""
    header = jwt.get_unverified_header(token)
    keys = {k['kid']: k for k in jwks['keys']}
    if header.get('kid') not in keys:
        raise jwt.InvalidTokenError('kid %r not in the JWKS' % header.get('kid'))
    key = RSAAlgorithm.from_jwk(json.dumps(keys[header['kid']]))
    opts = {'require': ['iss', 'sub', 'aud', 'iat', 'nbf', 'exp', 'jti']}
    claims = jwt.decode(token, key, algorithms=['RS256'], audience=audience, issuer=issuer,
                        options=opts)
    return claims, header


def tampered(token):
    """@token with one claim changed and the signature kept."""
    head, payload, sig = token.split('.')
    claims = json.loads(base64.urlsafe_b64decode(payload + '=' * (-len(payload) % 4)))
    claims['sub'] = claims.get('sub', '') + 'x'
    body = b64url(json.dumps(claims, separators=(',', ':')).encode('utf-8'))
    return '.'.join([head, body, sig])


def main(argv):
    with open(argv[1]) as f:
        jwks = json.load(f)
    with open(argv[2]) as f:
        token = f.read().strip()
    problems = check_jwks(jwks)
    if problems:
        print('; '.join(problems))
        return 2
    try:
        claims, header = verify(jwks, token, argv[3])
    except jwt.InvalidTokenError as e:
        print('%s: %s' % (type(e).__name__, e))
        return 1
    print(json.dumps(claims, sort_keys=True))
    print(json.dumps(header, sort_keys=True))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
