# floor.py: the raw-QEMU floor of the sandbox operations.
#
# The same kernel, initrd and disk image as boxd's base template, directly
# under qemu-system-x86_64 with the device set the libvirt plugin gives its
# domains (TCG, q35, -cpu qemu64, tb-size 128 MiB, 2 CPUs, 2048 MiB, virtio
# disk as a qcow2 overlay, virtio-serial agent port, virtio-rng, virtio NIC),
# driven over QMP and the guest agent's own protocol -- no libvirt, no boxd,
# no HTTP.  What it measures is what the host and QEMU 7.2 cannot go under:
#
#   first boot          cold boot of a fresh overlay to agent-ready (the agent
#                       grows the ext4 to the overlay's 20 GiB: a template build)
#   cold boot           cold boot of an already booted disk, anonymous RAM, to
#                       the agent's ready event   (~ wake from stopped)
#   stop                agent poweroff until QEMU has exited  (~ stop)
#   snapshot save       QMP stop + migrate to an fd with x-ignore-shared, RAM
#                       in a share=on memory-backend-file  (~ a cold pause)
#   restore             new QEMU -incoming defer on the same shared RAM file,
#                       migrate-incoming from an fd, to the agent's hello
#                       answer  (~ wake from a cold pause)
#   fork                qcow2 overlay + new QEMU mapping the template's RAM
#                       privately (share=off) + restore, to the agent's hello
#                       answer  (~ create)
#   fork, pre-started   the restore part of a fork alone, QEMU already started
#                       with -incoming defer (what a warm pool saves)
#   fork + first exec   fork, then exec `true` through the agent
#                       (~ create + first exec)
#   exec true           exec `true` round trip through the agent (~ exec/run)
#   exec static         the same with a static binary (no ld.so, no libc
#                       to map): how much of it is the dynamic loader
#   ping                the agent's ping round trip
#   pause / resume      QMP stop / cont (~ a hot pause and its wake)
#   delete              SIGKILL QEMU, reap it, remove its files (~ delete)
#
# QEMU 7.2 specifics: x-ignore-shared needs -incoming defer and
# migrate-set-capabilities before migrate-incoming; there is no file:
# migration URI, so the state goes through an fd handed over with getfd
# (exec: would work here too, but not under libvirt's seccomp sandbox, and
# boxd uses fd:); the bandwidth limit is raised (128 MiB/s by default).

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from benchlib import Samples, SOURCE_ROOT, log

sys.path.insert(0, os.path.join(SOURCE_ROOT, 'tests', 'agent'))
import boxagent  # noqa: E402  (tests/agent/boxagent.py: the host side of the agent protocol)

# a static binary in the image (the agent itself): exec without ld.so and libc
STATIC_BINARY = '/usr/lib/box/box-agent'
IMAGE_CACHE = os.environ.get('BOX_IMAGE_CACHE') or '/var/cache/box/images'

# the rows of the floor table: key -> label
OPS = [
    ('first_boot', 'first boot (fs grown) to agent-ready'),
    ('cold_boot', 'cold boot to agent-ready'),
    ('stop', 'stop (agent poweroff until QEMU exits)'),
    ('save', 'snapshot save (stop + x-ignore-shared to fd)'),
    ('restore', 'restore (share=on RAM file) to agent hello'),
    ('fork', 'fork (overlay + QEMU + share=off restore) to hello'),
    ('fork_prestarted', 'fork into a pre-started QEMU to hello'),
    ('fork_exec', 'fork + first exec true'),
    ('exec', 'exec true round trip (agent)'),
    ('exec_static', 'exec of a static binary (agent --version)'),
    ('ping', 'agent ping round trip'),
    ('pause', 'pause (QMP stop)'),
    ('resume', 'resume (QMP cont)'),
    ('delete', 'delete (SIGKILL + reap + rm)'),
]


class QmpError(Exception):
    pass


class Qmp:
    """A QMP client that can pass fds (getfd) and keeps the events."""

    def __init__(self, path, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
                break
            except OSError:
                s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.001)
        self.sock = s
        self.sock.settimeout(timeout)
        self.buf = b''
        self.events = []
        self._line()                       # the greeting
        self.cmd('qmp_capabilities')

    def _line(self):
        while b'\n' not in self.buf:
            d = self.sock.recv(65536)
            if not d:
                raise EOFError('QMP connection closed')
            self.buf += d
        line, _, self.buf = self.buf.partition(b'\n')
        return json.loads(line)

    def cmd(self, name, fds=None, **args):
        msg = {'execute': name}
        if args:
            msg['arguments'] = args
        data = json.dumps(msg).encode() + b'\n'
        if fds:
            socket.send_fds(self.sock, [data], fds)
        else:
            self.sock.sendall(data)
        while True:
            r = self._line()
            if 'event' in r:
                self.events.append(r)
                continue
            if 'error' in r:
                raise QmpError('%s: %s' % (name, r['error'].get('desc')))
            return r.get('return')

    def wait_event(self, name, pred=None, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get('event') == name and (pred is None or pred(e)):
                    return self.events.pop(i)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError('no %s event' % name)
            self.sock.settimeout(left)
            r = self._line()
            if 'event' in r:
                self.events.append(r)

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def connect_agent(path, timeout=30):
    """boxagent.connect_unix with a 1 ms retry (its 10 ms would be measured)."""
    deadline = time.monotonic() + timeout
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return boxagent.Agent(s)
        except OSError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


MIGRATION_CAPS = [{'capability': 'x-ignore-shared', 'state': True},
                  {'capability': 'events', 'state': True}]


class Vm:
    """One QEMU process of the floor."""

    def __init__(self, floor, name, disk, ram_path=None, share=True, incoming=False):
        self.floor = floor
        self.dir = os.path.join(floor.work, name)
        os.makedirs(self.dir, exist_ok=True)
        self.qmp_path = os.path.join(self.dir, 'qmp.sock')
        self.agent_path = os.path.join(self.dir, 'agent.sock')
        for p in (self.qmp_path, self.agent_path):
            if os.path.exists(p):
                os.unlink(p)
        mem = '%dK' % (floor.memory_mib * 1024 + floor.ram_pad_kib)
        if ram_path is not None:
            ram = 'memory-backend-file,id=box-ram,size=%s,mem-path=%s,share=%s' % (
                mem, ram_path, 'on' if share else 'off')
        else:
            ram = 'memory-backend-ram,id=box-ram,size=%s' % mem
        img = floor.image
        self.argv = [
            'qemu-system-x86_64', '-name', 'box-floor-' + name,
            '-machine', 'q35,usb=off,dump-guest-core=off,memory-backend=box-ram',
            '-accel', 'tcg,tb-size=%d' % floor.tb_cache_mib, '-cpu', 'qemu64',
            '-m', 'size=' + mem, '-object', ram, '-smp', str(floor.cpus),
            '-display', 'none', '-no-user-config', '-nodefaults', '-no-reboot',
            '-rtc', 'base=utc',
            '-kernel', os.path.join(img, 'vmlinuz'), '-initrd', os.path.join(img, 'initrd.img'),
            '-append', 'console=ttyS0 panic=-1 quiet box.hostname=floor',
            '-device', 'virtio-serial-pci,id=virtio-serial0',
            '-drive', 'file=%s,format=qcow2,if=none,id=disk0,cache=writeback,discard=unmap' % disk,
            '-device', 'virtio-blk-pci,drive=disk0,id=virtio-disk0',
            '-serial', 'file:%s' % os.path.join(self.dir, 'console.log'),
            '-chardev', 'socket,id=agent,path=%s,server=on,wait=off' % self.agent_path,
            '-device', 'virtserialport,bus=virtio-serial0.0,nr=1,chardev=agent,name=org.box.agent.0',
            '-object', 'rng-random,id=rng0,filename=/dev/urandom',
            '-device', 'virtio-rng-pci,rng=rng0',
            '-netdev', 'user,id=net0,restrict=on',
            '-device', 'virtio-net-pci,netdev=net0,mac=52:54:00:b0:c5:01',
            '-qmp', 'unix:%s,server=on,wait=off' % self.qmp_path,
        ]
        if incoming:
            self.argv += ['-incoming', 'defer']
        self.proc = None
        self.qmp = None
        self.agent = None

    def spawn(self):
        self.log = open(os.path.join(self.dir, 'qemu.log'), 'ab')
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        return self

    def connect(self):
        self.qmp = Qmp(self.qmp_path)
        self.agent = connect_agent(self.agent_path)
        return self

    def set_caps(self):
        self.qmp.cmd('migrate-set-capabilities', capabilities=MIGRATION_CAPS)
        self.qmp.cmd('migrate-set-parameters', **{'max-bandwidth': 64 << 30})

    def incoming(self, state_path):
        """migrate-incoming from the state file; returns once the guest
        runs again and answers hello."""
        fd = os.open(state_path, os.O_RDONLY)
        try:
            self.qmp.cmd('getfd', fds=[fd], fdname='mig')
        finally:
            os.close(fd)
        self.qmp.cmd('migrate-incoming', uri='fd:mig')
        ev = self.qmp.wait_event('MIGRATION', lambda e: e['data']['status'] in ('completed', 'failed'))
        if ev['data']['status'] != 'completed':
            raise QmpError('incoming migration failed')
        # the state was saved from a stopped VM, so the guest stays paused
        self.qmp.cmd('cont')
        self.agent.hello()

    def save(self, state_path):
        """QMP stop, then the device state (x-ignore-shared: not the
        shared RAM) to a file through an fd."""
        self.qmp.cmd('stop')
        fd = os.open(state_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.qmp.cmd('getfd', fds=[fd], fdname='mig')
        finally:
            os.close(fd)
        self.qmp.cmd('migrate', uri='fd:mig')
        ev = self.qmp.wait_event('MIGRATION', lambda e: e['data']['status'] in ('completed', 'failed'))
        if ev['data']['status'] != 'completed':
            raise QmpError('migration failed')

    def poweroff(self, timeout=60):
        self.agent.send_json(0, {'id': 999999, 'op': 'poweroff'})
        self.proc.wait(timeout=timeout)
        self.close()

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.close()

    def close(self):
        if self.qmp is not None:
            self.qmp.close()
            self.qmp = None
        if self.agent is not None:
            try:
                self.agent.sock.close()
            except OSError:
                pass
            self.agent = None
        if getattr(self, 'log', None) is not None:
            self.log.close()
            self.log = None


def qemu_img_overlay(path, backing, backing_fmt, size=None):
    argv = ['qemu-img', 'create', '-q', '-f', 'qcow2', '-b', backing, '-F', backing_fmt, path]
    if size:
        argv.append(size)
    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)


def disk_snapshot(qmp, disk, new):
    """A qcow2 external snapshot of a running raw QEMU's disk (@disk, its
    top image), as the libvirt plugin takes one for a disk-only checkpoint
    (plugins/libvirt/box-libvirt-snapshot.c): @new made on it by qemu-img,
    handed over in an fd set, added as a node and put on top."""
    top = next(b['inserted']['node-name'] for b in qmp.cmd('query-block') if b.get('inserted'))
    qemu_img_overlay(new, disk, 'qcow2')
    rw = os.open(new, os.O_RDWR | os.O_CLOEXEC)
    ro = os.open(new, os.O_RDONLY | os.O_CLOEXEC)
    try:
        a = qmp.cmd('add-fd', fds=[rw])
        qmp.cmd('add-fd', fds=[ro], **{'fdset-id': a['fdset-id']})
    finally:
        os.close(rw)
        os.close(ro)
    node = 'snap%d' % a['fdset-id']
    qmp.cmd('blockdev-add', **{'driver': 'qcow2', 'node-name': node, 'read-only': False,
                               'discard': 'unmap', 'backing': None,
                               'file': {'driver': 'file', 'filename': '/dev/fdset/%d' % a['fdset-id'],
                                        'discard': 'unmap'}})
    qmp.cmd('remove-fd', **{'fdset-id': a['fdset-id'], 'fd': a['fd']})
    qmp.cmd('blockdev-snapshot', node=top, overlay=node)


class Floor:
    def __init__(self, work, image=None, cpus=2, memory_mib=2048, disk_gib=20, tb_cache_mib=128,
                 ram_pad_kib=0):
        self.work = os.path.join(work, 'floor')
        # the libvirt plugin's RAM block under TCG is 8 KiB more than
        # memory_mib (box-libvirt-ram.c); 0: exactly memory_mib
        self.ram_pad_kib = ram_pad_kib
        self.image = image or os.path.realpath(os.path.join(IMAGE_CACHE, 'base'))
        self.cpus = cpus
        self.memory_mib = memory_mib
        self.disk_gib = disk_gib
        self.tb_cache_mib = tb_cache_mib
        self.s = {k: Samples(label) for k, label in OPS}
        self.live = []

    # -- helpers --
    def _vm(self, *a, **kw):
        vm = Vm(self, *a, **kw)
        self.live.append(vm)
        return vm

    def _gone(self, vm):
        vm.kill()
        if vm in self.live:
            self.live.remove(vm)

    def cleanup(self):
        for vm in list(self.live):
            self._gone(vm)
        shutil.rmtree(self.work, ignore_errors=True)

    def _check_exec(self, agent, what):
        r = agent.exec_run(['true'])
        if r.get('code') != 0:
            raise RuntimeError('%s: exec true gave %r' % (what, r))

    # -- the template: first boot, then a snapshot with shared RAM --
    def make_template(self):
        shutil.rmtree(self.work, ignore_errors=True)
        tdir = os.path.join(self.work, 'tmpl')
        os.makedirs(tdir)
        self.t_disk = os.path.join(tdir, 'disk.qcow2')
        self.t_ram = os.path.join(tdir, 'ram')
        self.t_state = os.path.join(tdir, 'state')
        qemu_img_overlay(self.t_disk, os.path.join(self.image, 'rootfs.ext4'), 'raw',
                         '%dG' % self.disk_gib)
        vm = self._vm('tmpl', self.t_disk, ram_path=self.t_ram, share=True)
        t = time.perf_counter()
        vm.spawn().connect()
        vm.agent.wait_ready(timeout=300)
        self.s['first_boot'].add(time.perf_counter() - t)
        vm.agent.hello()
        # what a template snapshot has done once (boxd warms its pool the same way)
        for _ in range(3):
            self._check_exec(vm.agent, 'template')
        vm.agent.request('sync')
        vm.set_caps()
        with self.s['save'].timed():
            vm.save(self.t_state)
        self._gone(vm)
        os.chmod(self.t_disk, 0o444)

    # -- forks of the template --
    def forks(self, n, exec_runs):
        for i in range(n):
            name = 'fork%d' % i
            disk = os.path.join(self.work, name + '.qcow2')
            t0 = time.perf_counter()
            qemu_img_overlay(disk, self.t_disk, 'qcow2')
            vm = self._vm(name, disk, ram_path=self.t_ram, share=False, incoming=True)
            try:
                vm.spawn().connect()
                vm.set_caps()
                t1 = time.perf_counter()
                vm.incoming(self.t_state)
                t2 = time.perf_counter()
                self._check_exec(vm.agent, name)
                t3 = time.perf_counter()
            except Exception as e:      # noqa: BLE001 -- recorded, the run goes on
                self._failed(vm, 'fork', name, e)
                os.unlink(disk)
                continue
            self.s['fork'].add(t2 - t0)
            self.s['fork_prestarted'].add(t2 - t1)
            self.s['fork_exec'].add(t3 - t0)
            if i == 0:
                for _ in range(3):
                    vm.agent.exec_run(['true'])
                for _ in range(exec_runs):
                    with self.s['exec'].timed():
                        r = vm.agent.exec_run(['true'])
                    if r.get('code') != 0:
                        self.s['exec'].fail(r)
                for _ in range(exec_runs):
                    with self.s['exec_static'].timed():
                        r = vm.agent.exec_run([STATIC_BINARY, '--version'])
                    if r.get('code') != 0:
                        self.s['exec_static'].fail(r)
                for _ in range(exec_runs):
                    with self.s['ping'].timed():
                        vm.agent.request('ping')
            with self.s['pause'].timed():
                vm.qmp.cmd('stop')
            time.sleep(0.05)
            with self.s['resume'].timed():
                vm.qmp.cmd('cont')
            vm.agent.request('ping')
            t = time.perf_counter()
            vm.kill()
            os.unlink(disk)
            shutil.rmtree(vm.dir)
            self.s['delete'].add(time.perf_counter() - t)
            self.live.remove(vm)

    # -- a VM of its own with shared RAM: restore, then save again --
    def restores(self, n):
        rdir = os.path.join(self.work, 'rvm')
        os.makedirs(rdir, exist_ok=True)
        disk = os.path.join(rdir, 'disk.qcow2')
        ram = os.path.join(rdir, 'ram')
        state = os.path.join(rdir, 'state')
        qemu_img_overlay(disk, self.t_disk, 'qcow2')
        subprocess.run(['cp', '--sparse=always', self.t_ram, ram], check=True)
        shutil.copyfile(self.t_state, state)
        for i in range(n):
            vm = self._vm('restore', disk, ram_path=ram, share=True, incoming=True)
            try:
                t = time.perf_counter()
                vm.spawn().connect()
                vm.set_caps()
                vm.incoming(state)
                self.s['restore'].add(time.perf_counter() - t)
                self._check_exec(vm.agent, 'restore %d' % i)
                with self.s['save'].timed():
                    vm.save(state)
            except Exception as e:      # noqa: BLE001 -- recorded; the snapshot chain ends here
                self._failed(vm, 'restore', 'restore %d' % i, e)
                break
            self._gone(vm)
        shutil.rmtree(rdir, ignore_errors=True)

    # -- cold boots of a disk that was booted before, and poweroffs --
    def boots(self, n):
        disk = os.path.join(self.work, 'boot.qcow2')
        qemu_img_overlay(disk, self.t_disk, 'qcow2')
        for i in range(n):
            vm = self._vm('boot', disk)
            try:
                t = time.perf_counter()
                vm.spawn().connect()
                vm.agent.wait_ready(timeout=300)
                self.s['cold_boot'].add(time.perf_counter() - t)
                vm.agent.hello()
                self._check_exec(vm.agent, 'boot %d' % i)
            except Exception as e:      # noqa: BLE001 -- recorded, the run goes on
                self._failed(vm, 'cold_boot', 'boot %d' % i, e)
                continue
            t = time.perf_counter()
            try:
                vm.poweroff()
                self.s['stop'].add(time.perf_counter() - t)
            except subprocess.TimeoutExpired:
                self.s['stop'].fail('QEMU still running 60 s after poweroff')
            self._gone(vm)
        os.unlink(disk)

    def _failed(self, vm, key, what, exc):
        """Records a failed run with QEMU's exit status, keeps the VM's logs
        in <work>/floor-failures/ and ends the VM."""
        status = vm.proc.poll() if vm.proc is not None else None
        keep = os.path.join(os.path.dirname(self.work), 'floor-failures',
                            '%s-%s' % (time.strftime('%Y%m%d-%H%M%S'), what.replace(' ', '-')))
        self._gone(vm)
        os.makedirs(keep, exist_ok=True)
        for name in ('console.log', 'qemu.log'):
            src = os.path.join(vm.dir, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(keep, name))
        msg = '%s: %s: %s (QEMU exit status %r; logs in %s)' % (what, type(exc).__name__, exc, status, keep)
        log('floor: ' + msg)
        self.s[key].fail(msg)

    def run(self, n, boots=None):
        """Everything, n runs each (boots: cold boots, default n)."""
        try:
            log('floor: template (first boot + snapshot)')
            self.make_template()
            log('floor: %d forks' % n)
            self.forks(n, n)
            log('floor: %d restores and saves' % n)
            self.restores(n)
            nb = n if boots is None else boots
            log('floor: %d cold boots and poweroffs' % nb)
            self.boots(nb)
        finally:
            self.cleanup()
        return self.s


def table(samples, title='raw QEMU floor (TCG, q35, no libvirt, no boxd)'):
    from benchlib import Row, Table
    t = Table(title)
    for key, label in OPS:
        t.add(Row(key, label, samples[key]))
    return t

