#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs what is missing, builds box
# twice (plain, and with AddressSanitizer + UndefinedBehaviorSanitizer),
# runs every suite in the plain build and all but the VM suite (real QEMU,
# slow) in the sanitizer build, and ends with one line "N passed, N failed".
# The sanitizer tree builds in the background, at idle priority, while the
# plain build's suites run; its suites run beside the plain build's VM
# suite (see run_all).
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
logs=()   # the meson test logs the summary counts (a missing one is a failure)

configure () {
  local b=$1
  rm -f "$b"/meson-logs/testlog*.json   # a build that fails must not count an old run
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

# meson test on build $1 with the log base $2 (meson-logs/$2.json) and
# the rest of the arguments
meson_test () {
  local b=$1 log=$2
  shift 2
  logs+=("$b/meson-logs/$log.json")
  meson test -C "$b" --print-errorlogs --logbase "$log" "$@"
}

# The VM end-to-end suites run once, in the plain build (one at a time:
# is_parallel false); the sanitizer build runs every other suite.  With
# every suite asked for, the sanitizer build's suites run beside the VM
# suites, one test at a time at nice 10: a VM test under TCG leaves a core
# idle much of the time (its guest waits), so they take what it leaves.
# The background job compiles the sanitizer tree (as build() does), waits
# for the plain build's other suites to end, then tests.
run_all () {
  local marker asan_log="" asan_pid=""
  marker="$(mktemp -u)"
  # the sanitizer build's log counts even when it could not be configured
  [ "${#builds[@]}" -gt 1 ] && logs+=("${builds[1]}/meson-logs/testlog-main.json")
  if [ "${#builds[@]}" -gt 1 ] && [ -f "${builds[1]}/build.ninja" ]; then
    local b=${builds[1]}
    asan_log="$b.test.log"
    echo "=== $b: building (in the background, at idle priority), then testing beside the VM suite"
    (
      if ! chrt --idle 0 nice -n 19 ionice -c 3 ninja -C "$b" >"$b.ninja.log" 2>&1; then
        tail -50 "$b.ninja.log"
        echo "=== $b: build failed"
        exit 1
      fi
      while [ ! -e "$marker" ]; do sleep 1; done
      echo "=== $b: testing (all but the VM suite)"
      nice -n 10 meson test -C "$b" --print-errorlogs --logbase testlog-main --num-processes 1 \
        --no-suite vm
    ) >"$asan_log" 2>&1 &
    asan_pid=$!
  fi
  echo "=== ${builds[0]}: testing (all but the VM suite)"
  # three at a time on two cores: most of these suites wait (timers,
  # sockets, boxd starting) more than they compute; measured 2026-11-28,
  # 786 s of tests in 359 s with three, at least 393 s with two
  meson_test "${builds[0]}" testlog-main --num-processes 3 --no-suite vm || status=1
  touch "$marker"
  echo "=== ${builds[0]}: testing (the VM suite)"
  meson_test "${builds[0]}" testlog-vm --suite vm || status=1
  if [ -n "$asan_pid" ]; then
    wait "$asan_pid" || status=1
    cat "$asan_log"
  fi
  rm -f "$marker"
}

# Only the suites in BOX_TEST_SUITES: each build in turn.
run_some () {
  local b only
  for b in "${builds[@]}"; do
    only=("${suites[@]}")
    [ "$b" = build-asan ] && only+=(--no-suite vm)
    if [ "$b" != "${builds[0]}" ]; then
      finish_build "$b" || { logs+=("$b/meson-logs/testlog-main.json"); continue; }
    fi
    echo "=== $b: testing"
    meson_test "$b" testlog-main --num-processes 2 "${only[@]}" || status=1
  done
}

for b in "${builds[@]}"; do
  configure "$b" || status=1
done
if finish_build "${builds[0]}"; then
  if [ "${#suites[@]}" -eq 0 ]; then
    run_all
  else
    if [ "${#builds[@]}" -gt 1 ] && [ -f "${builds[1]}/build.ninja" ]; then
      build "${builds[1]}" background
    fi
    run_some
  fi
else
  logs+=("${builds[0]}/meson-logs/testlog-main.json")   # missing: counts the failed build
fi

# One summary line over every test run's results.
python3 - "${logs[@]}" <<'PY'
import json, os, sys
passed = failed = skipped = 0
for log in sys.argv[1:]:
    if not os.path.exists(log):
        failed += 1          # the build or the run failed: count it, never hide it
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
