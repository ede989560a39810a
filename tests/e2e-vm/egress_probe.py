#!/usr/bin/env python3
"""Probes of the egress attack suite, run inside a guest (standard library,
Python 3.7+).  Reads a JSON list of probes on stdin, runs them in parallel
threads, prints one JSON object {index: result}.  Each probe is a list:

  ["dns", NAME, QTYPE, PROTO(, TRIES)]  to the guest's resolver (resolv.conf),
                                     a UDP query sent up to TRIES times (1),
                                     as a stub resolver retries:
                                     {"rcode": N, "a": [...], "aaaa": [...], "ttl": N}
                                     or {"error": "timeout"|...}
  ["udp-dns", SERVER, NAME]          a DNS query to another server over UDP
  ["http", ADDR, PORT, RAW]          sends RAW (a whole request head), reads the
                                     answer: {"status": N, "body": "..."} or {"error": ...}
  ["tls", ADDR, PORT, SNI, HOST, CA] TLS (SNI null: none sent) with CA, then
                                     GET / with Host: HOST: {"status", "body"} or {"error"}
  ["tcp", ADDR, PORT]                connect and read the greeting: {"ok": true,
                                     "greeting": ...} or {"error"}
  ["udp", ADDR, PORT]                sends a datagram, waits 2 s for any answer
  ["tcp6", ADDR6, PORT]              an IPv6 connect
  ["icmp", ADDR]                     one echo request over a raw socket (root)
  ["resolve-connect", NAME, PORT]    getaddrinfo(NAME), then connect: like tcp

Errors: "reset" (ECONNRESET or a reset during TLS), "refused" (ECONNREFUSED:
a reset answering the SYN), "timeout", "unreachable", "eof", "tls: ...",
or the exception's text.
"""

import json
import os
import socket
import ssl
import struct
import sys
import threading
import time

TIMEOUT = 4


def classify(e):
    if isinstance(e, ConnectionResetError):
        return 'reset'
    if isinstance(e, ConnectionRefusedError):
        return 'refused'
    if isinstance(e, (socket.timeout, TimeoutError)):
        return 'timeout'
    if isinstance(e, ssl.SSLError):
        if 'EOF' in str(e) or 'UNEXPECTED_EOF' in str(e):
            return 'eof'
        return 'tls: %s' % e
    if isinstance(e, OSError) and e.errno in (101, 113):
        return 'unreachable'
    if isinstance(e, OSError) and e.errno == 104:
        return 'reset'
    return '%s: %s' % (type(e).__name__, e)


def resolver():
    with open('/etc/resolv.conf') as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and w[0] == 'nameserver':
                return w[1]
    return '127.0.0.1'


def dns_query(server, name, qtype, proto):
    qid = int.from_bytes(os.urandom(2), 'big')
    q = struct.pack('!HHHHHH', qid, 0x0100, 1, 0, 0, 0)
    for label in name.rstrip('.').split('.'):
        q += bytes([len(label)]) + label.encode()
    q += b'\0' + struct.pack('!HH', qtype, 1)
    if proto == 'tcp':
        s = socket.create_connection((server, 53), timeout=TIMEOUT)
        s.sendall(struct.pack('!H', len(q)) + q)
        head = s.recv(2, socket.MSG_WAITALL)
        if len(head) < 2:
            return {'error': 'eof'}
        msg = s.recv(struct.unpack('!H', head)[0], socket.MSG_WAITALL)
        s.close()
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.settimeout(TIMEOUT)
        s.sendto(q, (server, 53))
        msg, _ = s.recvfrom(65535)
        s.close()
    flags, qd, an = struct.unpack('!HHH', msg[2:8])
    off = 12
    for _ in range(qd):
        while msg[off] != 0:
            if msg[off] & 0xC0:
                off += 1
                break
            off += 1 + msg[off]
        off += 5
    out = {'rcode': flags & 0xF, 'a': [], 'aaaa': [], 'ttl': None}
    for _ in range(an):
        while True:
            if msg[off] & 0xC0:
                off += 2
                break
            if msg[off] == 0:
                off += 1
                break
            off += 1 + msg[off]
        rtype, _, ttl, rdlen = struct.unpack('!HHIH', msg[off:off + 10])
        rdata = msg[off + 10:off + 10 + rdlen]
        if rtype == 1:
            out['a'].append(socket.inet_ntoa(rdata))
            out['ttl'] = ttl
        elif rtype == 28:
            out['aaaa'].append(socket.inet_ntop(socket.AF_INET6, rdata))
        off += 10 + rdlen
    return out


def read_answer(s):
    data = b''
    while True:
        try:
            chunk = s.recv(65536)
        except (ConnectionResetError, ssl.SSLError, OSError) as e:
            if data:
                break
            raise e
        if not chunk:
            break
        data += chunk
        head, sep, body = data.partition(b'\r\n\r\n')
        if sep:
            length = None
            for line in head.split(b'\r\n')[1:]:
                k, _, v = line.partition(b':')
                if k.strip().lower() == b'content-length':
                    length = int(v.strip())
            if length is not None and len(body) >= length:
                break
    head, _, body = data.partition(b'\r\n\r\n')
    if not head:
        return {'error': 'eof'}
    status = head.split(b' ')[1].decode() if len(head.split(b' ')) > 1 else '?'
    return {'status': int(status) if status.isdigit() else status, 'body': body.decode('latin-1')[:2000]}


def probe(p):
    kind = p[0]
    try:
        if kind == 'dns':
            qtype = {'A': 1, 'AAAA': 28, 'ANY': 255, 'AXFR': 252, 'TXT': 16}[p[2]]
            for _ in range(max(p[4] if len(p) > 4 else 1, 1)):
                try:
                    return dns_query(resolver(), p[1], qtype, p[3])
                except (socket.timeout, TimeoutError) as e:
                    lost = e
            raise lost
        if kind == 'udp-dns':
            return dns_query(p[1], p[2], 1, 'udp')
        if kind == 'http':
            s = socket.create_connection((p[1], p[2]), timeout=TIMEOUT)
            s.sendall(p[3].encode('latin-1'))
            return read_answer(s)
        if kind == 'tls':
            ctx = ssl.create_default_context(cafile=p[5])
            if p[3] is None:
                ctx.check_hostname = False
            raw = socket.create_connection((p[1], p[2]), timeout=TIMEOUT)
            s = ctx.wrap_socket(raw, server_hostname=p[3])
            s.sendall(('GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' % p[4]).encode())
            return read_answer(s)
        if kind in ('tcp', 'resolve-connect'):
            addr = p[1]
            if kind == 'resolve-connect':
                addr = socket.getaddrinfo(p[1], p[2], socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
            s = socket.create_connection((addr, p[2]), timeout=TIMEOUT)
            g = s.recv(64)
            s.close()
            return {'ok': True, 'greeting': g.decode('latin-1'), 'addr': addr}
        if kind == 'udp':
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(2)
            s.sendto(b'\x12\x34' + b'\0' * 30, (p[1], p[2]))
            s.recvfrom(4096)
            return {'ok': True}
        if kind == 'tcp6':
            s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s.settimeout(TIMEOUT)
            s.connect((p[1], p[2]))
            return {'ok': True}
        if kind == 'icmp':
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            s.settimeout(2)
            body = struct.pack('!BBHHH', 8, 0, 0, 0x4242, 1) + b'box'
            csum = 0
            for i in range(0, len(body), 2):
                csum += (body[i] << 8) + (body[i + 1] if i + 1 < len(body) else 0)
            csum = (csum >> 16) + (csum & 0xFFFF)
            csum = ~(csum + (csum >> 16)) & 0xFFFF
            body = body[:2] + struct.pack('!H', csum) + body[4:]
            s.sendto(body, (p[1], 0))
            end = time.time() + 2
            while time.time() < end:
                data, peer = s.recvfrom(4096)
                if peer[0] == p[1] and data[20] == 0:
                    return {'ok': True}
            return {'error': 'timeout'}
    except Exception as e:   # noqa: BLE001
        return {'error': classify(e)}
    return {'error': 'unknown probe %s' % kind}


def main():
    probes = json.load(sys.stdin)
    out = {}
    threads = []
    for i, p in enumerate(probes):
        th = threading.Thread(target=lambda i=i, p=p: out.__setitem__(str(i), probe(p)))
        th.start()
        threads.append(th)
    for th in threads:
        th.join(TIMEOUT * 3)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
