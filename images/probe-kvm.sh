#!/bin/bash
# Tell whether KVM can boot the box guest kernel: prints "kvm" or "tcg" on
# stdout (and the reason on stderr). Exit status 0 either way.
#
# /dev/kvm existing is not enough: on some hosts it is a PVM-only KVM on which
# a stock kernel hangs early. So really boot the kernel + initramfs with
# -accel kvm and wait for the kernel's first console output of user space
# (the agent's "stage1" line), at most BOX_KVM_PROBE_TIMEOUT seconds (10).
#
# Usage: images/probe-kvm.sh [IMAGE_DIR]   (default $BOX_IMAGE_CACHE/base)
set -uo pipefail
CACHE=${BOX_IMAGE_CACHE:-/var/cache/box/images}
IMG=${1:-$CACHE/base}
TIMEOUT=${BOX_KVM_PROBE_TIMEOUT:-10}
say() { echo "probe-kvm: $*" >&2; }

if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
    say "no usable /dev/kvm"; echo tcg; exit 0
fi
if [ ! -f "$IMG/vmlinuz" ] || [ ! -f "$IMG/initrd.img" ]; then
    say "no image at $IMG (run images/build-base.sh)"; echo tcg; exit 0
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s.%N)
# No disk: stage 1 loads the modules and then waits for /dev/vda; its log
# line (or the kernel's own messages) proves the guest really runs.
qemu-system-x86_64 -accel kvm -cpu host -machine q35 -m 256 -smp 1 \
    -nographic -nodefaults -no-reboot -serial stdio \
    -kernel "$IMG/vmlinuz" -initrd "$IMG/initrd.img" \
    -append "console=ttyS0 panic=-1 loglevel=4 box.root=/dev/nonexistent" </dev/null >"$log" 2>&1 &
qpid=$!
disown "$qpid" 2>/dev/null
result=tcg
deadline=$(echo "$start + $TIMEOUT" | bc)
while kill -0 "$qpid" 2>/dev/null && [ "$(echo "$(date +%s.%N) < $deadline" | bc)" = 1 ]; do
    if grep -qE 'box-agent:|Run /init as init process|Freeing unused kernel' "$log"; then
        result=kvm
        break
    fi
    sleep 0.1
done
kill -KILL "$qpid" 2>/dev/null
elapsed=$(printf '%.1f' "$(echo "$(date +%s.%N) - $start" | bc)")
if [ $result = kvm ]; then
    say "KVM booted the guest kernel in ${elapsed}s"
else
    say "KVM did not boot the guest kernel within ${TIMEOUT}s ($(head -c 200 "$log" | tr -d '\r' | tr '\n' ' '))"
fi
echo $result
