# hostiletest.py: shared code of the hostile-guest VM test
# (test_hostile.py) and bench/hostile-bench: an attacker sandbox runs
# tests/e2e-vm/hostile_guest.py against the in-sandbox socket while boxd's
# RSS is sampled and a neighbour sandbox's exec/run is timed.
#
#   push_program(d, key, sandbox)       hostile_guest.py into the guest
#   rss_kib(pid)                        VmRSS of a process
#   measure_idle(d, key, neighbour, s)  boxd's RSS and the neighbour's
#                                       exec/run with no attack, for s seconds
#   measure_attack(d, key, attacker, neighbour, mode, s)
#                                       the same while MODE runs for s seconds
#   attacker_works(d, key, attacker)    exec/run and GET /self from inside
#                                       (curl on the socket) after an attack

import json
import os
import statistics
import threading
import time

import vmtest
from boxtest import rss_kib  # noqa: F401  (hostiletest.rss_kib for the bench)

HERE = os.path.dirname(os.path.abspath(__file__))
GUEST_PROGRAM = os.path.join(HERE, 'hostile_guest.py')
GUEST_PATH = '/root/hostile_guest.py'
ATTACKER_USER = 'root'     # the guest's root: what it can do is the point
MODES = ['conns', 'slowloris', 'endless', 'bigbody', 'flood', 'starve', 'halfclose', 'garbage']
NEIGHBOUR_CMD = ['true']


def push_program(d, key, sandbox):
    with open(GUEST_PROGRAM, 'rb') as f:
        data = f.read()
    r = vmtest.run(d, key, sandbox, ['sh', '-c', 'cat > %s' % GUEST_PATH], stdin=data, user=ATTACKER_USER)
    return r.status == 200 and r.exit_code == 0, r


class _Sampler(threading.Thread):
    """boxd's VmRSS every 50 ms: the peak and the samples."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid = pid
        self.samples = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            v = rss_kib(self.pid)
            if v is not None:
                self.samples.append(v)
            self.stop.wait(0.05)

    @property
    def peak(self):
        return max(self.samples) if self.samples else None


def percentile(values, p):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


class Result:
    """One phase: boxd's RSS (KiB) and the neighbour's exec/run (seconds)."""

    def __init__(self, mode):
        self.mode = mode
        self.rss_start = None
        self.rss_peak = None
        self.rss_end = None
        self.latencies = []
        self.failures = []
        self.guest = None          # hostile_guest.py's summary
        self.attack_run = None     # the attacker's exec/run (vmtest.Run)
        self.boxd_alive = True

    @property
    def p50(self):
        return percentile(self.latencies, 50)

    @property
    def p95(self):
        return percentile(self.latencies, 95)

    def describe(self):
        def ms(v):
            return '-' if v is None else '%.0f ms' % (v * 1000)
        return ('%s: boxd RSS %s -> peak %s KiB; neighbour exec/run n=%d p50 %s p95 %s max %s failed %d; guest %s'
                % (self.mode, self.rss_start, self.rss_peak, len(self.latencies), ms(self.p50), ms(self.p95),
                   ms(max(self.latencies) if self.latencies else None), len(self.failures),
                   json.dumps(self.guest, sort_keys=True) if self.guest else '-'))


def _neighbour_loop(d, key, neighbour, res, until):
    """exec/run on the neighbour, one after the other, while until() is false."""
    while not until():
        r = vmtest.run(d, key, neighbour, NEIGHBOUR_CMD, timeout=60)
        if r.status == 200 and r.exit_code == 0:
            res.latencies.append(r.seconds)
        else:
            res.failures.append(r.describe())


def _sampled(d, res, phase):
    """Runs phase() with boxd's RSS sampled: start, peak, end into @res."""
    sampler = _Sampler(d.proc.pid)
    res.rss_start = rss_kib(d.proc.pid)
    sampler.start()
    try:
        phase()
    finally:
        sampler.stop.set()
        sampler.join()
    res.rss_peak = sampler.peak
    res.rss_end = rss_kib(d.proc.pid)
    res.boxd_alive = d.proc.poll() is None
    return res


def measure_idle(d, key, neighbour, seconds, mode='idle'):
    res = Result(mode)
    end = time.time() + seconds
    return _sampled(d, res, lambda: _neighbour_loop(d, key, neighbour, res, lambda: time.time() >= end))


def measure_attack(d, key, attacker, neighbour, mode, seconds):
    res = Result(mode)
    done = threading.Event()

    def attack():
        try:
            res.attack_run = vmtest.run(d, key, attacker, ['python3', GUEST_PATH, mode, str(seconds)],
                                        timeout=seconds + 180, timeout_s=int(seconds) + 120,
                                        user=ATTACKER_USER)
            lines = res.attack_run.out.strip().splitlines()
            res.guest = json.loads(lines[-1]) if lines else None
        except (OSError, ValueError) as e:
            res.guest = {'error': repr(e)}
        finally:
            done.set()

    def phase():
        th = threading.Thread(target=attack, daemon=True)
        th.start()
        # the neighbour keeps working through the attack
        time.sleep(1)
        _neighbour_loop(d, key, neighbour, res, done.is_set)
        th.join()
    return _sampled(d, res, phase)


def attacker_works(d, key, attacker):
    """(ok, detail): exec/run answers, and from inside GET /self through
    the socket answers 200 (a new connection after the attack's)."""
    r = vmtest.run(d, key, attacker, ['curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-m', '20',
                                      '--unix-socket', '/run/box/api.sock', 'http://box/self'], timeout=60)
    return r.status == 200 and r.exit_code == 0 and r.out.strip() == '200', r.describe()


def p50_of(values):
    return statistics.median(values) if values else None
