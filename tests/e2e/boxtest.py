# boxtest.py: shared code of the end-to-end tests.
#
# Starts the real boxd (from $BOX_BUILD_ROOT/core/boxd) in a temporary data
# directory with the dummy hypervisor, and drives it over HTTP as a user with
# curl would.  Output is TAP: "ok N - ...", "not ok N - ...", then "1..N".
# Only the Python standard library is used.

import datetime
import http.client
import json
import os
import queue
import re
import secrets as _secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

BUILD_ROOT = os.environ.get('BOX_BUILD_ROOT', '')
PLUGIN_DIR = os.environ.get('BOX_PLUGIN_DIR', os.path.join(BUILD_ROOT, 'plugins'))
BOXD = os.environ.get('BOXD', os.path.join(BUILD_ROOT, 'core', 'boxd'))
SANDBOX_DOMAIN = 'sbx.e2e.test'

RE_SANDBOX_ID = re.compile(r'^sb-[a-z2-7]{12}$')
RE_GEN_NAME = re.compile(r'^[a-z]+-[a-z]+-[0-9]{4}$')
RE_KEY_ID = re.compile(r'^key-[a-z2-7]{12}$')
RE_KEY_SECRET = re.compile(r'^box_[a-z2-7]{32}$')
RE_RFC3339 = re.compile(
    r'^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})$')

SANDBOX_FIELDS = {'id', 'name', 'project', 'template', 'image', 'state', 'resources',
                  'env', 'labels', 'idle', 'deadline', 'protected', 'http_port',
                  'network', 'secrets', 'url', 'urls', 'created_at', 'updated_at',
                  'last_active_at'}
SECRET_FIELDS = {'name', 'hosts', 'placeholder', 'inject', 'created_at', 'updated_at'}
PROJECT_FIELDS = {'name', 'domains', 'created_at'}
KEY_FIELDS = {'id', 'name', 'project', 'created_at'}


def parse_ts(s):
    """An RFC 3339 timestamp as an aware datetime, or None."""
    if not isinstance(s, str):
        return None
    m = RE_RFC3339.match(s)
    if m is None:
        return None
    frac = m.group(7) or ''
    micro = int((frac[1:] + '000000')[:6]) if frac else 0
    tz = m.group(8)
    if tz == 'Z':
        tzinfo = datetime.timezone.utc
    else:
        sign = 1 if tz[0] == '+' else -1
        tzinfo = datetime.timezone(sign * datetime.timedelta(hours=int(tz[1:3]),
                                                             minutes=int(tz[4:6])))
    try:
        return datetime.datetime(int(m.group(1)), int(m.group(2)), int(m.group(3)),
                                 int(m.group(4)), int(m.group(5)), int(m.group(6)),
                                 micro, tzinfo)
    except ValueError:
        return None


def is_utc_ts(s):
    """RFC 3339 in UTC (Z or +00:00)."""
    d = parse_ts(s)
    return d is not None and d.utcoffset() == datetime.timedelta(0)


def rfc3339(dt):
    return dt.astimezone(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def future(seconds):
    return rfc3339(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds))


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def random_token():
    return 'admin-' + _secrets.token_hex(16)


def rss_kib(pid):
    """VmRSS of process @pid in KiB, or None."""
    try:
        with open('/proc/%d/status' % pid) as f:
            for line in f:
                if line.startswith('VmRSS:'):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


# ---------------------------------------------------------------- TAP ----

class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0
        self.daemons = []
        self.failed_descs = []

    def comment(self, text):
        for line in str(text).splitlines() or ['']:
            print('# ' + line)
        sys.stdout.flush()

    def ok(self, cond, desc, detail=None):
        self.n += 1
        desc = desc.replace('#', '(hash)').replace('\n', ' ')
        if cond:
            print('ok %d - %s' % (self.n, desc))
        else:
            self.failed += 1
            self.failed_descs.append(desc)
            print('not ok %d - %s' % (self.n, desc))
            if detail is not None:
                self.comment(detail)
        sys.stdout.flush()
        return bool(cond)

    def skip(self, desc, reason):
        self.n += 1
        print('ok %d - %s # SKIP %s' % (self.n, desc.replace('#', '(hash)'), reason))
        sys.stdout.flush()

    def eq(self, got, want, desc):
        return self.ok(got == want, desc, 'expected %r\ngot      %r' % (want, got))

    def match(self, regex, value, desc):
        if isinstance(regex, str):
            regex = re.compile(regex)
        cond = isinstance(value, str) and regex.search(value) is not None
        return self.ok(cond, desc, 'expected to match %r, got %r' % (regex.pattern, value))

    def fields(self, obj, want, desc):
        got = set(obj.keys()) if isinstance(obj, dict) else None
        return self.ok(got == set(want), desc,
                       'expected fields %r\ngot %r' % (sorted(want), sorted(got) if got is not None else obj))

    def error(self, resp, status, code, desc, message_contains=None, message=None):
        """Checks an error answer: status, body exactly {error: {code, message}}, code."""
        st, _h, body, raw = resp
        good = (st == status and isinstance(body, dict) and set(body.keys()) == {'error'}
                and isinstance(body['error'], dict)
                and set(body['error'].keys()) == {'code', 'message'}
                and body['error']['code'] == code
                and isinstance(body['error']['message'], str)
                and body['error']['message'] != '')
        if good and message_contains is not None:
            good = message_contains.lower() in body['error']['message'].lower()
        if good and message is not None:
            if isinstance(message, (list, tuple)):
                good = body['error']['message'] in message
            else:
                good = body['error']['message'] == message
        extra = ''
        if message_contains is not None:
            extra = ', message containing %r' % message_contains
        if message is not None:
            extra = ', message %r' % (message,)
        return self.ok(good, '%s -> %d %s' % (desc, status, code),
                       'expected %d {error: {code: %s, message}}%s\ngot %s %s'
                       % (status, code, extra, st, raw[:600]))

    def status(self, resp, status, desc):
        st, _h, _body, raw = resp
        if isinstance(status, (list, tuple)):
            cond = st in status
        else:
            cond = st == status
        return self.ok(cond, '%s -> %s' % (desc, status),
                       'expected status %s\ngot %s %s' % (status, st, raw[:600]))

    def section(self, name):
        return _Section(self, name)

    def finish(self):
        print('1..%d' % self.n)
        if self.failed:
            self.comment('%d of %d checks FAILED:' % (self.failed, self.n))
            for d in self.failed_descs:
                self.comment('  ' + d)
            for d in self.daemons:
                d.dump_log()
        for d in self.daemons:
            d.cleanup()
        sys.stdout.flush()
        sys.exit(1 if self.failed else 0)


class _Section:
    def __init__(self, tap, name):
        self.tap = tap
        self.name = name

    def __enter__(self):
        self.tap.comment('--- ' + self.name)
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            return False
        self.tap.ok(False, '%s: finished without an exception' % self.name,
                    ''.join(traceback.format_exception(exc_type, exc, tb)))
        return True   # go on with the next section


# -------------------------------------------------------------- boxd ----

class Boxd:
    """One boxd process on a data dir."""

    def __init__(self, tap, data_dir=None, admin_token='', extra_args=(), env_token=True, env=None):
        self.tap = tap
        self.own_dir = None
        if data_dir is None:
            self.own_dir = tempfile.mkdtemp(prefix='box-e2e-')
            data_dir = os.path.join(self.own_dir, 'data')
        self.data_dir = data_dir
        self.admin_token = admin_token if admin_token else random_token()
        self.env_token = env_token
        self.extra_args = list(extra_args)
        self.extra_env = dict(env or {})
        self.proc = None
        self.port = None
        self.logs = []       # every log file of this object's processes
        self.log_path = None
        tap.daemons.append(self)

    # -- process --
    def start(self, wait=True, same_port=False):
        """same_port: listen where the last start did (a restart clients can follow)."""
        if not same_port or self.port is None:
            self.port = free_port()
        # no D-Bus unless the test asks for a bus of its own
        dbus = [] if '--session-bus' in self.extra_args else ['--no-dbus']
        args = [BOXD, '--data-dir', self.data_dir, '--listen', '127.0.0.1:%d' % self.port,
                '--hypervisor', 'dummy'] + dbus + ['--plugin-dir', PLUGIN_DIR,
                '--sandbox-domain', SANDBOX_DOMAIN] + self.extra_args
        env = dict(os.environ)
        env.pop('BOX_ADMIN_TOKEN', None)
        if self.env_token:
            env['BOX_ADMIN_TOKEN'] = self.admin_token
        env.update(self.extra_env)
        logdir = self.own_dir or tempfile.mkdtemp(prefix='box-e2e-log-')
        self.log_path = os.path.join(logdir, 'boxd-%d.log' % (len(self.logs) + 1))
        self.logs.append(self.log_path)
        self.logf = open(self.log_path, 'wb')
        self.tap.comment('starting: ' + ' '.join(args))
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError('boxd exited with %d before listening (log: %s)'
                                   % (self.proc.returncode, self.log_text()[-2000:]))
            try:
                with socket.create_connection(('127.0.0.1', self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError('boxd did not listen on port %d within %ds' % (self.port, timeout))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, desc='boxd stops on SIGTERM with exit code 0'):
        """SIGTERM; checks the exit code is 0."""
        if self.proc is None:
            return None
        rc = None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                # past the libvirt plugin's 60 s wait for its work under way
                rc = self.proc.wait(timeout=75)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                rc = 'timeout (killed)'
        else:
            rc = 'already exited with %d' % self.proc.returncode
        self.logf.close()
        self.tap.ok(rc == 0, desc, 'exit: %r' % (rc,))
        self.proc = None
        return rc

    def sanitized(self):
        """True when boxd runs with AddressSanitizer: its RSS then means
        nothing (quarantine, shadow memory) and bulk bytes cost 2-3x."""
        with open('/proc/%d/maps' % self.proc.pid) as f:
            return 'libasan' in f.read()

    def kill9(self):
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.logf.close()
            self.proc = None

    def log_text(self):
        out = ''
        for p in self.logs:
            try:
                with open(p, 'rb') as f:
                    out += f.read().decode('utf-8', 'replace')
            except OSError:
                pass
        return out

    def dump_log(self):
        self.tap.comment('==== boxd log (%s) ====' % self.data_dir)
        text = self.log_text()
        lines = text.splitlines()
        if len(lines) > 300:
            self.tap.comment('... (%d lines cut)' % (len(lines) - 300))
            lines = lines[-300:]
        for line in lines:
            self.tap.comment(line)

    def cleanup(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.own_dir is not None and not os.environ.get('BOX_E2E_KEEP'):
            shutil.rmtree(self.own_dir, ignore_errors=True)

    # -- HTTP --
    def request(self, method, path, body=None, token=None, raw=None, headers=None, timeout=30):
        """Returns (status, headers (lowercase names), json or None, raw bytes)."""
        hdrs = {}
        if token is not None:
            hdrs['Authorization'] = 'Bearer ' + token
        data = None
        if raw is not None:
            data = raw if isinstance(raw, bytes) else raw.encode('utf-8')
            hdrs['Content-Type'] = 'application/json'
        elif body is not None:
            data = json.dumps(body).encode('utf-8')
            hdrs['Content-Type'] = 'application/json'
        if headers:
            hdrs.update(headers)
        conn = http.client.HTTPConnection('127.0.0.1', self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            rawb = resp.read()
            rh = {k.lower(): v for k, v in resp.getheaders()}
            st = resp.status
        finally:
            conn.close()
        parsed = None
        if rawb:
            try:
                parsed = json.loads(rawb.decode('utf-8'))
            except (ValueError, UnicodeDecodeError):
                parsed = None
        return (st, rh, parsed, rawb)

    def admin(self, method, path, body=None, **kw):
        return self.request(method, path, body=body, token=self.admin_token, **kw)

    # -- helpers --
    def make_project(self, name, domains=None):
        body = {'name': name}
        if domains is not None:
            body['domains'] = domains
        r = self.admin('POST', '/v1/projects', body)
        if r[0] != 201:
            raise RuntimeError('POST /v1/projects %s -> %s %s' % (name, r[0], r[3][:300]))
        return r[2]

    def make_key(self, project, name='e2e'):
        r = self.admin('POST', '/v1/projects/%s/keys' % project, {'name': name})
        if r[0] != 201:
            raise RuntimeError('POST /v1/projects/%s/keys -> %s %s' % (project, r[0], r[3][:300]))
        return r[2]

    def project_with_key(self, name, domains=None):
        """Creates a project and a key; returns the key's secret."""
        self.make_project(name, domains)
        return self.make_key(name)['secret']

    def create_sandbox(self, token, body=None):
        r = self.request('POST', '/v1/sandboxes', body if body is not None else {}, token=token)
        if r[0] != 201:
            raise RuntimeError('POST /v1/sandboxes %r -> %s %s' % (body, r[0], r[3][:400]))
        return r[2]

    def sandbox_ids(self, token):
        r = self.request('GET', '/v1/sandboxes', token=token)
        if r[0] != 200 or not isinstance(r[2], dict):
            raise RuntimeError('GET /v1/sandboxes -> %s %s' % (r[0], r[3][:300]))
        return sorted(s['id'] for s in r[2]['sandboxes'])

    def events(self, token, query=''):
        return EventStream(self, token, query)


# -------------------------------------------------------------- SSE ----

class EventStream:
    """Reads GET /v1/events in a thread; events land in a queue."""

    def __init__(self, boxd, token, query=''):
        self.boxd = boxd
        self.path = '/v1/events' + (('?' + query) if query else '')
        self.token = token
        self.q = queue.Queue()
        self.connected = threading.Event()
        self.status = None
        self.headers = {}
        self.error_body = None
        self.conn = None
        self.closed = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.conn = http.client.HTTPConnection('127.0.0.1', self.boxd.port, timeout=None)
            self.conn.request('GET', self.path, headers={'Authorization': 'Bearer ' + self.token,
                                                         'Accept': 'text/event-stream'})
            resp = self.conn.getresponse()
            self.status = resp.status
            self.headers = {k.lower(): v for k, v in resp.getheaders()}
            self.connected.set()
            if resp.status != 200:
                self.error_body = resp.read()
                return
            ev = {}
            data = []
            while True:
                line = resp.readline()
                if not line:
                    break
                line = line.decode('utf-8', 'replace').rstrip('\r\n')
                if line == '':
                    if data:
                        text = '\n'.join(data)
                        try:
                            parsed = json.loads(text)
                        except ValueError:
                            parsed = None
                        self.q.put({'event': ev.get('event'), 'data': parsed, 'raw': text})
                    ev = {}
                    data = []
                    continue
                if line.startswith(':'):
                    continue
                field, _, value = line.partition(':')
                if value.startswith(' '):
                    value = value[1:]
                if field == 'data':
                    data.append(value)
                else:
                    ev[field] = value
        except Exception as e:  # noqa: BLE001 - reported through the queue
            if not self.closed:
                self.q.put({'event': None, 'data': None, 'raw': 'reader error: %r' % e})
        finally:
            self.connected.set()

    def wait_connected(self, timeout=5):
        return self.connected.wait(timeout)

    def next(self, timeout=5):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return None

    def collect(self, seconds):
        """Every event arriving within @seconds."""
        out = []
        end = time.time() + seconds
        while True:
            left = end - time.time()
            if left <= 0:
                return out
            e = self.next(left)
            if e is not None:
                out.append(e)

    def wait_for(self, pred, timeout=5):
        """The first event matching @pred (others are kept in .skipped)."""
        end = time.time() + timeout
        skipped = []
        while True:
            left = end - time.time()
            if left <= 0:
                self.skipped = skipped
                return None
            e = self.next(left)
            if e is None:
                self.skipped = skipped
                return None
            if pred(e):
                self.skipped = skipped
                return e
            skipped.append(e)

    def close(self):
        self.closed = True
        try:
            if self.conn is not None and self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            if self.conn is not None:
                self.conn.close()
        except OSError:
            pass


def grep_dir(path, needle):
    """Files under @path whose bytes contain @needle (bytes)."""
    hits = []
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            try:
                with open(p, 'rb') as fh:
                    if needle in fh.read():
                        hits.append(p)
            except OSError:
                pass
    return hits


def sqlite_files(path):
    out = []
    for root, _dirs, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            try:
                with open(p, 'rb') as fh:
                    if fh.read(16) == b'SQLite format 3\x00':
                        out.append(p)
            except OSError:
                pass
    return out


class Follow:
    """A streamed GET (e.g. services/{name}/logs?follow=true) read in a
    thread: ('line', bytes) in a queue, then ('end', True) when the answer
    ended complete or ('end', False, why) when it was cut."""

    def __init__(self, d, path, token):
        self.q = queue.Queue()
        self.status = None
        self.headers = {}
        self.ready = threading.Event()
        self.conn = http.client.HTTPConnection('127.0.0.1', d.port, timeout=60)
        self.conn.request('GET', path, headers={'Authorization': 'Bearer ' + token})
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        try:
            resp = self.conn.getresponse()
            self.status = resp.status
            self.headers = {k.lower(): v for k, v in resp.getheaders()}
            self.ready.set()
            while True:
                line = resp.readline()
                if not line:
                    break
                self.q.put(('line', line))
            self.q.put(('end', True))
        except Exception as e:  # noqa: BLE001 - an incomplete answer
            self.ready.set()
            self.q.put(('end', False, repr(e)))

    def next(self, timeout=10):
        try:
            return self.q.get(timeout=timeout)
        except queue.Empty:
            return ('timeout',)

    def close(self):
        self.conn.close()


def main(tap, *tests):
    """Runs each test function (one section each), then prints the plan."""
    for fn in tests:
        with tap.section(fn.__name__):
            fn(tap)
    tap.finish()
