# filetest.py: shared code of the vm suite's file tests (tests/e2e-vm-files):
# the routes under /v1/sandboxes/{sandbox}/fs/ and the in-sandbox socket, on
# top of tests/e2e-vm/vmtest.py (boxd with real microVMs) and
# tests/e2e/wsclient.py (the WebSocket client).
#
#   Fs(d, key, sandbox)     one sandbox's file routes: get/put/stat/list/...
#                           answer boxtest's (status, headers, json, raw)
#   Fs.put_stream()         PUT from an iterable of chunks (nothing whole in
#                           memory); Fs.get_stream() GET into a sink
#   guest(), guest_ok()     a shell line in the guest as root (exec/run)
#   boxd_memory_kib()       boxd's VmRSS and VmHWM

import hashlib
import http.client
import io
import json
import os
import sys
import tarfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get('BOX_SOURCE_ROOT') or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e-vm'))
sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e'))

import vmtest  # noqa: E402
import wsclient  # noqa: E402

STAT_FIELDS = {'path', 'name', 'type', 'size', 'mode', 'mtime'}


def query(**params):
    """?a=1&b=x from keyword arguments (None is left out, booleans are true/false)."""
    pairs = []
    for k, v in params.items():
        if v is None:
            continue
        if isinstance(v, bool):
            v = 'true' if v else 'false'
        pairs.append((k, str(v)))
    return ('?' + urllib.parse.urlencode(pairs)) if pairs else ''


class Fs:
    """The file routes of one sandbox, for one key (None: no key)."""

    def __init__(self, d, key, sandbox, prefix=None):
        self.d = d
        self.key = key
        self.sandbox = sandbox
        self.prefix = prefix if prefix is not None else '/v1/sandboxes/%s' % sandbox

    def headers(self, extra=None):
        h = {}
        if self.key is not None:
            h['Authorization'] = 'Bearer ' + self.key
        h.update(extra or {})
        return h

    def request(self, method, route, body=None, headers=None, timeout=120, **params):
        """(status, headers, json or None, raw); @body bytes go as they are,
        a dict as JSON."""
        data = body
        hdrs = self.headers(headers)
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
            hdrs.setdefault('Content-Type', 'application/json')
        conn = http.client.HTTPConnection('127.0.0.1', self.d.port, timeout=timeout)
        try:
            conn.request(method, self.prefix + route + query(**params), body=data, headers=hdrs)
            resp = conn.getresponse()
            raw = resp.read()
            rh = {k.lower(): v for k, v in resp.getheaders()}
            status = resp.status
        finally:
            conn.close()
        parsed = None
        if raw and rh.get('content-type', '').startswith('application/json'):
            try:
                parsed = json.loads(raw.decode('utf-8'))
            except ValueError:
                parsed = None
        return (status, rh, parsed, raw)

    def get(self, path, **params):
        return self.request('GET', '/fs/file', path=path, **params)

    def put(self, path, data, **params):
        return self.request('PUT', '/fs/file', body=data, path=path, **params)

    def delete(self, path, **params):
        return self.request('DELETE', '/fs/file', path=path, **params)

    def stat(self, path, **params):
        return self.request('GET', '/fs/stat', path=path, **params)

    def list(self, path, **params):
        return self.request('GET', '/fs/list', path=path, **params)

    def mkdir(self, body, **params):
        return self.request('POST', '/fs/mkdir', body=body, **params)

    def rename(self, body, **params):
        return self.request('POST', '/fs/rename', body=body, **params)

    def tar_get(self, path, **params):
        return self.request('GET', '/fs/tar', path=path, **params)

    def tar_put(self, path, data, **params):
        return self.request('PUT', '/fs/tar', body=data, path=path, **params)

    def watch(self, path, timeout=60, **params):
        return wsclient.connect('127.0.0.1', self.d.port,
                                self.prefix + '/fs/watch' + query(path=path, **params),
                                headers=self.headers(), timeout=timeout)

    def put_stream(self, path, chunks, length, timeout=600, **params):
        """PUT with Content-Length @length from the iterable @chunks."""
        conn = http.client.HTTPConnection('127.0.0.1', self.d.port, timeout=timeout)
        try:
            conn.putrequest('PUT', self.prefix + '/fs/file' + query(path=path, **params))
            for k, v in self.headers({'Content-Length': str(length)}).items():
                conn.putheader(k, v)
            conn.endheaders()
            for chunk in chunks:
                conn.send(chunk)
            resp = conn.getresponse()
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
        finally:
            conn.close()

    def get_stream(self, path, sink, timeout=600, bufsize=1 << 20, **params):
        """GET into sink(bytes); (status, headers, bytes read, complete).
        complete is False when a chunked body ended without its last chunk,
        or a body with a Content-Length came short of it (http.client reads
        that as an end)."""
        conn = http.client.HTTPConnection('127.0.0.1', self.d.port, timeout=timeout)
        total = 0
        try:
            conn.request('GET', self.prefix + '/fs/file' + query(path=path, **params),
                         headers=self.headers())
            resp = conn.getresponse()
            rh = {k.lower(): v for k, v in resp.getheaders()}
            if resp.status != 200:
                sink(resp.read())
                return resp.status, rh, 0, True
            while True:
                try:
                    data = resp.read(bufsize)
                except http.client.IncompleteRead as e:
                    total += len(e.partial)
                    return resp.status, rh, total, False
                if not data:
                    length = rh.get('content-length')
                    return resp.status, rh, total, length is None or int(length) == total
                total += len(data)
                sink(data)
        except (ConnectionError, http.client.HTTPException):
            return 200, {}, total, False
        finally:
            conn.close()


def guest(d, key, sandbox, script, user='root', timeout=120, **fields):
    """A shell line in the guest (exec/run): a vmtest.Run."""
    return vmtest.run(d, key, sandbox, ['sh', '-c', script], user=user, timeout=timeout, **fields)


def guest_ok(t, d, key, sandbox, script, desc, user='root', **fields):
    r = guest(d, key, sandbox, script, user=user, **fields)
    t.ok(r.status == 200 and r.exit_code == 0, desc, r.describe())
    return r


def boxd_sanitized(d):
    """True when boxd runs with AddressSanitizer (boxtest.Boxd.sanitized)."""
    return d.sanitized()


def boxd_memory_kib(d):
    """boxd's (VmRSS, VmHWM) in KiB."""
    rss = hwm = None
    with open('/proc/%d/status' % d.proc.pid) as f:
        for line in f:
            if line.startswith('VmRSS:'):
                rss = int(line.split()[1])
            elif line.startswith('VmHWM:'):
                hwm = int(line.split()[1])
    return rss, hwm


def tar_bytes(members):
    """A tar from (TarInfo, bytes or None) pairs."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode='w', format=tarfile.PAX_FORMAT) as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return buf.getvalue()


def tar_member(name, kind='file', data=None, mode=0o644, target=None):
    info = tarfile.TarInfo(name)
    info.mode = mode
    info.mtime = int(time.time())
    if kind == 'dir':
        info.type = tarfile.DIRTYPE
        info.mode = mode if mode != 0o644 else 0o755
    elif kind == 'symlink':
        info.type = tarfile.SYMTYPE
        info.linkname = target
    return (info, data if kind == 'file' else None)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def pattern_chunks(total, chunk=1 << 20, seed=b'box'):
    """@total bytes of a reproducible, incompressible pattern in chunks:
    a random 1 MiB block, each copy prefixed by its index."""
    block = hashlib.sha256(seed).digest() * (chunk // 32)
    block = bytes(b ^ (i * 131 & 0xff) for i, b in enumerate(block))
    sent = 0
    i = 0
    while sent < total:
        n = min(chunk, total - sent)
        head = i.to_bytes(8, 'little')
        piece = (head + block[8:])[:n]
        yield piece
        sent += n
        i += 1
