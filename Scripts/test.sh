#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: unit tests of the overlay
# core on temporary directories, and mount tests that run the built binary on temporary
# mountpoints (root is needed for /dev/fuse and for the kernel-overlayfs comparison).
#
# Without arguments, each fuzz target runs first for 5 s (Scripts/fuzz.sh). The suite runs
# twice: all of it with every mount's requests over /dev/fuse, then the mount tests again over
# FUSE over io_uring (-o transport=uring; the fuse module's enable_uring is switched on for
# that pass and put back as it was). A kernel without FUSE over io_uring skips the second
# pass, saying so. Extra arguments go to `swift test` in both passes (e.g. --filter
# ShadowingTests); PROXYBUNDLE_TEST_TRANSPORTS=device (or =uring) runs one pass only.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

Scripts/bootstrap.sh
swift build --build-tests
log=$(mktemp)
switch=/sys/module/fuse/parameters/enable_uring
saved_switch=$(cat "$switch" 2>/dev/null || true)
restore() {
  rm -f "$log"
  if [ -n "$saved_switch" ] && [ "$(cat "$switch" 2>/dev/null)" != "$saved_switch" ]; then
    echo "$saved_switch" > "$switch" || echo "could not put $switch back to $saved_switch" >&2
  fi
}
trap restore EXIT

status=0
passed=0 failed=0 skipped=0
# the full suite runs every fuzz target for a few seconds: they keep building, and their seeds
# and what earlier runs found still pass (Scripts/fuzz.sh; instrumented in .build-fuzz)
if [ $# -eq 0 ]; then
  echo "=== fuzz targets, 5 s each"
  Scripts/fuzz.sh all 5 || { echo "a fuzz target failed (its input is in .build-fuzz/findings)"; status=1; }
fi
# one pass of the suite: its figures are added up, its failure kept
run_pass() {
  local transport=$1; shift
  echo "=== requests over ${transport}: swift test $*"
  # the suite is XCTest only; Swift Testing would close with a misleading "0 tests" line
  PROXYBUNDLE_TEST_TRANSPORT=$transport swift test --skip-build --disable-swift-testing "$@" 2>&1 \
    | tee "$log" || status=1
  # "Executed 300 tests, with 1 test skipped and 0 failures (0 unexpected) in ..."
  local summary total fails skips
  summary=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with ([0-9]+ tests? skipped and )?[0-9]+ failures?" "$log" | tail -n 1 || true)
  if [ -z "$summary" ]; then
    echo "no test summary found for the ${transport} pass"
    status=1
    return
  fi
  total=$(sed -E 's/.*Executed ([0-9]+) tests?.*/\1/' <<<"$summary")
  fails=$(sed -E 's/.* ([0-9]+) failures?.*/\1/' <<<"$summary")
  skips=$(sed -nE 's/.*with ([0-9]+) tests? skipped.*/\1/p' <<<"$summary")
  skips=${skips:-0}
  echo "${transport}: $((total - fails - skips)) passed, $fails failed, $skips skipped"
  # a machine may lack only what MachineSkip (Tests/MountTests/Support) lists, each skip's
  # message starting with its tag; any other skip is a test depending on what is installed
  local unexplained
  unexplained=$(grep -E ": Test skipped" "$log" | grep -vF ": Test skipped - kernel lacks:" || true)
  if [ -n "$unexplained" ]; then
    echo "skips that are not a kernel's lack (the test must set up what it needs):"
    echo "$unexplained"
    status=1
  fi
  passed=$((passed + total - fails - skips)) failed=$((failed + fails)) skipped=$((skipped + skips))
}

transports=${PROXYBUNDLE_TEST_TRANSPORTS:-device,uring}
if [[ ",$transports," == *",device,"* ]]; then
  run_pass device "$@"
fi
if [[ ",$transports," == *",uring,"* ]]; then
  if [ -z "$saved_switch" ]; then
    echo "=== this kernel has no FUSE over io_uring ($switch): the io_uring pass is skipped"
  else
    echo Y > "$switch"
    # the unit tests mount nothing: this pass runs the mount tests (or what the arguments select)
    if [ $# -eq 0 ]; then set -- --filter '^MountTests\.'; fi
    run_pass uring "$@"
  fi
fi

# the examples must never be modified by anything the suite or the demo mounted
git diff --quiet -- Examples/ 2>/dev/null || { echo "Examples/ was modified"; status=1; }

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] || status=1
exit "$status"
