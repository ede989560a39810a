#!/usr/bin/env python3
# A hostile guest: attacks boxd through the in-sandbox socket
# (/run/box/api.sock) the ways a root process in a sandbox can, each for a
# bounded time, and prints one JSON line of what it saw.  Run inside the
# guest (Python 3, standard library only) by tests/e2e-vm/hostiletest.py:
#
#   python3 hostile_guest.py MODE SECONDS [--socket PATH]
#
# Modes:
#   conns      open as many connections as it can (agent-opened channels),
#              send nothing, hold them; count those the host closes
#   slowloris  ~200 connections sending their request head a byte every 2 s
#   endless    heads that never end, written as fast as the host reads
#   bigbody    POST exec/run with a 16 MiB JSON body, and a 1 MiB one of
#              '[' nested 500,000 deep, over and over
#   flood      small requests (GET /self) as fast as 16 connections at a
#              time allow
#   starve     requests with large answers (GET fs/file of a 64 MiB file,
#              exec/run printing 8 MiB) whose answers are never read
#   halfclose  a request then shutdown(SHUT_WR), never reading; and
#              connections shut for writing before any byte
#   garbage    bytes that are not HTTP (ending as a head would), over and over
#
# The summary: {"mode", "seconds", "opened", "max_open", "closed_by_host",
# "refused", "statuses": {code: n}, "requests", "bytes_sent", "errors"}.

import errno
import json
import os
import random
import selectors
import socket
import sys
import time

SOCK = '/run/box/api.sock'


class Stats:
    def __init__(self, mode, seconds):
        self.d = {'mode': mode, 'seconds': seconds, 'opened': 0, 'max_open': 0, 'closed_by_host': 0,
                  'refused': 0, 'statuses': {}, 'requests': 0, 'bytes_sent': 0, 'errors': 0}
        self.open = 0

    def opened(self):
        self.d['opened'] += 1
        self.open += 1
        self.d['max_open'] = max(self.d['max_open'], self.open)

    def gone(self, by_host):
        self.open -= 1
        if by_host:
            self.d['closed_by_host'] += 1

    def status(self, code):
        k = str(code)
        self.d['statuses'][k] = self.d['statuses'].get(k, 0) + 1


def connect(st, block=False):
    """A connection, or None when the socket takes no more right now."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setblocking(block)
    try:
        s.connect(SOCK)
    except (BlockingIOError, InterruptedError):
        s.close()
        st.d['refused'] += 1
        return None
    except OSError as e:
        s.close()
        if e.errno in (errno.EAGAIN, errno.ECONNREFUSED):
            st.d['refused'] += 1
            return None
        raise
    st.opened()
    return s


def send_some(st, s, data):
    try:
        n = s.send(data)
    except (BlockingIOError, InterruptedError):
        return 0
    except OSError:
        return -1
    st.d['bytes_sent'] += n
    return n


def peer_closed(s):
    """True when the host ended the connection (EOF or reset); reads and
    drops what came."""
    try:
        data = s.recv(65536, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return data == b''


def status_of(head):
    try:
        return int(head.split(b' ', 2)[1])
    except (IndexError, ValueError):
        return 0


def request(method, path, body=b'', ctype='application/json', extra=''):
    h = '%s %s HTTP/1.1\r\nHost: box\r\n%s' % (method, path, extra)
    if body or method in ('POST', 'PUT'):
        h += 'Content-Type: %s\r\nContent-Length: %d\r\n' % (ctype, len(body))
    return (h + '\r\n').encode() + body


def exchange(st, data, timeout=30):
    """One request on a new connection; its status (0: none).  The answer
    may come before the whole body was sent (a body refused by its
    Content-Length): sending stops then."""
    s = connect(st, block=True)
    if s is None:
        return 0
    s.setblocking(False)
    head = b''
    view = memoryview(data)
    sel = selectors.DefaultSelector()
    sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
    end = time.time() + timeout
    st.d['requests'] += 1
    try:
        while b'\r\n' not in head and time.time() < end:
            for key, ev in sel.select(timeout=1):
                if ev & selectors.EVENT_READ:
                    chunk = s.recv(4096)
                    if not chunk:
                        end = 0
                        break
                    head += chunk
                if ev & selectors.EVENT_WRITE:
                    n = s.send(view[:65536])
                    st.d['bytes_sent'] += n
                    view = view[n:]
                    if not view:
                        sel.modify(s, selectors.EVENT_READ)
    except OSError:
        # a reset after the answer (the host stopped reading) is expected
        if b'\r\n' not in head:
            st.d['errors'] += 1
    finally:
        sel.close()
        s.close()
        st.gone(False)
    code = status_of(head)
    st.status(code)
    return code


def drop(st, sel, s, by_host):
    sel.unregister(s)
    s.close()
    st.gone(by_host)


def drop_all(st, sel):
    for key in list(sel.get_map().values()):
        drop(st, sel, key.fileobj, False)


# ---- modes ------------------------------------------------------------------

def hold(st, seconds, conns, tick=None, every=1.0):
    """Holds @conns until the end; @tick(s) every @every s on each; counts
    those the host closes."""
    end = time.time() + seconds
    while time.time() < end and conns:
        for s in list(conns):
            if peer_closed(s):
                conns.remove(s)
                s.close()
                st.gone(True)
            elif tick is not None and tick(s) < 0:
                conns.remove(s)
                s.close()
                st.gone(True)
        time.sleep(every)
    for s in conns:
        s.close()
        st.gone(False)


def mode_conns(st, seconds):
    conns = []
    end = time.time() + seconds
    # keep opening (the agent accepts 256 at once, the backlog holds more;
    # a connection the host closes makes room), and see what is closed
    while time.time() < end and len(conns) < 2000:
        s = connect(st)
        if s is not None:
            conns.append(s)
            continue
        for c in list(conns):
            if peer_closed(c):
                conns.remove(c)
                c.close()
                st.gone(True)
        time.sleep(0.2)
    for c in conns:
        c.close()
        st.gone(False)


def mode_slowloris(st, seconds):
    head = b'GET /self HTTP/1.1\r\nHost: box\r\nX-Pad: ' + b'a' * 4096
    conns = []
    pos = {}
    for _ in range(200):
        s = connect(st)
        if s is None:
            break
        conns.append(s)
        pos[s] = 0

    def tick(s):
        i = pos[s] % len(head)
        pos[s] += 1
        return send_some(st, s, head[i:i + 1])
    hold(st, seconds, conns, tick, every=2.0)


def mode_endless(st, seconds):
    end = time.time() + seconds
    sel = selectors.DefaultSelector()
    line = b'X-Endless: ' + b'e' * 1000 + b'\r\n'
    first = b'GET /self HTTP/1.1\r\nHost: box\r\n'
    while time.time() < end:
        while len(sel.get_map()) < 16:
            s = connect(st)
            if s is None:
                break
            send_some(st, s, first)
            sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)
        for key, ev in sel.select(timeout=0.5):
            s = key.fileobj
            if ev & selectors.EVENT_READ and peer_closed(s):
                drop(st, sel, s, True)
            elif ev & selectors.EVENT_WRITE and send_some(st, s, line) < 0:
                drop(st, sel, s, True)
    drop_all(st, sel)


def mode_bigbody(st, seconds):
    end = time.time() + seconds
    huge = b'{"cmd": ["true"], "env": {"A": "' + b'x' * (16 << 20) + b'"}}'
    depth = 500000
    nested = b'{"cmd": ' + b'[' * depth + b']' * depth + b'}'
    while time.time() < end:
        exchange(st, request('POST', '/exec/run', huge))
        exchange(st, request('POST', '/exec/run', nested))


def mode_flood(st, seconds):
    end = time.time() + seconds
    sel = selectors.DefaultSelector()
    req = request('GET', '/self')
    while time.time() < end:
        while len(sel.get_map()) < 16:
            s = connect(st)
            if s is None:
                break
            if send_some(st, s, req) != len(req):
                s.close()
                st.gone(False)
                st.d['errors'] += 1
                continue
            st.d['requests'] += 1
            sel.register(s, selectors.EVENT_READ, b'')
        for key, _ in sel.select(timeout=0.5):
            s = key.fileobj
            try:
                chunk = s.recv(65536)
            except OSError:
                chunk = b''
            data = key.data + chunk
            if chunk and b'\r\n' not in data:
                sel.modify(s, selectors.EVENT_READ, data)
                continue
            st.status(status_of(data))
            drop(st, sel, s, False)
    drop_all(st, sel)


def mode_starve(st, seconds):
    big = '/tmp/hostile-big'
    if not os.path.exists(big) or os.path.getsize(big) != 64 << 20:
        with open(big, 'wb') as f:
            f.write(os.urandom(1 << 20) * 64)
    reqs = [request('GET', '/fs/file?path=' + big),
            request('POST', '/exec/run', json.dumps(
                {'cmd': ['sh', '-c', 'head -c 8388608 /dev/zero']}).encode())]
    conns = []
    for i in range(200):
        s = connect(st)
        if s is None:
            break
        # a tiny receive buffer: the answer stops at once
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        r = reqs[i % 2]
        if send_some(st, s, r) == len(r):
            st.d['requests'] += 1
        conns.append(s)
    # never read
    end = time.time() + seconds
    while time.time() < end and conns:
        time.sleep(1)
    for s in conns:
        s.close()
        st.gone(False)


def mode_halfclose(st, seconds):
    end = time.time() + seconds
    conns = []
    req = request('GET', '/fs/file?path=/tmp/hostile-big')
    while time.time() < end and len(conns) < 200:
        s = connect(st)
        if s is None:
            time.sleep(0.1)
            continue
        if len(conns) % 2 == 0 and send_some(st, s, req) == len(req):
            st.d['requests'] += 1
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            st.d['errors'] += 1
        conns.append(s)
    while time.time() < end:
        time.sleep(0.5)
    for s in conns:
        s.close()
        st.gone(False)


def mode_garbage(st, seconds):
    end = time.time() + seconds
    rnd = random.Random(12)
    while time.time() < end:
        s = connect(st, block=True)
        if s is None:
            time.sleep(0.1)
            continue
        s.settimeout(10)
        # random bytes, then the end of a head: the parser has to decide
        data = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 8192))) + b'\r\n\r\n'
        try:
            s.sendall(data)
            st.d['bytes_sent'] += len(data)
            st.d['requests'] += 1
            head = s.recv(4096)
            st.status(status_of(head) if head else 0)
        except OSError:
            st.d['errors'] += 1
        s.close()
        st.gone(False)


MODES = {'conns': mode_conns, 'slowloris': mode_slowloris, 'endless': mode_endless,
         'bigbody': mode_bigbody, 'flood': mode_flood, 'starve': mode_starve,
         'halfclose': mode_halfclose, 'garbage': mode_garbage}


def main():
    global SOCK
    args = sys.argv[1:]
    if '--socket' in args:
        i = args.index('--socket')
        SOCK = args[i + 1]
        del args[i:i + 2]
    mode, seconds = args[0], float(args[1])
    st = Stats(mode, seconds)
    t = time.time()
    MODES[mode](st, seconds)
    st.d['took_s'] = round(time.time() - t, 2)
    print(json.dumps(st.d, sort_keys=True))


if __name__ == '__main__':
    main()
