#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite: unit tests of the overlay
# core on temporary directories, and mount tests that run the built binary on temporary
# mountpoints (root is needed for /dev/fuse and for the kernel-overlayfs comparison).
# Extra arguments go to `swift test` (e.g. --filter ShadowingTests).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

Scripts/bootstrap.sh
swift build
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
# the suite is XCTest only; Swift Testing would close with a misleading "0 tests" line
swift test --disable-swift-testing "$@" 2>&1 | tee "$log" || status=$?

# the examples must never be modified by anything the suite or the demo mounted
git diff --quiet -- Examples/ 2>/dev/null || { echo "Examples/ was modified"; status=1; }

# "Executed 300 tests, with 1 test skipped and 0 failures (0 unexpected) in ..."
summary=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with ([0-9]+ tests? skipped and )?[0-9]+ failures?" "$log" | tail -n 1 || true)
total=$(sed -E 's/.*Executed ([0-9]+) tests?.*/\1/' <<<"$summary")
failed=$(sed -E 's/.* ([0-9]+) failures?.*/\1/' <<<"$summary")
skipped=$(sed -nE 's/.*with ([0-9]+) tests? skipped.*/\1/p' <<<"$summary")
skipped=${skipped:-0}
if [ -n "$summary" ]; then
  echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"
else
  echo "no test summary found"
  status=1
fi
exit "$status"
