# streamtest.py: shared code of the vm suite's streaming tests
# (tests/e2e-vm-stream): the WebSocket routes (exec, sessions, port
# connect) and the port watch, on top of tests/e2e-vm/vmtest.py (boxd with
# real microVMs) and tests/e2e/wsclient.py (the WebSocket client).

import http.client
import json
import os
import queue
import re
import sys
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get('BOX_SOURCE_ROOT') or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e-vm'))
sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e'))

import vmtest  # noqa: E402
import wsclient  # noqa: E402

RE_SESSION = re.compile(r'^s-[a-z0-9]{10}$')
SESSION_FIELDS = {'id', 'cmd', 'tty', 'pid', 'started_at', 'exited', 'attached'}


def query(**params):
    """?a=1&b=x&b=y from keyword arguments (lists repeat, None is left out)."""
    pairs = []
    for k, v in params.items():
        if v is None:
            continue
        for item in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(item, bool):
                item = 'true' if item else 'false'
            pairs.append((k, str(item)))
    return ('?' + urllib.parse.urlencode(pairs)) if pairs else ''


def ws(d, key, path, timeout=60, headers=None, rcvbuf=None, **params):
    """A WebSocket on @path (wsclient.HTTPRefused when refused)."""
    hdrs = {'Authorization': 'Bearer ' + key} if key is not None else {}
    hdrs.update(headers or {})
    return wsclient.connect('127.0.0.1', d.port, path + query(**params), headers=hdrs,
                            timeout=timeout, rcvbuf=rcvbuf)


def refused(d, key, path, **params):
    """The HTTP answer of an upgrade that must be refused, as boxtest's
    (status, headers, json, raw); (101, ...) when it was accepted."""
    try:
        w = ws(d, key, path, **params)
    except wsclient.HTTPRefused as e:
        return (e.status, e.headers, e.json, e.body)
    w.abort()
    return (101, {}, None, b'')


def exec_ws(d, key, sandbox, cmd, **params):
    return ws(d, key, '/v1/sandboxes/%s/exec' % sandbox, cmd=cmd, **params)


def attach_ws(d, key, sandbox, session, **params):
    return ws(d, key, '/v1/sandboxes/%s/exec/sessions/%s' % (sandbox, session), **params)


class Frames:
    """Every message of a socket until it closed: text frames decoded as
    JSON, binary frames split into their tag and bytes."""

    def __init__(self, w, timeout=60, limit=None):
        self.controls = []        # JSON objects, in order
        self.order = []           # ('ctl', obj) / (tag, bytes), in order
        self.data = {}            # tag -> bytes
        self.close_code = None
        self.timed_out = False
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                self.timed_out = True
                break
            try:
                op, payload = w.recv(left)
            except (wsclient.ConnectionClosed, OSError):
                self.timed_out = not w.closed and not w.eof
                break
            if op == wsclient.OP_CLOSE:
                break
            self.add(op, payload)
            if limit is not None and limit(self):
                return
        self.close_code = w.close_code

    def add(self, op, payload):
        if op == wsclient.OP_TEXT:
            obj = json.loads(payload)
            self.controls.append(obj)
            self.order.append(('ctl', obj))
        else:
            tag = payload[0] if payload else None
            self.order.append((tag, payload[1:]))
            self.data.setdefault(tag, bytearray()).extend(payload[1:])

    def out(self, tag=1):
        return bytes(self.data.get(tag, b''))

    def types(self):
        return [c.get('type') for c in self.controls]

    def exit_code(self):
        for c in self.controls:
            if c.get('type') == 'exit':
                return c.get('code')
        return None

    def describe(self):
        return 'controls %r, data %r, close %r%s' % (
            self.controls, {k: v[:200] for k, v in self.data.items()}, self.close_code,
            ' (timed out)' if self.timed_out else '')


def read_until(w, pred, timeout=30):
    """Frames read until @pred(frames) holds (the socket stays open)."""
    f = Frames.__new__(Frames)
    f.controls, f.order, f.data, f.close_code, f.timed_out = [], [], {}, None, False
    end = time.time() + timeout
    while not pred(f):
        left = end - time.time()
        if left <= 0:
            f.timed_out = True
            break
        try:
            op, payload = w.recv(left)
        except (wsclient.ConnectionClosed, OSError):
            f.timed_out = True
            break
        if op == wsclient.OP_CLOSE:
            f.close_code = w.close_code
            break
        f.add(op, payload)
    return f


def read_to_close(w, timeout=30):
    """The bytes of the data frames until the socket closes (raw streams)."""
    got = b''
    while True:
        try:
            op, data = w.recv(timeout)
        except (wsclient.ConnectionClosed, OSError):
            return got
        if op == wsclient.OP_CLOSE:
            return got
        got += data


def stdin(w, data):
    w.send_binary(b'\x00' + (data.encode() if isinstance(data, str) else data))


def stdin_eof(w):
    w.send_binary(b'\x04')


def sessions(d, key, sandbox):
    r = d.request('GET', '/v1/sandboxes/%s/exec/sessions' % sandbox, token=key)
    return r, {s.get('id'): s for s in ((r[2] or {}).get('sessions') or [])}


def session_of(d, key, sandbox, sid):
    return sessions(d, key, sandbox)[1].get(sid)


def wait_session(d, key, sandbox, sid, pred, timeout=20):
    """The session once @pred(session) holds, or the last one seen."""
    end = time.time() + timeout
    s = None
    while time.time() < end:
        s = session_of(d, key, sandbox, sid)
        if s is not None and pred(s):
            return s
        time.sleep(0.2)
    return s


def boxd_sanitized(d):
    """True when boxd runs with AddressSanitizer (boxtest.Boxd.sanitized)."""
    return d.sanitized()


def boxd_rss_kib(d):
    with open('/proc/%d/status' % d.proc.pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
    return None


class Sse:
    """A Server-Sent Events stream read in a thread (ports/watch); the end
    of the stream is an event {'event': None, 'end': True}."""

    def __init__(self, d, key, path):
        self.q = queue.Queue()
        self.status = None
        self.headers = {}
        self.body = None
        self.ended = threading.Event()
        self.connected = threading.Event()
        self.conn = http.client.HTTPConnection('127.0.0.1', d.port, timeout=None)
        self.closing = False
        self.path = path
        self.key = key
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            self.conn.request('GET', self.path, headers={'Authorization': 'Bearer ' + self.key})
            resp = self.conn.getresponse()
            self.status = resp.status
            self.headers = {k.lower(): v for k, v in resp.getheaders()}
            self.connected.set()
            if resp.status != 200:
                self.body = resp.read()
                return
            ev, data = {}, []
            while True:
                line = resp.readline()
                if not line:
                    break
                line = line.decode('utf-8', 'replace').rstrip('\r\n')
                if line == '':
                    if data:
                        self.q.put({'event': ev.get('event'), 'data': json.loads('\n'.join(data)),
                                    'at': time.time()})
                    ev, data = {}, []
                elif not line.startswith(':'):
                    field, _, value = line.partition(':')
                    value = value[1:] if value.startswith(' ') else value
                    if field == 'data':
                        data.append(value)
                    else:
                        ev[field] = value
        except Exception as e:  # noqa: BLE001 - reported through the queue
            if not self.closing:
                self.q.put({'event': None, 'error': repr(e)})
        finally:
            self.connected.set()
            self.ended.set()
            self.q.put({'event': None, 'end': True, 'at': time.time()})

    def next(self, timeout):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None

    def wait_for(self, pred, timeout):
        end = time.time() + timeout
        seen = []
        while True:
            e = self.next(max(0.0, end - time.time()))
            if e is None:
                return None, seen
            if pred(e):
                return e, seen
            seen.append(e)
            if e.get('end'):
                return None, seen

    def close(self):
        self.closing = True
        try:
            if self.conn.sock is not None:
                self.conn.sock.shutdown(2)
        except OSError:
            pass
        self.conn.close()
