"""chanfloor: the raw host-guest channel, the floor of the interactive
sub-API's throughput figures.

The base image under raw QEMU (floor.py's device set: no libvirt, no boxd),
its agent driven directly over the agent protocol with a tight frame loop
and the window boxd uses (boxagent.WINDOW):

  channel out    exec `head -c SIZE /dev/zero`, stdout read  (agent -> host)
  channel in     exec `cat > /dev/null`, SIZE bytes of stdin (host -> agent)

files-bench and stream-bench measure it in the same run as boxd, round by
round, so both see the same load on a shared host.
"""
import os
import shutil
import struct
import time

import floor
import boxagent

MIB = 1 << 20
PIECE = 32768


class Channel:
    """A tight loop over the agent's frames on one channel (boxagent.py's
    reader copies its buffer per frame, which would be the bottleneck)."""

    def __init__(self, agent, chan):
        self.a = agent
        self.chan = chan
        self.buf = bytearray(agent.buf)
        agent.buf = b''
        self.frames = [f for f in agent.pending if f[2] == chan]
        agent.pending = [f for f in agent.pending if f[2] != chan]

    def next(self, keep=False):
        """The next frame of the channel: (type, stream, chan, payload); a
        DATA payload is only its length unless @keep."""
        if self.frames:
            t, st, ch, p = self.frames.pop(0)
            return t, st, ch, (len(p) if t == 2 and not keep else p)
        b = self.buf
        while True:
            if len(b) >= 16:
                _m, t, st, ch, ln, _c = struct.unpack_from('<HBBIII', b, 0)
                if len(b) >= 16 + ln:
                    payload = bytes(b[16:16 + ln]) if (t != 2 or keep) else ln
                    del b[:16 + ln]
                    if ch == self.chan:
                        return t, st, ch, payload
                    continue
            d = self.a.sock.recv(4 * MIB)
            if not d:
                raise EOFError('agent connection closed')
            b += d

    def credit(self, n):
        self.a.send(4, 0, self.chan, struct.pack('<I', n))

    def drain(self):
        """Reads DATA (crediting it back) until CLOSE; bytes read."""
        n = 0
        while True:
            t, _st, _ch, p = self.next()
            if t == 2:
                n += p
                self.credit(p)
            elif t == 5:
                self.give_back()
                return n

    def give_back(self):
        """What was read beyond this channel's CLOSE goes back to boxagent."""
        self.a.buf = bytes(self.buf) + self.a.buf
        self.buf = bytearray()

    def collect(self):
        """The DATA of stream 1 until CLOSE, kept."""
        out = bytearray()
        while True:
            t, _st, _ch, p = self.next(keep=True)
            if t == 2:
                out += p
                self.credit(len(p))
            elif t == 5:
                self.give_back()
                return bytes(out)

    def send(self, total, data=None):
        """Sends @total bytes (zeros, or @data) on stream 0 within credit
        (the window of the hello), then EOF."""
        credit = boxagent.WINDOW
        zeros = b'\0' * PIECE
        sent = 0
        while sent < total:
            while credit <= 0:
                t, _st, _ch, p = self.next()
                if t == 4:
                    credit += struct.unpack('<I', p)[0]
                elif t == 5:
                    raise EOFError('channel closed while sending')
                elif t == 2:
                    self.credit(p)
            n = min(PIECE, credit, total - sent)
            self.a.send(2, 0, self.chan, zeros[:n] if data is None else data[sent:sent + n])
            sent += n
            credit -= n
        self.a.send(3, 0, self.chan)


class ChannelFloor:
    """The base image under raw QEMU, its agent driven directly."""

    def __init__(self, work_dir, name='chan'):
        self.f = floor.Floor(work_dir)
        shutil.rmtree(self.f.work, ignore_errors=True)
        os.makedirs(self.f.work)
        disk = os.path.join(self.f.work, name + '.qcow2')
        floor.qemu_img_overlay(disk, os.path.join(self.f.image, 'rootfs.ext4'), 'raw',
                               '%dG' % self.f.disk_gib)
        vm = self.f._vm(name, disk)
        vm.spawn().connect()
        vm.agent.wait_ready(timeout=600)
        vm.agent.hello()
        self.a = vm.agent

    def exec_rate(self, argv, send=0):
        """MiB/s of one exec: @send bytes of stdin, or its whole output."""
        chan, _pid = self.a.exec_start(argv)
        c = Channel(self.a, chan)
        t = time.perf_counter()
        if send:
            c.send(send)
        n = c.drain()
        return (send or n) / MIB / (time.perf_counter() - t)

    def chan_out(self, size):
        return self.exec_rate(['head', '-c', str(size), '/dev/zero'])

    def chan_in(self, size):
        return self.exec_rate(['sh', '-c', 'cat > /dev/null'], send=size)

    def close(self):
        self.f.cleanup()
