# benchlib.py: what every program in bench/ shares.
#
#   Samples / summarize()   timings and their p50/p95/min/max
#   Table                   a plain-text table: one row per operation, the
#                           figures, the target and whether it is met, and
#                           optionally the floor measured in the same run
#                           with the ratio measured/floor
#   machine()               CPU model, cores, RAM, kernel, QEMU and libvirt
#   load()/wait_for_load()  the host's load average, and waiting for a quiet
#                           host before the measurement starts
#   Report                  collects tables, loads and notes; prints them and
#                           writes them as JSON (--json FILE) so that figures
#                           can be compared between runs
#   start_boxd()            a real boxd with its default plugins (libvirt,
#                           nftables, sqlite, keys) in a data dir of its own,
#                           through tests/e2e-vm/vmtest.py (itself built on
#                           tests/e2e/boxtest.py)
#
# Only the Python standard library is used.  The programs are run by hand
# (never in CI): see doc/PERFORMANCE.md.

import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(BENCH_DIR)
DEFAULT_WORK = os.environ.get('BOX_BENCH_DIR') or '/var/tmp/box-bench'


def log(msg):
    """Progress goes to stderr; the tables go to stdout."""
    sys.stderr.write('[%s] %s\n' % (time.strftime('%H:%M:%S'), msg))
    sys.stderr.flush()


# ------------------------------------------------------------ figures ----

class Samples:
    """Durations of one operation, in seconds."""

    def __init__(self, name):
        self.name = name
        self.values = []
        self.errors = []

    def add(self, seconds):
        self.values.append(seconds)

    def fail(self, what):
        self.errors.append(str(what))

    def timed(self):
        return _Timer(self)

    def __len__(self):
        return len(self.values)


class _Timer:
    def __init__(self, samples):
        self.samples = samples

    def __enter__(self):
        self.t = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.samples.add(time.perf_counter() - self.t)
        return False


def percentile(sorted_values, p):
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return None
    k = max(1, int(math.ceil(p / 100.0 * len(sorted_values))))
    return sorted_values[k - 1]


def summarize(values):
    """{n, p50, p95, min, max} of a list of seconds, in milliseconds."""
    v = sorted(values)
    if not v:
        return {'n': 0, 'p50': None, 'p95': None, 'min': None, 'max': None}
    n = len(v)
    p50 = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0
    return {'n': n, 'p50': p50 * 1000.0, 'p95': percentile(v, 95) * 1000.0,
            'min': v[0] * 1000.0, 'max': v[-1] * 1000.0}


def fmt_ms(ms):
    if ms is None:
        return '-'
    if ms >= 10000:
        return '%.0f' % ms
    if ms >= 100:
        return '%.0f' % ms
    if ms >= 10:
        return '%.1f' % ms
    return '%.2f' % ms


class Row:
    def __init__(self, key, label, samples, target_ms=None, floor=None, floor_label=None, note=''):
        self.key = key
        self.label = label
        values = samples.values if isinstance(samples, Samples) else samples
        self.stats = summarize(values)
        self.samples_ms = [round(v * 1000.0, 3) for v in values]
        self.errors = list(samples.errors) if isinstance(samples, Samples) else []
        self.target_ms = target_ms
        self.floor = floor              # stats dict of the floor operation
        self.floor_label = floor_label
        self.note = note

    def met(self):
        if self.target_ms is None or self.stats['p50'] is None:
            return None
        return self.stats['p50'] <= self.target_ms

    def ratio(self):
        if not self.floor or self.floor.get('p50') in (None, 0) or self.stats['p50'] is None:
            return None
        return self.stats['p50'] / self.floor['p50']

    def as_dict(self):
        return {'key': self.key, 'label': self.label, 'stats': self.stats, 'errors': self.errors,
                'target_ms': self.target_ms, 'met': self.met(), 'floor': self.floor,
                'floor_label': self.floor_label, 'ratio': self.ratio(), 'note': self.note,
                'samples_ms': self.samples_ms}


class Table:
    """One table of operations.  with_floor adds the floor's p50 and the
    ratio p50 / floor p50."""

    def __init__(self, title, with_floor=False):
        self.title = title
        self.with_floor = with_floor
        self.rows = []

    def add(self, row):
        self.rows.append(row)
        return row

    def render(self):
        head = ['operation', 'n', 'p50 ms', 'p95 ms', 'min ms', 'max ms', 'target', 'met']
        if self.with_floor:
            head += ['floor p50', 'ratio', 'floor operation']
        lines = []
        for r in self.rows:
            s = r.stats
            met = r.met()
            cells = [r.label, str(s['n']), fmt_ms(s['p50']), fmt_ms(s['p95']), fmt_ms(s['min']),
                     fmt_ms(s['max']),
                     ('<= %g' % r.target_ms) if r.target_ms is not None else '-',
                     '-' if met is None else ('yes' if met else 'NO')]
            if self.with_floor:
                ratio = r.ratio()
                cells += [fmt_ms(r.floor['p50']) if r.floor else '-',
                          ('%.2f' % ratio) if ratio is not None else '-',
                          r.floor_label or '-']
            lines.append(cells)
        widths = [max(len(head[i]), *(len(c[i]) for c in lines)) if lines else len(head[i])
                  for i in range(len(head))]
        out = ['== %s ==' % self.title]

        def fmt(cells):
            parts = []
            for i, c in enumerate(cells):
                left = i == 0 or (self.with_floor and i == len(cells) - 1)
                parts.append(c.ljust(widths[i]) if left else c.rjust(widths[i]))
            return '  '.join(parts).rstrip()
        out.append(fmt(head))
        out.append('  '.join('-' * w for w in widths))
        for c in lines:
            out.append(fmt(c))
        for r in self.rows:
            if r.errors:
                out.append('  %s: %d failure(s), first: %s' % (r.label, len(r.errors), r.errors[0][:300]))
            if r.note:
                out.append('  %s: %s' % (r.label, r.note))
        return '\n'.join(out)

    def as_dict(self):
        return {'title': self.title, 'rows': [r.as_dict() for r in self.rows]}


class RateRow:
    """A throughput (MiB/s, higher is better): samples are rates.  Targets:
    an absolute minimum and/or a minimum fraction of the floor's p50 (the
    interactive sub-API's benchmarks: >= 100 MiB/s and >= 70 % of the raw
    host-guest channel)."""

    def __init__(self, key, label, rates, target_min=None, floor=None, floor_fraction=None,
                 floor_label=None, note=''):
        self.key = key
        self.label = label
        v = sorted(rates.values if isinstance(rates, Samples) else rates)
        self.errors = list(rates.errors) if isinstance(rates, Samples) else []
        n = len(v)
        self.stats = {'n': n,
                      'p50': (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0) if v else None,
                      'min': v[0] if v else None, 'max': v[-1] if v else None}
        self.target_min = target_min
        self.floor = floor              # the floor's p50, MiB/s
        self.floor_fraction = floor_fraction
        self.floor_label = floor_label
        self.note = note

    def fraction(self):
        if not self.floor or self.stats['p50'] is None:
            return None
        return self.stats['p50'] / self.floor

    def met(self):
        p50 = self.stats['p50']
        if p50 is None or (self.target_min is None and self.floor_fraction is None):
            return None
        ok = True
        if self.target_min is not None:
            ok = ok and p50 >= self.target_min
        if self.floor_fraction is not None and self.fraction() is not None:
            ok = ok and self.fraction() >= self.floor_fraction
        return ok

    def as_dict(self):
        return {'key': self.key, 'label': self.label, 'stats': self.stats, 'errors': self.errors,
                'unit': 'MiB/s', 'target_min': self.target_min, 'floor': self.floor,
                'floor_fraction': self.floor_fraction, 'fraction': self.fraction(),
                'met': self.met(), 'floor_label': self.floor_label, 'note': self.note}


class RateTable:
    """Throughputs, one RateRow per line."""

    def __init__(self, title):
        self.title = title
        self.rows = []

    def add(self, row):
        self.rows.append(row)
        return row

    def render(self):
        t = FreeTable(self.title, ['operation', 'n', 'p50 MiB/s', 'min', 'max', 'target', 'met',
                                   'floor MiB/s', '% of floor'])
        for r in self.rows:
            s = r.stats
            target = []
            if r.target_min is not None:
                target.append('>= %g' % r.target_min)
            if r.floor_fraction is not None:
                target.append('>= %g%% floor' % (r.floor_fraction * 100))
            met = r.met()
            frac = r.fraction()
            t.add(r.label, s['n'], '-' if s['p50'] is None else '%.1f' % s['p50'],
                  '-' if s['min'] is None else '%.1f' % s['min'],
                  '-' if s['max'] is None else '%.1f' % s['max'],
                  ', '.join(target) or '-', '-' if met is None else ('yes' if met else 'NO'),
                  '-' if r.floor is None else '%.1f' % r.floor,
                  '-' if frac is None else '%.0f' % (frac * 100))
        out = [t.render()]
        for r in self.rows:
            if r.errors:
                out.append('  %s: %d failure(s), first: %s' % (r.label, len(r.errors), r.errors[0][:300]))
            if r.note:
                out.append('  %s: %s' % (r.label, r.note))
        return '\n'.join(out)

    def as_dict(self):
        return {'title': self.title, 'rows': [r.as_dict() for r in self.rows]}


class FreeTable:
    """A table of arbitrary columns (density steps and the like)."""

    def __init__(self, title, columns):
        self.title = title
        self.columns = columns
        self.rows = []

    def add(self, *cells):
        self.rows.append([str(c) for c in cells])

    def render(self):
        widths = [max(len(self.columns[i]), *(len(r[i]) for r in self.rows)) if self.rows
                  else len(self.columns[i]) for i in range(len(self.columns))]
        def fmt(cells):
            return '  '.join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                             for i, c in enumerate(cells)).rstrip()
        out = ['== %s ==' % self.title, fmt(self.columns), '  '.join('-' * w for w in widths)]
        for r in self.rows:
            out.append(fmt(r))
        return '\n'.join(out)

    def as_dict(self):
        return {'title': self.title, 'columns': self.columns, 'rows': self.rows}


# ------------------------------------------------------------ machine ----

def _first_line(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=20)
        return r.stdout.decode('utf-8', 'replace').strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return 'unknown'


def meminfo():
    """/proc/meminfo in KiB."""
    out = {}
    with open('/proc/meminfo') as f:
        for line in f:
            k, _, v = line.partition(':')
            out[k] = int(v.split()[0])
    return out


def machine():
    model = 'unknown'
    cpus = 0
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('model name') and model == 'unknown':
                model = line.split(':', 1)[1].strip()
            if line.startswith('processor'):
                cpus += 1
    flags = ''
    with open('/proc/cpuinfo') as f:
        for line in f:
            if line.startswith('flags'):
                flags = line
                break
    return {
        'cpu_model': model,
        'cpus': cpus,
        'virt_flags': ' '.join(x for x in ('vmx', 'svm', 'hypervisor') if (' %s ' % x) in flags + ' '),
        'mem_total_mib': meminfo()['MemTotal'] // 1024,
        'kernel': platform.release(),
        'qemu': _first_line(['qemu-system-x86_64', '--version']),
        'libvirt': _first_line(['libvirtd', '--version']) if shutil.which('libvirtd') else 'not installed',
        'python': platform.python_version(),
        'dev_kvm': os.path.exists('/dev/kvm'),
        'source': _first_line(['git', '-C', SOURCE_ROOT, 'describe', '--always', '--dirty']),
    }


def machine_text(m):
    return ('machine: %s, %d CPUs (%s), %d MiB RAM, kernel %s\n'
            '         %s; %s; /dev/kvm %s; source %s'
            % (m['cpu_model'], m['cpus'], m['virt_flags'] or 'no virt flags', m['mem_total_mib'],
               m['kernel'], m['qemu'], m['libvirt'], 'present' if m['dev_kvm'] else 'absent',
               m['source']))


def load():
    """{load1, load5, load15, uptime (the command's line), at}."""
    l1, l5, l15 = os.getloadavg()
    return {'load1': l1, 'load5': l5, 'load15': l15, 'uptime': _first_line(['uptime']),
            'at': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
            'mem_available_mib': meminfo()['MemAvailable'] // 1024}


def wait_for_load(threshold, max_s):
    """Polls the 1-minute load average until it is under threshold, at
    most max_s seconds; returns the load seen last (and whether it was
    reached).  threshold None: no wait."""
    if threshold is None:
        return load(), True
    deadline = time.time() + max_s
    while True:
        cur = load()
        if cur['load1'] < threshold:
            log('load average %.2f < %.2f: starting' % (cur['load1'], threshold))
            return cur, True
        if time.time() >= deadline:
            log('load average still %.2f after %d s: starting anyway' % (cur['load1'], max_s))
            return cur, False
        log('waiting for the load average to drop under %.2f (now: %s)' % (threshold, cur['uptime']))
        time.sleep(15)


# ------------------------------------------------------------- report ----

class Report:
    def __init__(self, program, args):
        self.program = program
        self.args = {k: v for k, v in vars(args).items()} if args is not None else {}
        self.machine = machine()
        self.loads = []        # (phase, load dict)
        self.sections = []     # tables
        self.notes = []
        self.started = load()

    def mark(self, phase):
        cur = load()
        self.loads.append((phase, cur))
        log('%s: %s' % (phase, cur['uptime']))
        return cur

    def table(self, t):
        self.sections.append(t)
        return t

    def note(self, text):
        self.notes.append(text)

    def render(self):
        out = ['%s  (%s)' % (self.program, time.strftime('%Y-%m-%d %H:%M:%S %Z')),
               machine_text(self.machine), 'load (uptime):']
        for phase, cur in self.loads:
            out.append('  %-34s %s' % (phase, cur['uptime']))
        for t in self.sections:
            out.append('')
            out.append(t.render())
        if self.notes:
            out.append('')
            for n in self.notes:
                out.append('note: ' + n)
        return '\n'.join(out)

    def print(self):
        print(self.render())
        sys.stdout.flush()

    def as_dict(self):
        return {'program': self.program, 'args': self.args, 'machine': self.machine,
                'loads': [{'phase': p, **cur} for p, cur in self.loads],
                'tables': [t.as_dict() for t in self.sections], 'notes': self.notes}

    def write_json(self, path):
        if not path:
            return
        with open(path, 'w') as f:
            json.dump(self.as_dict(), f, indent=1, default=str)
            f.write('\n')
        log('figures written to %s' % path)


def add_common_args(ap):
    ap.add_argument('-n', type=int, default=20, help='runs per operation (default 20)')
    ap.add_argument('--wait-load', type=float, default=None, metavar='L',
                    help='before measuring, wait until the 1-minute load average is under L')
    ap.add_argument('--wait-max', type=float, default=1200, metavar='S',
                    help='wait at most S seconds for --wait-load (default 1200)')
    ap.add_argument('--json', default=None, metavar='FILE', help='also write the figures as JSON')
    ap.add_argument('--work-dir', default=DEFAULT_WORK,
                    help='VM files, template snapshots and scratch (default %s)' % DEFAULT_WORK)
    ap.add_argument('-v', '--verbose', action='store_true', help='more progress on stderr')


# --------------------------------------------------------------- boxd ----

class QuietTap:
    """What boxtest.Boxd wants of a TAP object, writing to stderr only."""

    def __init__(self, verbose=False):
        self.daemons = []
        self.verbose = verbose
        self.n = 0
        self.failed = 0

    def comment(self, text):
        if self.verbose:
            log(text)

    def ok(self, cond, desc, detail=None):
        if not cond:
            log('not ok: %s %s' % (desc, detail or ''))
        return bool(cond)


_vmtest = None


def vmtest_module(build_root, work_dir):
    """Imports tests/e2e-vm/vmtest.py with its paths pointing at our build
    and our work dir (its VM_DIR: template snapshots and VM files)."""
    global _vmtest
    if _vmtest is not None:
        return _vmtest
    os.environ['BOX_BUILD_ROOT'] = build_root
    os.environ.setdefault('BOX_SOURCE_ROOT', SOURCE_ROOT)
    os.environ.setdefault('BOX_PLUGIN_DIR', os.path.join(build_root, 'plugins'))
    os.environ['BOX_E2E_VM_DIR'] = os.path.join(work_dir, 'vm')
    sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'e2e-vm'))
    import vmtest  # noqa: E402  (tests/e2e-vm/vmtest.py, which imports tests/e2e/boxtest.py)
    vmtest.VM_DIR = os.environ['BOX_E2E_VM_DIR']
    _vmtest = vmtest
    return vmtest


def default_build_root():
    env = os.environ.get('BOX_BUILD_ROOT')
    if env:
        return env
    return os.path.join(SOURCE_ROOT, 'build')


def build_source(build_root):
    """Where the boxd under test comes from: the build's source dir and its
    commit (git describe, or a SOURCE_COMMIT file of an exported tree)."""
    try:
        with open(os.path.join(build_root, 'meson-info', 'meson-info.json')) as f:
            src = json.load(f)['directories']['source']
    except (OSError, ValueError, KeyError):
        return 'build %s' % build_root
    commit = 'unknown commit'
    if os.path.exists(os.path.join(src, 'SOURCE_COMMIT')):
        with open(os.path.join(src, 'SOURCE_COMMIT')) as f:
            commit = 'exported tree of ' + f.read().strip()
    elif os.path.exists(os.path.join(src, '.git')):
        commit = _first_line(['git', '-C', src, 'describe', '--always', '--dirty'])
    return 'build %s of %s (%s)' % (build_root, src, commit)


def check_root():
    if os.geteuid() != 0:
        sys.exit('bench: run as root (libvirt qemu:///system, taps, nftables)')


def domains_in_vm_dir(vm_dir):
    """libvirt domains whose box metadata (box-libvirt-owner.c) names vm_dir:
    whatever a boxd using that vm dir made, whichever boxd it was."""
    out = []
    r = subprocess.run(['virsh', '-q', '-c', 'qemu:///system', 'list', '--all', '--name'],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    for name in r.stdout.decode().split():
        m = subprocess.run(['virsh', '-q', '-c', 'qemu:///system', 'metadata', name,
                            '--uri', 'urn:box:libvirt:1'],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        found = re.search(r"vm-dir=[\"']([^\"']*)[\"']", m.stdout.decode('utf-8', 'replace'))
        if found and os.path.realpath(found.group(1)) == os.path.realpath(vm_dir):
            out.append(name)
    return out


class BenchBoxd:
    """A real boxd with its default plugins, one project and one key."""

    def __init__(self, build_root, work_dir, config=None, verbose=False, project='bench'):
        self.vmtest = vmtest_module(build_root, work_dir)
        self.tap = QuietTap(verbose)
        self.vmtest.prepare(self.tap)
        cfg = {
            # our own table, tap names, address pool and resolver port: an
            # e2e run or a developer's boxd on this host keeps its network
            'plugin.nftables': {'table': 'boxbench', 'ifname_prefix': 'bb', 'pool': '10.225.0.0/16',
                                'dns_port': str(self.vmtest.free_privileged_port())},
        }
        for section, values in (config or {}).items():
            cfg.setdefault(section, {}).update(values)
        self.d = self.vmtest.VmBoxd(self.tap, config=cfg)
        self.project = project
        self.key = None

    def start(self):
        t = time.perf_counter()
        self.d.start()
        self.key = self.d.project_with_key(self.project)
        log('boxd up in %.1f s (log %s)' % (time.perf_counter() - t, self.d.log_path))
        return self

    def accel(self):
        """The libvirt plugin's start line: accel and why, QEMU, capacity."""
        deadline = time.time() + 60
        while time.time() < deadline:
            for line in self.d.log_text().splitlines():
                m = re.search(r'libvirt: ((tcg|kvm) \(.*)$', line)
                if m:
                    # the probe's reason may quote the guest console: escapes out
                    text = re.sub(r'\x1b\[[0-9;?]*[A-Za-z]|\x1bc', ' ', m.group(1))
                    text = ''.join(c if c.isprintable() else ' ' for c in text)
                    return re.sub(r'\s+', ' ', text)
            time.sleep(0.2)
        return 'unknown'

    @property
    def pid(self):
        return self.d.proc.pid if self.d.proc is not None else None

    def request(self, method, path, body=None, timeout=300):
        return self.d.request(method, path, body, token=self.key, timeout=timeout)

    def wait_pool(self, want=None, timeout=120):
        """Waits until the warm pool has its domains running (paused and
        warmed up is not visible from outside; running domains are)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            doms = self.d.pool_domains()
            running = set(self.vmtest.running_domains())
            up = [x for x in doms if x in running]
            if up and (want is None or len(up) >= want):
                return len(up)
            time.sleep(0.2)
        return 0

    def stop(self):
        try:
            self.d.stop()
        finally:
            self.d.cleanup()
        left = getattr(self.d, 'left_behind', [])
        if left:
            log('cleanup had to remove: %s' % ', '.join(left))
        return left

    def domains_left(self):
        """Domains made with our vm dir still in libvirt (must be none
        once stop() returned)."""
        return domains_in_vm_dir(self.vmtest.VM_DIR)


# ---------------------------------------------------------- processes ----

def proc_cpu_s(pid):
    """CPU seconds (user + system, all threads) @pid used so far; 0 when gone."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, IndexError, ValueError):
        return 0.0


def rss_kib(pid, field='VmRSS'):
    """@field of /proc/@pid/status in KiB (VmRSS by default; 0 when gone)."""
    try:
        with open('/proc/%d/status' % pid) as f:
            return next((int(line.split()[1]) for line in f if line.startswith(field + ':')), 0)
    except OSError:
        return 0
