#!/bin/bash
# Build the agent, the kernel and the base image (cached), then boot the image
# with raw qemu-system-x86_64 under TCG and exercise the agent (images/smoke.py).
# Usage: images/smoke.sh [--accel tcg|kvm] [--keep]
# Env:   BOX_IMAGE_CACHE (default /var/cache/box/images)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
t0=$(date +%s.%N)
make -s -C "$HERE/../agent" O=/tmp check >/dev/null
IMG=$("$HERE/build-base.sh")
t1=$(date +%s.%N)
printf 'images ready in %.1f s: %s\n' "$(echo "$t1 - $t0" | bc)" "$IMG"
exec python3 "$HERE/smoke.py" "$IMG" "$@"
