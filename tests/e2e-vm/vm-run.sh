#!/usr/bin/env bash
# Runs a test of the vm suite (real VMs) once the host is ready for it:
# libvirtd running (dev/libvirtd-up.sh) and the guest images built
# (images/build-base.sh; cached by recipe, so after the first build of a CI
# run this takes a couple of seconds).  Skips with the reason only when that
# cannot be done at all: TAP "1..0 # SKIP <reason>" and exit status 77, or
# 0 for a TAP test (--tap), since meson's TAP runner counts 77 as an error.
#
#   tests/vm/vm-run.sh TEST [ARGS...]
# Env: BOX_SOURCE_ROOT (set by meson), BOX_IMAGE_CACHE (default /var/cache/box/images)
set -uo pipefail

src="${BOX_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
tap=0
for arg in "$@"; do [ "$arg" = --tap ] && tap=1; done
skip() {
  echo "1..0 # SKIP $*"
  [ "$tap" = 1 ] && exit 0
  exit 77
}

[ "$(id -u)" -eq 0 ] || skip "the vm suite needs root (libvirt qemu:///system, image builds)"
command -v libvirtd >/dev/null || skip "libvirtd is not installed (dev/deps.sh installs it)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 is not installed"

if ! out="$("$src/dev/libvirtd-up.sh" 2>&1)"; then
  echo "Bail out! libvirtd does not start: $out"
  exit 1
fi

export BOX_IMAGE_CACHE="${BOX_IMAGE_CACHE:-/var/cache/box/images}"
mkdir -p "$BOX_IMAGE_CACHE"
# one image build at a time, however many vm tests start together
exec 9>"$BOX_IMAGE_CACHE/.vm-test.lock"
flock 9
log="$(mktemp)"
# a build by someone else (who does not take our lock) may be under way in
# the same cache: try again once it had time to finish
if ! "$src/images/build-base.sh" >/dev/null 2>"$log"; then
  sleep 30
  if ! "$src/images/build-base.sh" >/dev/null 2>"$log"; then
    reason="$(tail -n 3 "$log" | tr '\n' ' ')"
    rm -f "$log"
    skip "the guest images cannot be built (images/build-base.sh: $reason)"
  fi
fi
rm -f "$log"
flock -u 9
exec 9>&-
exec "$@"
