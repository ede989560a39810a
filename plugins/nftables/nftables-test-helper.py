#!/usr/bin/env python3
"""Network probes for the nftables plugin's isolation tests.

Runs in a network namespace (nftables-netns-test.c) or inside a sandbox's
guest (the real-VM isolation test): standard library only, Python 3.7+.

  serve BIND PORT LOG          TCP server: each connection appends the peer's
                               address to LOG and gets "hello\\n"; LOG.ready
                               appears once it listens
  hold BIND PORT LOG            TCP server like serve, but each connection
                               stays open and echoes what it gets
  connect HOST PORT TIMEOUT [SRC]
                               exit 0: connected and greeted; 2: timed out
                               (dropped); 3: refused; 1: another error
  udp-serve BIND PORT LOG      appends each datagram's payload to LOG;
                               LOG.ready appears once it listens
  udp-send HOST PORT PAYLOAD [SRC]
                               sends one datagram (from SRC if given)
  dns-serve BIND PORT ANSWER READY
                               UDP+TCP DNS server answering every A query
                               with ANSWER, except names whose first label
                               is in INTERNAL (an internal address, which the
                               resolver must not pass on); READY appears
                               once it listens
  dns-query SERVER PORT NAME udp|tcp TIMEOUT
                               prints the first A answer; exit 0, 2 on
                               timeout, 1 otherwise
"""

import socket
import struct
import sys
import threading


def accepting(bind, port, log):
    """Listens, marks LOG ready, then yields each connection, its peer logged."""
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind, int(port)))
    srv.listen(64)
    open(log, "a").close()
    open(log + ".ready", "w").close()
    while True:
        conn, peer = srv.accept()
        with open(log, "a") as f:
            f.write(peer[0] + "\n")
        yield conn


def serve(bind, port, log):
    for conn in accepting(bind, port, log):
        try:
            conn.sendall(b"hello\n")
        finally:
            conn.close()


def hold(bind, port, log):
    def echo(conn):
        try:
            conn.sendall(b"hello\n")
            while True:
                data = conn.recv(64)
                if not data:
                    break
                conn.sendall(data)
        except OSError:
            pass
        finally:
            conn.close()

    for conn in accepting(bind, port, log):
        threading.Thread(target=echo, args=(conn,), daemon=True).start()


def connect(host, port, timeout, src=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(float(timeout))
    try:
        if src:
            s.bind((src, 0))
        s.connect((host, int(port)))
        data = s.recv(16)
    except socket.timeout:
        print("timed out")
        return 2
    except ConnectionRefusedError:
        print("refused")
        return 3
    except OSError as e:
        print("error: %s" % e)
        return 1
    finally:
        s.close()
    if data != b"hello\n":
        print("unexpected greeting %r" % data)
        return 1
    print("connected")
    return 0


def udp_serve(bind, port, log):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, int(port)))
    open(log, "a").close()
    open(log + ".ready", "w").close()
    while True:
        data, _ = s.recvfrom(2048)
        with open(log, "a") as f:
            f.write(data.decode(errors="replace") + "\n")


def udp_send(host, port, payload, src=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if src:
        s.bind((src, 0))
    s.sendto(payload.encode(), (host, int(port)))
    s.close()
    return 0


def encode_name(name):
    out = b""
    for label in name.rstrip(".").split("."):
        out += bytes([len(label)]) + label.encode()
    return out + b"\0"


def question_end(msg):
    off = 12
    while msg[off] != 0:
        off += 1 + msg[off]
    return off + 5


# names that resolve to internal addresses: 10/8, loopback, link-local,
# the world's configured "blocked" 198.51.100.0/24, a v4-mapped private
INTERNAL = {
    "internal": ("A", "10.9.8.7"),
    "loopback": ("A", "127.0.0.1"),
    "metadata": ("A", "169.254.169.254"),
    "blocked": ("A", "198.51.100.7"),
    "mapped": ("AAAA", "::ffff:192.168.1.1"),
}


def dns_answer(query, answer):
    qid, flags = struct.unpack("!HH", query[:4])
    end = question_end(query)
    first = query[13:13 + query[12]].decode("ascii", "replace")
    if first in INTERNAL:
        kind, addr = INTERNAL[first]
        header = struct.pack("!HHHHHH", qid, 0x8180 | (flags & 0x0100), 1, 2, 0, 0)
        # a public address first: one internal address is enough to refuse
        rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(answer)
        if kind == "A":
            rr += b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(addr)
        else:
            rr += b"\xc0\x0c" + struct.pack("!HHIH", 28, 1, 60, 16) + socket.inet_pton(socket.AF_INET6, addr)
        return header + query[12:end] + rr
    header = struct.pack("!HHHHHH", qid, 0x8180 | (flags & 0x0100), 1, 1, 0, 0)
    rr = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 60, 4) + socket.inet_aton(answer)
    return header + query[12:end] + rr


def dns_serve(bind, port, answer, ready):
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((bind, int(port)))
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((bind, int(port)))
    tcp.listen(16)

    def tcp_loop():
        while True:
            conn, _ = tcp.accept()
            try:
                n = struct.unpack("!H", recv_exact(conn, 2))[0]
                reply = dns_answer(recv_exact(conn, n), answer)
                conn.sendall(struct.pack("!H", len(reply)) + reply)
            except (OSError, ValueError, IndexError):
                pass
            finally:
                conn.close()

    threading.Thread(target=tcp_loop, daemon=True).start()
    open(ready, "w").close()
    while True:
        query, peer = udp.recvfrom(4096)
        try:
            udp.sendto(dns_answer(query, answer), peer)
        except (IndexError, struct.error):
            pass


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ValueError("short read")
        data += chunk
    return data


def parse_first_a(msg):
    ancount = struct.unpack("!H", msg[6:8])[0]
    off = question_end(msg)
    for _ in range(ancount):
        if msg[off] & 0xC0 == 0xC0:
            off += 2
        else:
            while msg[off] != 0:
                off += 1 + msg[off]
            off += 1
        rtype, _, _, rdlen = struct.unpack("!HHIH", msg[off:off + 10])
        off += 10
        if rtype == 1 and rdlen == 4:
            return socket.inet_ntoa(msg[off:off + 4])
        off += rdlen
    return None


def dns_query(server, port, name, proto, timeout):
    query = struct.pack("!HHHHHH", 0x4242, 0x0100, 1, 0, 0, 0) + encode_name(name) + b"\0\1\0\1"
    try:
        if proto == "udp":
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.settimeout(float(timeout))
            s.sendto(query, (server, int(port)))
            reply, _ = s.recvfrom(4096)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(float(timeout))
            s.connect((server, int(port)))
            s.sendall(struct.pack("!H", len(query)) + query)
            n = struct.unpack("!H", recv_exact(s, 2))[0]
            reply = recv_exact(s, n)
        s.close()
    except socket.timeout:
        print("timed out")
        return 2
    except (OSError, ValueError) as e:
        print("error: %s" % e)
        return 1
    if reply[:2] != query[:2]:
        print("wrong id")
        return 1
    addr = parse_first_a(reply)
    if addr is None:
        print("no answer (rcode %d)" % (reply[3] & 0x0F))
        return 1
    print(addr)
    return 0


def main(argv):
    if len(argv) < 2:
        sys.stderr.write(__doc__)
        return 1
    cmd, args = argv[1], argv[2:]
    if cmd == "serve":
        serve(*args)
    elif cmd == "hold":
        hold(*args)
    elif cmd == "connect":
        return connect(*args)
    elif cmd == "udp-serve":
        udp_serve(*args)
    elif cmd == "udp-send":
        return udp_send(*args)
    elif cmd == "dns-serve":
        dns_serve(*args)
    elif cmd == "dns-query":
        return dns_query(*args)
    else:
        sys.stderr.write(__doc__)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
