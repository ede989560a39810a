#!/usr/bin/env bash
# Start virtlogd and libvirtd when they are not running (hosts without
# systemd), then wait until libvirtd answers on its socket.  Idempotent:
# running it again while both run does nothing.
#
#   dev/libvirtd-up.sh          exit 0 when libvirtd answers
#   BOX_LIBVIRTD_TIMEOUT=30       seconds to wait for the socket (default 20)
#
# libvirt daemonizes each QEMU, so a QEMU that ends is reaped by whoever
# adopts orphans.  Where that is a PID 1 that reaps lazily (these machines'
# reaps every ~2 s), every VM destroy waits for it: libvirt polls the pid
# until it is gone.  So libvirtd runs under a small supervisor that is a
# child subreaper (prctl PR_SET_CHILD_SUBREAPER) and reaps at once; it
# exits when libvirtd does.  With systemd, use its units instead
# (libvirtd.service, virtlogd.service): systemd reaps at once.
set -euo pipefail

timeout="${BOX_LIBVIRTD_TIMEOUT:-20}"
sock=/run/libvirt/libvirt-sock
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

say() { echo "libvirtd-up: $*" >&2; }

if ! command -v libvirtd >/dev/null || ! command -v virtlogd >/dev/null; then
  say "libvirtd or virtlogd is not installed (Debian: apt-get install libvirt-daemon-system)"
  exit 1
fi

answers() {
  [ -S "$sock" ] && virsh -q -c qemu:///system version >/dev/null 2>&1
}

# /dev/kvm as udev would leave it (Debian: group kvm, which libvirt-qemu is
# in).  Hosts without udev have it root-only; libvirt then finds at every
# lookup that KVM, present when it probed QEMU, is not "available now",
# throws its capability cache away and probes QEMU again, which made every
# VM start take 15-70 s.  Whether KVM really boots a guest is the
# hypervisor plugin's own probe, not this.
if [ -c /dev/kvm ] && getent group kvm >/dev/null &&
   [ "$(stat -c %G:%a /dev/kvm)" != kvm:660 ] && [ "$(stat -c %a /dev/kvm)" != 666 ]; then
  $sudo chgrp kvm /dev/kvm && $sudo chmod 0660 /dev/kvm ||
    say "cannot give /dev/kvm to group kvm: libvirt will re-probe QEMU at every VM start"
fi

# QEMU's confinement (doc/ARCHITECTURE.md, "Security"): the libvirt plugin
# runs each VM's QEMU under a uid of its own (uid_range) and QEMU's group,
# and libvirt makes each domain's private directory (its master key) under
# /var/lib/libvirt/qemu, which such a uid must reach: upstream libvirt
# packages that directory 0751, Debian 0750.
if [ -d /var/lib/libvirt/qemu ] && [ "$(stat -c %a /var/lib/libvirt/qemu)" = 750 ]; then
  $sudo chmod 0751 /var/lib/libvirt/qemu
fi
# QEMU's seccomp sandbox (-sandbox on,obsolete=deny,elevateprivileges=deny,
# spawn=deny,resourcecontrol=deny) and the console through virtlogd (its
# max_size bounds a guest's console log) are libvirt's defaults; a
# qemu.conf that turns either off is refused rather than run unconfined.
qemu_conf=/etc/libvirt/qemu.conf
if [ -r "$qemu_conf" ]; then
  if grep -Eq '^[[:space:]]*seccomp_sandbox[[:space:]]*=[[:space:]]*(0|-1)' "$qemu_conf"; then
    say "$qemu_conf turns QEMU's seccomp sandbox off (seccomp_sandbox): set it to 1"
    exit 1
  fi
  if grep -Eq '^[[:space:]]*stdio_handler[[:space:]]*=[[:space:]]*"file"' "$qemu_conf"; then
    say "$qemu_conf sends consoles to plain files (stdio_handler = \"file\"): use \"logd\""
    exit 1
  fi
fi

if answers; then
  exit 0
fi

# The supervisor: subreaper, starts libvirtd in the foreground, reaps every
# child (libvirtd's orphaned QEMUs included) until libvirtd ends.
supervisor='
import ctypes, os, signal, sys
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
signal.signal(signal.SIGTERM, lambda *a: os.kill(pid, signal.SIGTERM))
while True:
    try:
        child, status = os.wait()
    except ChildProcessError:
        break
    except InterruptedError:
        continue
    if child == pid:
        code = os.waitstatus_to_exitcode(status)
        # keep reaping the orphans still around, then leave
        while True:
            try:
                os.wait()
            except ChildProcessError:
                sys.exit(code if code >= 0 else 1)
'

$sudo mkdir -p /var/log/libvirt /run/libvirt
# The daemons outlive this script: they must not keep what it inherited
# open (a caller's `flock LOCK cmd` lock fd would stay held by libvirtd for
# good, and every later taker of that lock would wait forever).
for fd in /proc/$$/fd/*; do
  fd="${fd##*/}"
  [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
done
# pgrep -x matches the process name exactly: never another program's.
if ! pgrep -x virtlogd >/dev/null; then
  $sudo virtlogd -d
fi
if ! pgrep -x libvirtd >/dev/null; then
  if command -v python3 >/dev/null; then
    $sudo setsid python3 -c "$supervisor" libvirtd \
      </dev/null >>/var/log/libvirt/libvirtd-supervisor.log 2>&1 &
  else
    say "no python3: libvirtd runs without a reaping supervisor (VM destroys may be slow)"
    $sudo libvirtd -d
  fi
fi

deadline=$(( $(date +%s) + timeout ))
until answers; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    say "libvirtd did not answer on $sock within ${timeout}s (see /var/log/libvirt/libvirtd.log)"
    exit 1
  fi
  sleep 0.1
done
