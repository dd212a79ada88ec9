#!/usr/bin/env bash
# ThreadSanitizer over the mount tests: the daemon built with -sanitize=thread in its own
# scratch path (.build-tsan), every mount over /dev/fuse (the io_uring transport is switched
# machine-wide, see test.sh), reports checked as Scripts/sanitize.sh does (it does the work).
# Slow (the daemon runs several times slower): not part of test.sh.
#
#   Scripts/tsan.sh [--filter FILTER]     (default: every mount test)
set -euo pipefail
cd "$(dirname "$0")/.."
PROXYBUNDLE_TEST_TRANSPORT=device exec Scripts/sanitize.sh --thread "$@"
