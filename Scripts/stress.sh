#!/usr/bin/env bash
# Runs the concurrency (StressTests) and data-integrity (IntegrityTests) mount tests again and
# again with fresh random seeds for a given time, then prints every seed that failed with its
# log and exits non-zero if any did.
#
#   Scripts/stress.sh [--minutes N] [--stress-seconds S] [--integrity-ops N] [--keep-logs DIR]
#
# Each round runs StressTests with one random STRESS_SEEDS seed for STRESS_SECONDS (default
# 20) and IntegrityTests with one random INTEGRITY_SEEDS seed and INTEGRITY_OPS operations
# (default 50000). Other STRESS_*/INTEGRITY_* settings in the environment (STRESS_STRICT,
# STRESS_TOLERATE, ...) are passed on. Builds first (`swift build --build-tests`).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

minutes=10
stress_seconds=20
integrity_ops=50000
logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift ;;
    --stress-seconds) stress_seconds="$2"; shift ;;
    --integrity-ops) integrity_ops="$2"; shift ;;
    --keep-logs) logs="$2"; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "$logs" ]; then
  logs=$(mktemp -d /tmp/pb-stress-XXXXXX)
else
  mkdir -p "$logs"
fi

swift build --build-tests

seed() { printf '0x%04x%04x%04x%04x' $RANDOM $RANDOM $RANDOM $RANDOM; }
end=$(( $(date +%s) + minutes * 60 ))
rounds=0
failed=()
while [ "$(date +%s)" -lt "$end" ]; do
  rounds=$((rounds + 1))
  # the seeded tests only, not their self-tests
  for suite in StressTests.testEightProcesses IntegrityTests.testRandomIO; do
    s=$(seed)
    log="$logs/${suite%%.*}-$s.log"
    if [ "$suite" = StressTests.testEightProcesses ]; then
      settings=(STRESS_SEEDS="$s" STRESS_SECONDS="$stress_seconds")
    else
      settings=(INTEGRITY_SEEDS="$s" INTEGRITY_OPS="$integrity_ops")
    fi
    start=$(date +%s)
    if env "${settings[@]}" swift test --skip-build --disable-swift-testing --filter "$suite" >"$log" 2>&1; then
      echo "round $rounds: $suite ${settings[*]}: passed in $(( $(date +%s) - start )) s"
      # keep what the passing run printed about itself (counts, tolerated errnos)
      grep -E "^(stress seed|integrity seed|  [0-9]+ answer)" "$log" | sed 's/^/    /' || true
      rm -f "$log"
    else
      echo "round $rounds: $suite ${settings[*]}: FAILED in $(( $(date +%s) - start )) s (log $log)"
      failed+=("$suite ${settings[*]}|$log")
    fi
  done
done

echo "$rounds round(s) in $minutes minute(s), ${#failed[@]} failure(s)"
if [ ${#failed[@]} -gt 0 ]; then
  for entry in "${failed[@]}"; do
    echo
    echo "=== FAILED: ${entry%%|*}"
    log="${entry##*|}"
    # the failure messages, not the passing lines around them
    grep -vE "^(\[[0-9]+/[0-9]+\]|Test Suite|Test Case .* (started|passed))" "$log" | tail -n 200
  done
  exit 1
fi
