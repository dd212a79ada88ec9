#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the fuzz targets (Fuzz/: one per parser of untrusted input) with libFuzzer and
# AddressSanitizer, in their own scratch path (.build-fuzz; the product's build is never
# instrumented), and runs each for SECONDS, one at a time, at the lowest priority.
#
#   Scripts/fuzz.sh [TARGET|all] [SECONDS]      (default: all, 60 seconds each)
#
# Targets: tar, oci, plist-xml, plist-binary, assets-car, casefold, control (each one's
# main.swift says what it checks). Each starts from its committed seeds (Fuzz/TARGET/corpus,
# made from the tests' fixtures) and from what earlier runs found
# (.build-fuzz/corpus/TARGET, which grows). One line per target: its name, executions,
# coverage (cov: edges, ft: features), the corpus size and its state. A crash, a failed
# check, a hang, a leak or an out-of-memory (over 2 GB) is a finding: its input
# is kept in .build-fuzz/findings/TARGET/ (the line names it; running the target with that
# file as its argument replays it), and the script exits 1.
# A hang is an input still running after 60 s of wall time: the targets run at the lowest
# priority on shared machines, where an input of 30 ms has waited over 10 s for a core.
# FUZZ_FLAGS adds libFuzzer flags (e.g. FUZZ_FLAGS=-jobs=2).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"

all=(tar oci plist-xml plist-binary assets-car casefold control)
which=${1:-all} seconds=${2:-60}
if [ "$which" = all ]; then targets=("${all[@]}")
elif [[ " ${all[*]} " == *" $which "* ]]; then targets=("$which")
else echo "fuzz.sh: unknown target '$which' (one of: ${all[*]}, all)" >&2; exit 64
fi
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS must be a positive number, not '$seconds'" >&2; exit 64; }

build=.build-fuzz
for target in "${targets[@]}"; do
  PROXYBUNDLE_FUZZ=1 swift build -c debug --scratch-path "$build" -Xswiftc -sanitize=fuzzer,address \
    --product "fuzz-$target" >"$build.log" 2>&1 || { cat "$build.log" >&2; echo "fuzz.sh: cannot build fuzz-$target" >&2; exit 1; }
done
rm -f "$build.log"
bin=$(PROXYBUNDLE_FUZZ=1 swift build -c debug --scratch-path "$build" -Xswiftc -sanitize=fuzzer,address --show-bin-path)

scratch=$(mktemp -d /dev/shm/pb-fuzz.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
status=0
for target in "${targets[@]}"; do
  corpus=$build/corpus/$target findings=$build/findings/$target
  mkdir -p "$corpus" "$findings" "$scratch/$target"
  flags=(-max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=2048 -max_len=65536
         -print_final_stats=1 -artifact_prefix="$findings/")
  [ -f "Fuzz/$target/dictionary" ] && flags+=(-dict="Fuzz/$target/dictionary")
  log=$scratch/$target.log
  run_status=0
  # Swift's own backtracer is off: libFuzzer reports a crash itself, and the backtracer of a
  # process that AddressSanitizer ends is left waiting for it forever
  # shellcheck disable=SC2086
  SWIFT_BACKTRACE=enable=no FUZZ_SCRATCH=$scratch/$target nice -n 19 "$bin/fuzz-$target" "${flags[@]}" ${FUZZ_FLAGS:-} \
    "$corpus" "Fuzz/$target/corpus" >"$log" 2>&1 || run_status=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1 || true)
  cov=$(sed -nE 's/.* cov: ([0-9]+).*/\1/p' <<<"$last") ft=$(sed -nE 's/.* ft: ([0-9]+).*/\1/p' <<<"$last")
  units=$(find "$corpus" -type f | wc -l)
  if [ "$run_status" -eq 0 ]; then state=clean
  else
    found=$(grep -oE "Test unit written to [^ ]+" "$log" | tail -n 1 | sed 's/Test unit written to //' || true)
    state="FOUND ${found:-a failure (status $run_status)}"
    status=1
  fi
  printf '%-13s %10s runs in %ss  cov: %-6s ft: %-6s corpus: %-5s %s\n' \
    "$target" "${runs:-?}" "$seconds" "${cov:-?}" "${ft:-?}" "$units" "$state"
  if [ "$run_status" -ne 0 ]; then
    grep -E "Fatal error|invariant broken|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|SUMMARY:" "$log" | head -n 5 | sed 's/^/    /' || true
    cp "$log" "$findings/last-failure.log"
  fi
done
exit "$status"
