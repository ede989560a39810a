#!/bin/sh
# The ABI check: abidiff of the built libbox-plugin-<N>.so against the
# baseline kept in the tree (core/plugin-api/libbox-plugin-<N>.abi).
#
#   check-abi.sh LIBRARY HEADERS_DIR ABI_VERSION BASELINE_DIR
#
# The library's ABI is written with every type its headers define
# (abidw --load-all-types), not only those reachable from an exported
# function, and compared with the baseline's including unreachable types
# (abidiff -t): a plugin reaches the interfaces' vtables (BoxHypervisorInterface
# ...) and the records through pointers the daemon hands it, never through
# an SDK function's signature, so without them a reordered vfunc would pass.
# New functions pass.  Any other change fails: a removed or changed
# function, a changed struct or vtable layout (abidiff reports a changed
# offset or size as a change, not always as "incompatible", so every change
# counts), a new type (refresh the baseline).
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
current=$(mktemp)
trap 'rm -f "$current"' EXIT
if ! out=$(abidw --no-corpus-path --no-comp-dir-path --headers-dir "$headers" --load-all-types \
             --out-file "$current" "$lib" 2>&1); then
  echo "not ok 1 - abidw failed"
  echo "$out" | sed 's/^/# /'
  exit 1
fi
out=$(abidiff --no-added-syms --non-reachable-types "$baseline" "$current" 2>&1)
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
