"""Host side of the box agent protocol (doc/AGENT-PROTOCOL.md), for tests.

A small synchronous client: frames, the strict control messages, credits.
"""
import base64
import json
import os
import socket
import struct
import time

MAGIC = 0xB0C5
HDR = 16
CTRL, DATA, EOF, CREDIT, CLOSE = 1, 2, 3, 4, 5
WINDOW = 1024 * 1024


def fnv1a(b):
    h = 2166136261
    for x in b:
        h = ((h ^ x) * 16777619) & 0xFFFFFFFF
    return h


def encode(ftype, stream, chan, payload=b""):
    h = struct.pack("<HBBII", MAGIC, ftype, stream, chan, len(payload))
    return h + struct.pack("<I", fnv1a(h)) + payload


class AgentError(Exception):
    def __init__(self, code, message):
        super().__init__("%s: %s" % (code, message))
        self.code = code
        self.message = message


class Agent:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""
        self.next_id = 1
        self.next_chan = 1
        self.pending = []      # frames read while waiting for something else
        self.skipped = 0
        self.precredited = {}

    # -- frames --
    def send(self, ftype, stream, chan, payload=b""):
        self.sock.sendall(encode(ftype, stream, chan, payload))

    def send_json(self, chan, obj):
        self.send(CTRL, 0, chan, json.dumps(obj, separators=(",", ":")).encode())

    def _read_frame(self, deadline):
        while True:
            while len(self.buf) >= 2 and self.buf[:2] != b"\xc5\xb0":
                self.buf = self.buf[1:]
                self.skipped += 1
            if len(self.buf) >= HDR:
                magic, t, s, ch, ln, chk = struct.unpack("<HBBIII", self.buf[:HDR])
                if chk != fnv1a(self.buf[:12]) or t < 1 or t > 5 or ln > (1 << 20):
                    self.buf = self.buf[1:]
                    self.skipped += 1
                    continue
                if len(self.buf) >= HDR + ln:
                    p = self.buf[HDR:HDR + ln]
                    self.buf = self.buf[HDR + ln:]
                    return t, s, ch, p
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame from the agent")
            self.sock.settimeout(left)
            d = self.sock.recv(1 << 20)
            if not d:
                raise EOFError("agent connection closed")
            self.buf += d

    def frame(self, timeout=30):
        if self.pending:
            return self.pending.pop(0)
        return self._read_frame(time.monotonic() + timeout)

    # -- control --
    def request(self, op, timeout=30, **kw):
        rid = self.next_id
        self.next_id += 1
        msg = {"id": rid, "op": op}
        msg.update(kw)
        self.send_json(0, msg)
        deadline = time.monotonic() + timeout
        kept = []
        try:
            while True:
                f = self._read_frame(deadline)
                t, s, ch, p = f
                if t == CTRL and ch == 0:
                    m = json.loads(p)
                    if m.get("id") == rid:
                        if not m.get("ok"):
                            raise AgentError(m["error"]["code"], m["error"]["message"])
                        return m
                kept.append(f)
        finally:
            self.pending.extend(kept)

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            t, s, ch, p = self._read_frame(deadline)
            if t == CTRL and ch == 0:
                m = json.loads(p)
                if m.get("event") == "ready":
                    return m

    def hello(self, timeout=30):
        """Start a session: resynchronise on the reply carrying our nonce."""
        nonce = base64.b32encode(os.urandom(10)).decode()
        rid = self.next_id
        self.next_id += 1
        self.send_json(0, {"id": rid, "op": "hello", "version": 1, "window": WINDOW, "nonce": nonce})
        deadline = time.monotonic() + timeout
        while True:
            t, s, ch, p = self._read_frame(deadline)
            if t == CTRL and ch == 0:
                m = json.loads(p)
                if m.get("id") == rid and m.get("nonce") == nonce:
                    self.pending = []
                    return m

    def next_frame(self, chan, timeout=30):
        """The next frame of one channel (channel 0: events), leaving the
        frames of other channels queued."""
        for i, f in enumerate(self.pending):
            if f[2] == chan:
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            f = self._read_frame(deadline)
            if f[2] == chan:
                return f
            self.pending.append(f)

    def event(self, name, timeout=30):
        """The next channel-0 event called name (others are dropped)."""
        deadline = time.monotonic() + timeout
        while True:
            t, s, ch, p = self.next_frame(0, max(0.001, deadline - time.monotonic()))
            if t == CTRL:
                m = json.loads(p)
                if m.get("event") == name:
                    return m

    def open(self, op, **kw):
        """A request that opens a channel: returns (chan, reply)."""
        chan = kw.pop("chan", None)
        if chan is None:
            chan = self.next_chan
            self.next_chan += 1
        r = self.request(op, chan=chan, **kw)
        return chan, r

    def _wait_credit(self, chan, timeout=30):
        for i, f in enumerate(self.pending):
            if f[2] == chan and f[0] in (CREDIT, CLOSE):
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            f = self._read_frame(deadline)
            if f[2] == chan and f[0] in (CREDIT, CLOSE):
                return f
            if f[2] == chan and f[0] == DATA:
                # keep output flowing meanwhile (collect() knows)
                self.send(CREDIT, 0, chan, struct.pack("<I", len(f[3])))
                self.precredited[chan] = self.precredited.get(chan, 0) + len(f[3])
            self.pending.append(f)

    def send_data(self, chan, data, credit):
        """Send bytes on stream 0 within credit (a one-element list, updated),
        waiting for CREDIT as needed (other frames stay queued)."""
        off = 0
        while off < len(data):
            while credit[0] <= 0:
                t, s, ch, p = self._wait_credit(chan)
                if t == CLOSE:
                    self.pending.insert(0, (t, s, ch, p))
                    raise EOFError("channel closed while sending")
                credit[0] += struct.unpack("<I", p)[0]
            n = min(32768, credit[0], len(data) - off)
            self.send(DATA, 0, chan, data[off:off + n])
            off += n
            credit[0] -= n

    def collect(self, chan, timeout=60, credit=True, until=None):
        """Frames of chan until CLOSE (or until(result) is true): returns
        {"data": {1: bytes, 2: bytes}, "eof": set, "events": [ctrl], "closed": bool}."""
        res = {"data": {1: b"", 2: b""}, "eof": set(), "events": [], "closed": False, "credit": 0}
        deadline = time.monotonic() + timeout
        while not res["closed"] and not (until and until(res)):
            t, s, ch, p = self.next_frame(chan, max(0.001, deadline - time.monotonic()))
            if t == DATA:
                res["data"][s] = res["data"].get(s, b"") + p
                pre = self.precredited.get(chan, 0)
                if pre >= len(p):
                    self.precredited[chan] = pre - len(p)
                elif credit:
                    self.precredited[chan] = 0
                    self.send(CREDIT, 0, chan, struct.pack("<I", len(p) - pre))
            elif t == EOF:
                res["eof"].add(s)
            elif t == CTRL:
                res["events"].append(json.loads(p))
            elif t == CREDIT:
                res["credit"] += struct.unpack("<I", p)[0]
            elif t == CLOSE:
                res["closed"] = True
        return res

    # -- exec --
    def exec_start(self, argv, **kw):
        chan = self.next_chan
        self.next_chan += 1
        r = self.request("exec", chan=chan, argv=argv, **kw)
        return chan, r["pid"]

    def exec_run(self, argv, stdin=b"", timeout=60, limit=16 << 20, **kw):
        kw.setdefault("timeout_ms", timeout * 1000)
        chan, pid = self.exec_start(argv, limit=limit, **kw)
        window = WINDOW
        off = 0
        out = {1: [], 2: []}
        exit_msg = None
        sent_eof = False
        while True:
            while off < len(stdin) and window > 0:
                n = min(32768, window, len(stdin) - off)
                self.send(DATA, 0, chan, stdin[off:off + n])
                off += n
                window -= n
            if off >= len(stdin) and not sent_eof:
                self.send(EOF, 0, chan)
                sent_eof = True
            t, s, ch, p = self.next_frame(chan, timeout + 30)
            if ch != chan:
                continue
            if t == DATA:
                out[s].append(p)
                self.send(CREDIT, 0, chan, struct.pack("<I", len(p)))
            elif t == CREDIT:
                window += struct.unpack("<I", p)[0]
            elif t == CTRL:
                exit_msg = json.loads(p)
            elif t == CLOSE:
                break
        res = dict(exit_msg or {})
        res["stdout"] = b"".join(out[1])
        res["stderr"] = b"".join(out[2])
        return res


def connect_unix(path, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return Agent(s)
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)
