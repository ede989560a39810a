#!/bin/sh
# Writes the ABI baseline of the plugin SDK from a build:
#
#   tests/abi/update-abi-baseline.sh [BUILD_DIR]     (default: build)
#
# into core/plugin-api/libbox-plugin-<N>.abi.  Run it after a compatible
# addition to the SDK, or with a new ABI version (then the old version's
# baseline may go).  The build needs debug information (the default
# buildtype debugoptimized has it).
set -eu
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
abi=$(sed -n 's/^#define BOX_PLUGIN_ABI_VERSION \([0-9][0-9]*\)$/\1/p' "$src/core/plugin-api/box-plugin.h")
lib="$build/core/plugin-api/libbox-plugin-$abi.so"
[ -f "$lib" ] || { echo "no $lib: build first (ninja -C $build)" >&2; exit 1; }
# every type of the headers, reachable from a function or not (check-abi.sh)
abidw --no-corpus-path --no-comp-dir-path --headers-dir "$src/core/plugin-api" --load-all-types \
  --out-file "$src/core/plugin-api/libbox-plugin-$abi.abi" "$lib"
echo "wrote core/plugin-api/libbox-plugin-$abi.abi"
