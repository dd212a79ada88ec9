#!/usr/bin/env bash
# Readers during swaps of the patches (issue 34, item 3): readers open and read every file of a
# mount in turn, first alone, then while `.layers` swaps between two patches 100 times a
# second. Every read must succeed and give the old or the new patch's content; prints each
# phase's reads, failures and read latency percentiles, and the p99 ratio, side by side in one
# run. Run as root.
#   Scripts/bench/swaps.sh [BINARY] [SECONDS] [RATE]
# PB_LOG=FILE logs the daemon there at debug level (every failed request a line).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=${1:-$here/../../.build/release/proxybundle}
seconds=${2:-10}
rate=${3:-100}
scratch=$(mktemp -d)
mnt=$scratch/mnt
cleanup() { umount -l "$mnt" 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT
mkdir -p "$mnt" "$scratch/main" "$scratch/one" "$scratch/two" "$scratch/substitution"
cc -O2 -o "$scratch/pbbench" "$here/pbbench.c"

# 20 directories of 50 patched files (m*, in both patches) and 50 the patches leave (u*)
for d in $(seq 0 19); do
  mkdir -p "$scratch/main/d$d" "$scratch/one/d$d" "$scratch/two/d$d"
  for f in $(seq 0 49); do
    echo main > "$scratch/main/d$d/m$f"; echo main > "$scratch/main/d$d/u$f"
    echo one > "$scratch/one/d$d/m$f"; echo two > "$scratch/two/d$d/m$f"
    echo "d$d/m$f" >> "$scratch/list"; echo "d$d/u$f" >> "$scratch/list"
  done
done
echo "$scratch/one" > "$scratch/layers-one"
echo "$scratch/two" > "$scratch/layers-two"

"$binary" mount "$scratch/main" "$mnt" ${PB_LOG:+--log-file $PB_LOG --log-level debug} --substitution "$scratch/substitution" --patch "$scratch/one"
phase() {  # NAME SWAPS: two readers, with or without the swapper
  local pids=() swapper=""
  for r in 1 2; do
    "$scratch/pbbench" readloop "$mnt" "$scratch/list" "$seconds" > "$scratch/$1.$r" & pids+=($!)
  done
  if [ "$2" = yes ]; then
    "$scratch/pbbench" swaploop "$mnt/.layers" "$scratch/layers-two" "$scratch/layers-one" "$rate" "$seconds" \
      > "$scratch/$1.swaps" & swapper=$!
  fi
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  [ -z "$swapper" ] || wait "$swapper" || failed=1
  cat "$scratch/$1".* | sed "s/^/$1: /"
  return $failed
}
status=0
phase alone no || status=1
phase swapping yes || status=1
p99() { awk '{ for (i = 1; i < NF; i++) if ($i == "p99") print $(i + 1) }' "$scratch/$1".[12] | sort -n | tail -1; }
echo "p99 read latency: alone $(p99 alone) µs, during $rate swaps/s $(p99 swapping) µs" \
  "(ratio $(awk -v a="$(p99 alone)" -v b="$(p99 swapping)" 'BEGIN { printf "%.2f", b / (a > 0 ? a : 1) }'))"
exit $status
