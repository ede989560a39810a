#!/usr/bin/env python3
"""The guest side of test_broker.py: HTTPS clients as a program in a
sandbox would use them, with the system's trust (the broker CA through the
system bundle and SSL_CERT_FILE / REQUESTS_CA_BUNDLE) unless a CA file is
given.  Prints one JSON object.  Standard library only (requests when the
guest has it, or pip's own copy).

  urllib URL               GET with X-Token: $TOKEN -> {status, body}
  requests URL             the same with requests -> {status, body, which}
  ws HOST                  WebSocket upgrade to wss://HOST/ws with
                           X-Token: $TOKEN, one text message "msg $TOKEN"
                           -> {status, echo}
  peer HOST CAFILE|-       TLS handshake offering h2 and http/1.1, then
                           GET / with X-Token: $TOKEN -> {issuer, alpn,
                           status}
"""
import base64
import json
import os
import socket
import ssl
import sys
import urllib.error
import urllib.request

TOKEN = os.environ.get('TOKEN', '')


def out(obj):
    print(json.dumps(obj))
    sys.exit(0)


def ctx_for(cafile):
    return ssl.create_default_context(cafile=None if cafile in (None, '-') else cafile)


def tls(hostname, cafile=None, alpn=None):
    c = ctx_for(cafile)
    if alpn:
        c.set_alpn_protocols(alpn)
    raw = socket.create_connection((hostname, 443), timeout=20)
    return c.wrap_socket(raw, server_hostname=hostname)


def read_head(s):
    data = b''
    while b'\r\n\r\n' not in data:
        d = s.recv(4096)
        if not d:
            break
        data += d
    head, _, rest = data.partition(b'\r\n\r\n')
    return head.decode('latin-1'), rest


def main(cmd, args):
    if cmd == 'urllib':
        req = urllib.request.Request(args[0], headers={'X-Token': TOKEN})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                out({'status': r.status, 'body': r.read().decode('utf-8', 'replace')})
        except urllib.error.HTTPError as e:
            out({'status': e.code, 'body': e.read().decode('utf-8', 'replace')})
    if cmd == 'requests':
        try:
            import requests
            which = 'requests'
        except ImportError:
            from pip._vendor import requests
            which = 'pip._vendor.requests'
        r = requests.get(args[0], headers={'X-Token': TOKEN}, timeout=30)
        out({'status': r.status_code, 'body': r.text, 'which': which})
    if cmd == 'ws':
        s = tls(args[0])
        key = base64.b64encode(os.urandom(16)).decode()
        s.sendall(('GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n'
                   'Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nX-Token: %s\r\n\r\n'
                   % (args[0], key, TOKEN)).encode())
        head, rest = read_head(s)
        msg = ('msg ' + TOKEN).encode()
        mask = os.urandom(4)
        s.sendall(bytes([0x81, 0x80 | len(msg)]) + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(msg)))
        data = rest
        while len(data) < 2 or len(data) < 2 + (data[1] & 0x7F):
            d = s.recv(4096)
            if not d:
                break
            data += d
        echo = data[2:2 + (data[1] & 0x7F)].decode('latin-1') if len(data) >= 2 else None
        out({'status': head.split('\r\n')[0], 'echo': echo})
    if cmd == 'peer':
        s = tls(args[0], args[1], ['h2', 'http/1.1'])
        issuer = dict(x[0] for x in s.getpeercert()['issuer']).get('commonName')
        alpn = s.selected_alpn_protocol()
        s.sendall(('GET /peer HTTP/1.1\r\nHost: %s\r\nX-Token: %s\r\nConnection: close\r\n\r\n'
                   % (args[0], TOKEN)).encode())
        head, _ = read_head(s)
        out({'issuer': issuer, 'alpn': alpn, 'status': head.split('\r\n')[0]})
    out({'error': 'unknown command %s' % cmd})


if __name__ == '__main__':
    try:
        main(sys.argv[1], sys.argv[2:])
    except (OSError, ValueError, ssl.SSLError) as e:
        out({'error': '%s: %s' % (type(e).__name__, e)})
