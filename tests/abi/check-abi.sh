#!/bin/sh
# The ABI check: abidiff of the built libbox-plugin-<N>.so against the
# baseline kept in the tree (core/plugin-api/libbox-plugin-<N>.abi).
#
#   check-abi.sh LIBRARY HEADERS_DIR ABI_VERSION BASELINE_DIR
#
# New functions pass.  Any other change fails: a removed or changed
# function, a changed struct layout (abidiff reports a changed offset or
# size as a change, not always as "incompatible", so every change counts).
# An incompatible one needs a new ABI version (a new soname,
# BOX_PLUGIN_ABI_VERSION, a new version node) and a new baseline; one that
# is compatible after all (a field grown into reserved padding) needs the
# baseline refreshed in the same commit (tests/abi/update-abi-baseline.sh).
# doc/PLUGINS.md explains.
set -u
lib=$1 headers=$2 abi=$3 dir=$4
baseline="$dir/libbox-plugin-$abi.abi"

echo "1..1"
if ! command -v abidiff >/dev/null 2>&1; then
  echo "ok 1 # SKIP abidiff is not installed (Debian: apt-get install abigail-tools)"
  exit 0
fi
if [ ! -f "$baseline" ]; then
  echo "not ok 1 - no baseline for ABI version $abi: run tests/abi/update-abi-baseline.sh"
  exit 1
fi
out=$(abidiff --no-added-syms --headers-dir2 "$headers" "$baseline" "$lib" 2>&1)
rc=$?
# abidiff's status is a bit field: 1 error, 2 usage, 4 ABI change, 8 incompatible change
if [ $((rc & 3)) -ne 0 ]; then
  echo "not ok 1 - abidiff failed (status $rc)"
  echo "$out" | sed 's/^/# /'
  exit 1
fi
if [ $((rc & 12)) -ne 0 ]; then
  if [ $((rc & 8)) -ne 0 ]; then
    echo "not ok 1 - an incompatible ABI change without a new ABI version (now $abi)"
  else
    echo "not ok 1 - the ABI changed: bump the ABI version, or refresh the baseline if compatible"
  fi
  echo "$out" | sed 's/^/# /'
  exit 1
fi
echo "ok 1 - the ABI is the baseline's (version $abi), new functions aside"
