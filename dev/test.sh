#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, builds box
# twice (plain, and with AddressSanitizer + UndefinedBehaviorSanitizer),
# runs every suite in the plain build and all but the VM suite (real QEMU,
# slow) in the sanitizer build, and ends with one line "N passed, N failed".
#
#   dev/test.sh                  everything
#   BOX_TEST_SUITES="unit plugin" dev/test.sh    only these suites
#   BOX_TEST_SANITIZE=0 dev/test.sh              skip the sanitizer build
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

# shellcheck source=dev/deps.sh
. "$here/dev/deps.sh"
box_install_deps || { echo "0 passed, 1 failed"; exit 1; }

suites=()
for s in ${BOX_TEST_SUITES:-}; do suites+=(--suite "$s"); done

builds=(build-test)
[ "${BOX_TEST_SANITIZE:-1}" = "1" ] && builds+=(build-asan)

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:intercept_tls_get_addr=0}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/tests/lsan.supp:print_suppressions=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"

status=0
for b in "${builds[@]}"; do
  opts=(--buildtype=debugoptimized -Dfuzz_seconds="${BOX_FUZZ_SECONDS:-10}")
  if [ "$b" = build-asan ]; then
    opts+=(-Db_sanitize=address,undefined -Db_lundef=false)
  fi
  if [ ! -f "$b/build.ninja" ]; then
    meson setup "$b" "${opts[@]}" >"$b.setup.log" 2>&1 || { cat "$b.setup.log"; status=1; continue; }
  else
    meson configure "$b" "${opts[@]}" >/dev/null
  fi
  echo "=== $b: building"
  if ! ninja -C "$b" >"$b.ninja.log" 2>&1; then
    tail -50 "$b.ninja.log"
    echo "=== $b: build failed"
    status=1
    continue
  fi
  echo "=== $b: testing"
  rm -f "$b/meson-logs/testlog.json"
  # The VM end-to-end suites run once, in the plain build; the sanitizer
  # build runs every other suite (unit, plugin, dbus, e2e, fuzz, ...).
  only=("${suites[@]}")
  [ "$b" = build-asan ] && only+=(--no-suite vm)
  meson test -C "$b" --print-errorlogs --num-processes 2 "${only[@]}" || status=1
done

# One summary line over every build's results.
python3 - "${builds[@]}" <<'PY'
import json, os, sys
passed = failed = skipped = 0
for b in sys.argv[1:]:
    log = os.path.join(b, "meson-logs", "testlog.json")
    if not os.path.exists(log):
        failed += 1          # the build failed: count it, never hide it
        continue
    for line in open(log):
        line = line.strip()
        if not line:
            continue
        r = json.loads(line).get("result")
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
        else:
            failed += 1
if skipped:
    print(f"{skipped} skipped (not counted)")
print(f"{passed} passed, {failed} failed")   # the last line, which CI reads
PY
exit $status
