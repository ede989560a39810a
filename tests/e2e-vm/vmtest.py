# vmtest.py: shared code of the vm suite's end-to-end tests (tests/e2e-vm).
#
# These tests drive the real boxd with its defaults -- the libvirt hypervisor
# (real microVMs, TCG here), the nftables network, sqlite and keys -- over
# HTTP exactly as a user would.  They reuse tests/e2e/boxtest.py (TAP, the
# HTTP client, the event stream) and add what real VMs need:
#
#   prepare(tap)     libvirtd up (dev/libvirtd-up.sh) and the guest images
#                    built (images/build-base.sh, cached), once however many
#                    tests start at the same time (a lock file); a TAP skip
#                    of the whole file (exit 77) without root or the tools,
#                    a bail-out when libvirtd does not start or the build fails
#   VmBoxd           boxd with its default hypervisor and network, a config
#                    file, and a cleanup that leaves no VM, tap or disk behind
#   run()/ok_run()   POST /v1/sandboxes/{sandbox}/exec/run, outputs decoded
#   Clock            durations, printed as TAP comments
#
# Env: BOX_BUILD_ROOT, BOX_SOURCE_ROOT, BOX_PLUGIN_DIR (meson's test setup),
#      BOX_IMAGE_CACHE (default /var/cache/box/images),
#      BOX_E2E_VM_DIR   the libvirt plugin's vm_dir (default /var/tmp/box-e2e-vm;
#                       template snapshots are kept there between runs),
#      BOX_E2E_KEEP     keep the data dirs.

import atexit
import base64
import calendar
import fcntl
import glob
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get('BOX_SOURCE_ROOT') or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e'))

import boxtest  # noqa: E402  (tests/e2e/boxtest.py)
from boxtest import Tap  # noqa: E402,F401  (re-exported for the tests)

IMAGE_CACHE = os.environ.get('BOX_IMAGE_CACHE') or '/var/cache/box/images'
VM_DIR = os.environ.get('BOX_E2E_VM_DIR') or '/var/tmp/box-e2e-vm'
LIBVIRT_URI = 'qemu:///system'
NET_HELPER = os.path.join(SOURCE_ROOT, 'plugins', 'nftables', 'nftables-test-helper.py')
MIB16 = 16 * 1024 * 1024
# 'q' and two letters: not the plugin's default bx, unlikely another run's
NET_PREFIX = 'q' + chr(97 + os.getpid() % 26) + chr(97 + os.getpid() // 26 % 26)
T0 = time.time()


def skip_all(reason):
    print('1..0 # SKIP %s' % reason)
    sys.stdout.flush()
    sys.exit(77)


def bail_out(reason):
    print('Bail out! %s' % reason)
    sys.stdout.flush()
    sys.exit(1)


def read_file(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def recipe_key():
    """A hash of everything images/build-base.sh builds from (the image
    scripts and the agent's sources, a superset of its own keys): the next
    test of the same run skips the script (seconds: it rebuilds the agent
    to find out that nothing changed)."""
    h = hashlib.sha256()
    h.update(os.environ.get('BOX_MIRROR', '').encode())
    for top in ('images', 'agent'):
        for root, dirs, files in os.walk(os.path.join(SOURCE_ROOT, top)):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                h.update(os.path.relpath(path, SOURCE_ROOT).encode() + b'\0')
                with open(path, 'rb') as f:
                    h.update(hashlib.sha256(f.read()).digest())
    h.update(os.path.realpath(os.path.join(IMAGE_CACHE, 'base')).encode())
    return h.hexdigest()


def sweep_dead_runs(tap):
    """The nftables tables (boxe2e<pid>) and taps of earlier runs that were
    killed before their cleanup: a stale table whose taps share our prefix
    would drop our guests' traffic."""
    r = subprocess.run(['nft', '-j', 'list', 'tables'], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    try:
        items = json.loads(r.stdout or b'{}').get('nftables', [])
    except ValueError:
        return
    for item in items:
        name = item.get('table', {}).get('name', '')
        if not name.startswith('boxe2e') or not name[6:].isdigit():
            continue
        if os.path.exists('/proc/%s' % name[6:]):
            continue
        r = subprocess.run(['nft', '-j', 'list', 'set', 'inet', name, 'taps'],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        taps = []
        try:
            for obj in json.loads(r.stdout or b'{}').get('nftables', []):
                taps += [e for e in obj.get('set', {}).get('elem', []) if isinstance(e, str)]
        except ValueError:
            pass
        for ifname in taps:
            subprocess.run(['ip', 'link', 'del', ifname], stderr=subprocess.DEVNULL)
        subprocess.run(['nft', 'delete', 'table', 'inet', name], stderr=subprocess.DEVNULL)
        tap.comment('removed what a killed run left: table %s, taps %s' % (name, ' '.join(taps) or '-'))


def prepare(tap):
    """libvirtd up and the base image built; skips the file when impossible."""
    if os.geteuid() != 0:
        skip_all('the vm suite needs root (libvirt qemu:///system, taps, image builds)')
    for prog in ('libvirtd', 'virsh', 'qemu-system-x86_64', 'nft', 'ip', 'mmdebstrap'):
        if shutil.which(prog) is None:
            skip_all('%s is not installed (dev/deps.sh installs it)' % prog)
    if not os.path.exists(boxtest.BOXD):
        bail_out('no boxd at %s (set BOX_BUILD_ROOT)' % boxtest.BOXD)
    t = time.time()
    os.makedirs(IMAGE_CACHE, exist_ok=True)
    # one of us at a time: libvirtd's start and the image build are not
    # safe to run twice at once
    with open(os.path.join(IMAGE_CACHE, '.vm-test.lock'), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = subprocess.run([os.path.join(SOURCE_ROOT, 'dev', 'libvirtd-up.sh')],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            bail_out('libvirtd does not start: %s' % r.stdout.decode('utf-8', 'replace').strip())
        stamp = os.path.join(IMAGE_CACHE, '.e2e-vm-stamp')
        key = recipe_key()
        if read_file(stamp) != key or not os.path.exists(os.path.join(IMAGE_CACHE, 'base', '.done')):
            env = dict(os.environ, BOX_IMAGE_CACHE=IMAGE_CACHE)
            r = subprocess.run([os.path.join(SOURCE_ROOT, 'images', 'build-base.sh')], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                tail = ' '.join(r.stderr.decode('utf-8', 'replace').strip().splitlines()[-3:])
                bail_out('images/build-base.sh failed: %s' % tail)
            with open(stamp, 'w') as f:
                f.write(recipe_key())
        sweep_dead_runs(tap)
        fcntl.flock(lock, fcntl.LOCK_UN)
    os.makedirs(VM_DIR, mode=0o711, exist_ok=True)
    os.chmod(VM_DIR, 0o711)
    tap.comment('host ready (libvirtd up, images built) in %.1f s' % (time.time() - t))
    # a timeout (meson sends SIGTERM) or ^C still removes the VMs and taps:
    # SIGTERM becomes an exit, which runs the atexit handlers
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    atexit.register(lambda: [d.cleanup() for d in tap.daemons])
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_on_signal)


def _exit_on_signal(signum, _frame):
    print('Bail out! killed by signal %d' % signum)
    sys.stdout.flush()
    sys.exit(1)


_PORTS_GIVEN = set()


def free_privileged_port():
    """A port below 1024 free for UDP and TCP: the nftables plugin's
    resolver must listen where no unprivileged user can (tests run as root).
    Never the same one twice in a process: a boxd's dns_port and proxy
    ports are picked one after the other, before any is bound, and must
    differ (a repeat stopped the plugin from starting, now and then)."""
    for port in random.sample(range(600, 1000), 400):
        if port in _PORTS_GIVEN:
            continue
        socks = []
        try:
            for kind in (socket.SOCK_DGRAM, socket.SOCK_STREAM):
                s = socket.socket(socket.AF_INET, kind)
                socks.append(s)
                s.bind(('0.0.0.0', port))
            _PORTS_GIVEN.add(port)
            return port
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError('no free privileged port for the resolver')


def virsh(*args):
    r = subprocess.run(['virsh', '-q', '-c', LIBVIRT_URI] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    return r.returncode, r.stdout.decode('utf-8', 'replace')


def all_domains():
    """Names of every libvirt domain, running or not."""
    _rc, out = virsh('list', '--all', '--name')
    return [x.strip() for x in out.splitlines() if x.strip()]


def running_domains():
    """Names of the active libvirt domains (running or paused)."""
    _rc, out = virsh('list', '--name')
    return [x.strip() for x in out.splitlines() if x.strip()]


def qemu_pid(domain):
    """The pid of a domain's QEMU, from libvirt's pid file."""
    try:
        with open('/run/libvirt/qemu/%s.pid' % domain) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


class Clock:
    """Named durations, printed as TAP comments and summed up at the end."""

    def __init__(self, tap):
        self.tap = tap
        self.rows = []

    def __call__(self, name):
        return _Timed(self, name)

    def add(self, name, seconds):
        self.rows.append((name, seconds))
        self.tap.comment('time: %-42s %8.3f s' % (name, seconds))

    def summary(self):
        self.tap.comment('durations (s):')
        for name, s in self.rows:
            self.tap.comment('  %-44s %8.3f' % (name, s))
        self.tap.comment('  %-44s %8.3f' % ('whole file', time.time() - T0))


class _Timed:
    def __init__(self, clock, name):
        self.clock = clock
        self.name = name

    def __enter__(self):
        self.t = time.time()
        return self

    def __exit__(self, *exc):
        self.seconds = time.time() - self.t
        self.clock.add(self.name, self.seconds)
        return False


class VmBoxd(boxtest.Boxd):
    """boxd with its default hypervisor (auto -> libvirt) and network
    (auto -> nftables), configured by a file of its own."""

    def __init__(self, tap, config=None, data_dir=None, **kw):
        super().__init__(tap, data_dir=data_dir, **kw)
        # The network plugin's defaults, but a table, tap names, pool,
        # resolver and proxy ports and NFLOG group of its own: another boxd on this host (a
        # developer's, or these tests run from another tree at the same
        # time) keeps its network, and ours is not disturbed by it.
        self.config = {
            'plugin.libvirt': {'vm_dir': VM_DIR},
            'plugin.nftables': {'table': 'boxe2e%d' % os.getpid(), 'ifname_prefix': NET_PREFIX,
                                'pool': '10.%d.0.0/16' % (224 + os.getpid() % 30),
                                'dns_port': str(free_privileged_port()),
                                'proxy_http_port': str(free_privileged_port()),
                                'proxy_tls_port': str(free_privileged_port()),
                                # only one process can read an NFLOG group
                                'log_group': str(random.randint(20000, 60000))},
        }
        for section, values in (config or {}).items():
            self.config.setdefault(section, {}).update(values)
        self.config_path = os.path.join(self.own_dir or tempfile.mkdtemp(prefix='box-e2e-vm-'),
                                        'boxd.conf')
        self.domains_before = set(all_domains())

    def write_config(self):
        with open(self.config_path, 'w') as f:
            for section, values in self.config.items():
                f.write('[%s]\n' % section)
                for k, v in values.items():
                    f.write('%s=%s\n' % (k, v))
                f.write('\n')

    def seed_accel_probe(self):
        """The plugin caches its KVM probe (10 s when KVM cannot boot the
        guest) in its state dir, keyed by image and QEMU version; the suite
        probes once per vm_dir and hands the answer to each new data dir."""
        state = os.path.join(self.data_dir, 'libvirt')
        os.makedirs(state, mode=0o700, exist_ok=True)
        for p in glob.glob(os.path.join(VM_DIR, 'accel-probe', 'accel-*')):
            dst = os.path.join(state, os.path.basename(p))
            if not os.path.exists(dst):
                shutil.copyfile(p, dst)

    def keep_accel_probe(self):
        os.makedirs(os.path.join(VM_DIR, 'accel-probe'), exist_ok=True)
        for p in glob.glob(os.path.join(self.data_dir, 'libvirt', 'accel-*')):
            dst = os.path.join(VM_DIR, 'accel-probe', os.path.basename(p))
            if not os.path.exists(dst):
                shutil.copyfile(p, dst)

    def start(self, wait=True):
        self.write_config()
        self.seed_accel_probe()
        self.port = boxtest.free_port()
        args = [boxtest.BOXD, '--config', self.config_path, '--data-dir', self.data_dir,
                '--listen', '127.0.0.1:%d' % self.port, '--no-dbus',
                '--plugin-dir', boxtest.PLUGIN_DIR,
                '--sandbox-domain', boxtest.SANDBOX_DOMAIN] + self.extra_args
        env = dict(os.environ)
        env.pop('BOX_ADMIN_TOKEN', None)
        env['BOX_ADMIN_TOKEN'] = self.admin_token
        env['BOX_IMAGE_CACHE'] = IMAGE_CACHE
        # In AddressSanitizer builds: LeakSanitizer's exit-time scan reads a
        # bogus dynamic-TLS range of a thread of boxd's that has run libvirt
        # (dlopen()ed with the plugin) and its tracer dies of SIGSEGV, most
        # often after a restart that adopted VMs (a sanitizer runtime bug;
        # 3 of 4 runs of test_restart.py here).  Not tracking
        # __tls_get_addr() avoids it (3 of 3 clean).  Other binaries ignore
        # ASAN_OPTIONS.
        env['ASAN_OPTIONS'] = ':'.join(filter(None, [env.get('ASAN_OPTIONS', ''),
                                                      'intercept_tls_get_addr=0']))
        env.update(self.extra_env)
        logdir = self.own_dir or os.path.dirname(self.config_path)
        self.log_path = os.path.join(logdir, 'boxd-%d.log' % (len(self.logs) + 1))
        self.logs.append(self.log_path)
        self.logf = open(self.log_path, 'wb')
        self.tap.comment('starting: ' + ' '.join(args))
        self.proc = subprocess.Popen(args, stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     stdin=subprocess.DEVNULL)
        if wait:
            self.wait_ready(timeout=60)
            self.keep_accel_probe()
        return self

    def create_sandbox(self, token, body=None, timeout=300):
        r = self.request('POST', '/v1/sandboxes', body if body is not None else {}, token=token,
                         timeout=timeout)
        if r[0] != 201:
            raise RuntimeError('POST /v1/sandboxes %r -> %s %s' % (body, r[0], r[3][:400]))
        return r[2]

    def log_lines(self, *needles):
        return [line for line in self.log_text().splitlines()
                if all(n in line for n in needles)]

    # -- what the plugins keep of this boxd's sandboxes --
    def vm_records(self):
        """sandbox id -> the libvirt plugin's record ({vm_id, state, ...})."""
        out = {}
        for p in glob.glob(os.path.join(self.data_dir, 'libvirt', 'sb-*.json')):
            try:
                with open(p) as f:
                    out[os.path.basename(p)[:-5]] = json.load(f)
            except (OSError, ValueError):
                pass
        return out

    def domain_of(self, sandbox_id):
        rec = self.vm_records().get(sandbox_id) or {}
        vm_id = rec.get('vm')
        return ('box-' + vm_id) if vm_id else None

    def vm_path(self, sandbox_id, file=''):
        rec = self.vm_records().get(sandbox_id) or {}
        vm_id = rec.get('vm')
        return os.path.join(VM_DIR, 'vms', vm_id, file) if vm_id else None

    def pool_domains(self):
        """Domains of the warm pool (and template builds) of this boxd."""
        return ['box-' + os.path.basename(p)
                for p in glob.glob(os.path.join(self.data_dir, 'libvirt', 'pool', '*'))]

    def qemu_rss_mib(self, sandbox_id):
        """Private resident memory of the sandbox's QEMU, MiB (None: unknown)."""
        pid = qemu_pid(self.domain_of(sandbox_id) or '')
        if pid is None:
            return None
        total = 0
        try:
            with open('/proc/%d/smaps_rollup' % pid) as f:
                for line in f:
                    if line.startswith(('Private_Clean:', 'Private_Dirty:')):
                        total += int(line.split()[1])
        except OSError:
            return None
        return total // 1024

    def net_records(self):
        out = {}
        for p in glob.glob(os.path.join(self.data_dir, 'nftables', '*.json')):
            try:
                with open(p) as f:
                    out[os.path.basename(p)[:-5]] = json.load(f)
            except (OSError, ValueError):
                pass
        return out

    def leftovers(self):
        """Domains, VM dirs and taps this boxd's records still name."""
        out = []
        doms = all_domains()
        vm_ids = [rec.get('vm') for rec in self.vm_records().values() if rec.get('vm')]
        vm_ids += [os.path.basename(p) for p in glob.glob(os.path.join(self.data_dir, 'libvirt', 'pool', '*'))]
        for vm_id in vm_ids:
            if 'box-' + vm_id in doms:
                out.append('domain box-' + vm_id)
            if os.path.exists(os.path.join(VM_DIR, 'vms', vm_id)):
                out.append('dir vms/' + vm_id)
        for _id, rec in self.net_records().items():
            if rec.get('ifname') and os.path.exists('/sys/class/net/' + rec['ifname']):
                out.append('tap %s (%s)' % (rec['ifname'], _id))
        return out

    def cleanup(self):
        """Whatever happened: this boxd's VMs, taps and files go."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        left = []
        for sid, rec in self.vm_records().items():
            vm_id = rec.get('vm')
            if not vm_id:
                continue
            dom = 'box-' + vm_id
            if dom in all_domains():
                virsh('destroy', dom)
                left.append('sandbox VM %s (%s)' % (dom, sid))
            shutil.rmtree(os.path.join(VM_DIR, 'vms', vm_id), ignore_errors=True)
        # checkpoints of sandboxes still alive when the test ended (boxd
        # deletes them only with their sandbox): VM_DIR is shared by every
        # run, so what is left here piles up (42 GB once) and fills the disk
        for sid in self.vm_records():
            for p in glob.glob(os.path.join(VM_DIR, 'checkpoints', glob.escape(sid) + '.*')):
                shutil.rmtree(p, ignore_errors=True)
        for rec_dir in (os.path.join(self.data_dir, 'libvirt', 'pool'),):
            for p in glob.glob(os.path.join(rec_dir, '*')):
                vm_id = os.path.basename(p)
                if ('box-' + vm_id) in all_domains():
                    virsh('destroy', 'box-' + vm_id)
                    left.append('pool VM box-' + vm_id)
                shutil.rmtree(os.path.join(VM_DIR, 'vms', vm_id), ignore_errors=True)
        for _id, rec in self.net_records().items():
            ifname = rec.get('ifname')
            if ifname and os.path.exists('/sys/class/net/' + ifname):
                subprocess.run(['ip', 'link', 'del', ifname], stderr=subprocess.DEVNULL)
                left.append('tap %s (%s)' % (ifname, _id))
        # the plugin keeps its table when boxd stops (VMs keep their network
        # across restarts); ours goes with the test
        table = self.config['plugin.nftables']['table']
        subprocess.run(['nft', 'delete', 'table', 'inet', table], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        if left:
            self.tap.comment('cleanup removed what boxd left: %s' % ', '.join(left))
        self.left_behind = left
        super().cleanup()


def setup_or_bail(d, fn):
    """Runs the file's set-up (boxd start, first sandboxes): on failure,
    the boxd log and a TAP bail-out."""
    try:
        return fn()
    except Exception as e:   # noqa: BLE001 - reported
        d.dump_log()
        bail_out('set-up failed: %r' % e)


def b64(data):
    if isinstance(data, str):
        data = data.encode('utf-8')
    return base64.b64encode(data).decode('ascii')


# ---- the host side of the network tests (test_network.py, test_isolation.py)

def sh_host(cmd, check=True):
    """A shell command on the host; its output (raises when it fails and @check)."""
    r = subprocess.run(cmd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if check and r.returncode != 0:
        raise RuntimeError('%s: %s' % (cmd, r.stdout.decode('utf-8', 'replace')))
    return r.stdout.decode('utf-8', 'replace')


def wait_file(path, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.05)
    return False


def host_connect(targets, ns=None):
    """{(host, port): exit code} of the probe helper's connect from the host
    (or namespace @ns), in parallel: 0 reached, 2 dropped, 3 refused."""
    pre = ['ip', 'netns', 'exec', ns] if ns else []
    procs = {tg: subprocess.Popen(pre + ['python3', NET_HELPER, 'connect', tg[0], str(tg[1]), '2'],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for tg in targets}
    return {tg: p.wait() for tg, p in procs.items()}


class Run:
    """The answer of one exec/run."""

    def __init__(self, resp, seconds):
        self.resp = resp
        self.status, self.headers, self.body, self.raw = resp
        self.seconds = seconds
        body = self.body if isinstance(self.body, dict) else {}
        self.exit_code = body.get('exit_code')
        self.timed_out = body.get('timed_out')
        self.truncated = body.get('truncated')
        try:
            self.stdout = base64.b64decode(body.get('stdout') or '')
            self.stderr = base64.b64decode(body.get('stderr') or '')
        except (ValueError, TypeError):
            self.stdout = self.stderr = None

    @property
    def out(self):
        return (self.stdout or b'').decode('utf-8', 'replace')

    @property
    def err(self):
        return (self.stderr or b'').decode('utf-8', 'replace')

    def describe(self):
        return 'status %s exit %r timed_out %r stdout %r stderr %r (%.2f s)%s' % (
            self.status, self.exit_code, self.timed_out, (self.stdout or b'')[:300],
            (self.stderr or b'')[:300], self.seconds,
            '' if self.status == 200 else ' body %r' % self.raw[:300])


def run(d, key, sandbox, cmd, timeout=120, **fields):
    """POST /v1/sandboxes/{sandbox}/exec/run; stdin given as bytes or str."""
    body = {'cmd': cmd}
    if 'stdin' in fields and fields['stdin'] is not None:
        fields['stdin'] = b64(fields['stdin'])
    body.update(fields)
    t = time.time()
    r = d.request('POST', '/v1/sandboxes/%s/exec/run' % sandbox, body, token=key, timeout=timeout)
    return Run(r, time.time() - t)


def sh(d, key, sandbox, script, **fields):
    return run(d, key, sandbox, ['sh', '-c', script], **fields)


def insandbox_api(d, key, sandbox, curl_args, user='box'):
    """curl on the in-sandbox socket /run/box/api.sock inside the guest, as
    @user: (status, json or text), or (None, what failed)."""
    r = sh(d, key, sandbox, 'curl -s -w "\\n%%{http_code}" --unix-socket /run/box/api.sock %s' % curl_args,
           user=user)
    if r.status != 200 or r.exit_code != 0:
        return (None, r.describe())
    body, _, code = r.out.rpartition('\n')
    try:
        return (int(code), json.loads(body) if body else None)
    except ValueError:
        return (int(code) if code.isdigit() else None, body)


def ok_run(t, d, key, sandbox, cmd, desc, **fields):
    """An exec/run that must answer 200 with exit code 0."""
    r = run(d, key, sandbox, cmd, **fields)
    t.ok(r.status == 200 and r.exit_code == 0, desc, r.describe())
    return r


def state(d, key, sandbox):
    r = d.request('GET', '/v1/sandboxes/%s' % sandbox, token=key)
    return (r[2] or {}).get('state') if r[0] == 200 else 'HTTP %d' % r[0]


def reason_of(e):
    return (((e or {}).get('data') or {}).get('detail') or {}).get('reason')


def detail_of(e):
    return ((e or {}).get('data') or {}).get('detail') or {}


def spec_time(text):
    """Seconds since the epoch of an API timestamp; None if it is not one."""
    try:
        return calendar.timegm(time.strptime(text, '%Y-%m-%dT%H:%M:%SZ'))
    except (TypeError, ValueError):
        return None


def wait_event(ev, sandbox_id, etype, timeout):
    """The next event of @etype for @sandbox_id (others are skipped)."""
    return ev.wait_for(lambda e: e.get('event') == etype
                       and (e.get('data') or {}).get('sandbox') == sandbox_id, timeout)


def events_of(events, sandbox_id):
    return [(e.get('event'), detail_of(e)) for e in events
            if (e.get('data') or {}).get('sandbox') == sandbox_id]


def delete_all_and_stop(t, d, key):
    """Deletes every sandbox of @key's project, stops boxd and checks that
    nothing is left behind."""
    r = d.request('GET', '/v1/sandboxes', token=key)
    for s in (r[2] or {}).get('sandboxes', []):
        t.status(d.request('DELETE', '/v1/sandboxes/%s' % s['name'], token=key), 204, 'delete %s' % s['name'])
    d.stop()
    left = d.leftovers()
    t.eq(left, [], 'no VM, VM dir or tap left')
    for what in left:
        if what.startswith('dir '):
            path = os.path.join(VM_DIR, what[4:])
            t.comment('%s holds %s' % (what, sorted(os.listdir(path)) if os.path.isdir(path) else '?'))
            vm_id = os.path.basename(path)
            t.comment('boxd log lines naming it:\n' + '\n'.join(d.log_lines(vm_id)[-20:]))


def main(tap, clock, *tests):
    """boxtest.main with the durations at the end."""
    for fn in tests:
        t = time.time()
        with tap.section(fn.__name__):
            fn(tap)
        clock.add('section ' + fn.__name__, time.time() - t)
    clock.summary()
    tap.finish()
