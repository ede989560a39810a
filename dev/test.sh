#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, builds box
# twice (plain, and with AddressSanitizer + UndefinedBehaviorSanitizer),
# runs every suite in the plain build and all but the VM suite (real QEMU,
# slow) in the sanitizer build, and ends with one line "N passed, N failed".
# The sanitizer tree builds in the background, at idle priority, while the
# plain build's suites run.
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

configure () {
  local b=$1
  rm -f "$b/meson-logs/testlog.json"   # a build that fails must not count an old run
  local opts=(--buildtype=debugoptimized -Dfuzz_seconds="${BOX_FUZZ_SECONDS:-10}")
  if [ "$b" = build-asan ]; then
    opts+=(-Db_sanitize=address,undefined -Db_lundef=false)
  fi
  if [ ! -f "$b/build.ninja" ]; then
    meson setup "$b" "${opts[@]}" >"$b.setup.log" 2>&1 || { cat "$b.setup.log"; return 1; }
  else
    meson configure "$b" "${opts[@]}" >/dev/null
  fi
}

# The sanitizer tree builds in the background while the plain build's
# suites run (the VM suites leave a core idle much of the time): at the
# idle scheduling class, so that it takes only CPU time nobody else wants
# and the tests' timing does not change.
background_pid=""
build () {
  local b=$1 bg=${2:-}
  echo "=== $b: building${bg:+ (in the background, at idle priority)}"
  if [ -n "$bg" ]; then
    chrt --idle 0 nice -n 19 ionice -c 3 ninja -C "$b" >"$b.ninja.log" 2>&1 &
    background_pid=$!
    return 0
  fi
  ninja -C "$b" >"$b.ninja.log" 2>&1
}

finish_build () {
  local b=$1 rc=0
  if [ -n "$background_pid" ]; then
    wait "$background_pid" || rc=$?
    background_pid=""
  else
    build "$b" || rc=$?
  fi
  if [ "$rc" -ne 0 ]; then
    tail -50 "$b.ninja.log"
    echo "=== $b: build failed"
    status=1
    return 1
  fi
}

run_tests () {
  local b=$1
  echo "=== $b: testing"
  # The VM end-to-end suites run once, in the plain build; the sanitizer
  # build runs every other suite (unit, plugin, dbus, e2e, fuzz, ...).
  local only=("${suites[@]}")
  [ "$b" = build-asan ] && only+=(--no-suite vm)
  meson test -C "$b" --print-errorlogs --num-processes 2 "${only[@]}" || status=1
}

for b in "${builds[@]}"; do
  configure "$b" || status=1
done
first=${builds[0]}
if finish_build "$first"; then
  if [ "${#builds[@]}" -gt 1 ] && [ -f "${builds[1]}/build.ninja" ]; then
    build "${builds[1]}" background
  fi
  run_tests "$first"
fi
for b in "${builds[@]:1}"; do
  [ -f "$b/build.ninja" ] || continue
  finish_build "$b" && run_tests "$b"
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
