#!/usr/bin/env bash
# Installs what is missing, builds, and runs the whole test suite (unit tests of the overlay
# core on temporary directories, and mount tests against the built binary).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

Scripts/bootstrap.sh
swift build
swift test "$@"
