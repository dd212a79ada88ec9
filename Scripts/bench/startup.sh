#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start time and resident memory of proxybundle builds side by side (e.g. the static
# executable of the source install against the package's binary, which links the system's
# shared libraries): rounds interleaved, each a fresh mount of Examples/Demo.app under
# Examples/patch. Per build, the medians of:
#   version   wall time of `proxybundle --version` (exec, dynamic loading, exit)
#   mount     wall time of `proxybundle mount` until it returns (the daemon started, mounted,
#             answering)
#   rss       the daemon's resident memory (VmRSS) once mounted
#   pss       its proportional share (Pss: a page shared with other processes, as libc's
#             are, counted in part)
#   rss-walk  its resident memory after `find` stats every entry and `cat` reads every file
# Run as root.   Scripts/bench/startup.sh BINARY... [--rounds N] (default 15)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
rounds=15 binaries=()
while [ $# -gt 0 ]; do
  case $1 in
    --rounds) rounds=$2; shift 2 ;;
    *) binaries+=("$(realpath "$1")"); shift ;;
  esac
done
[ ${#binaries[@]} -gt 0 ] || { echo "startup.sh: name at least one binary" >&2; exit 64; }
scratch=$(mktemp -d)
mnt=$scratch/mnt
mkdir -p "$mnt"
cleanup() { umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT

now_us() { echo $(( $(date +%s%N) / 1000 )); }
rss_kb() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"; }
pss_kb() { awk '$1 == "Pss:" { print $2 }' "/proc/$1/smaps_rollup"; }

for round in $(seq "$rounds"); do
  for index in "${!binaries[@]}"; do
    binary=${binaries[$index]}
    start=$(now_us); "$binary" --version >/dev/null; end=$(now_us)
    echo "$index version $((end - start))" >> "$scratch/samples"
    rm -rf "$scratch/sub"; mkdir "$scratch/sub"
    start=$(now_us)
    "$binary" mount "$here/Examples/Demo.app" "$mnt" --patch "$here/Examples/patch" --substitution "$scratch/sub"
    end=$(now_us)
    echo "$index mount $((end - start))" >> "$scratch/samples"
    pid=$(sed -n 's/^pid: //p' "$mnt/.stats")
    echo "$index rss $(rss_kb "$pid")" >> "$scratch/samples"
    echo "$index pss $(pss_kb "$pid")" >> "$scratch/samples"
    find "$mnt" -ls >/dev/null
    find "$mnt" -type f -exec cat {} + >/dev/null
    echo "$index rss-walk $(rss_kb "$pid")" >> "$scratch/samples"
    "$binary" unmount "$mnt"
  done
done

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "$rounds rounds, medians; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
printf '| build | version (ms) | mount (ms) | daemon resident, mounted (MB) | its PSS (MB) | resident after a walk (MB) |\n|---|---:|---:|---:|---:|---:|\n'
for index in "${!binaries[@]}"; do
  pick() { awk -v i="$index" -v k="$1" '$1 == i && $2 == k { print $3 }' "$scratch/samples" | median; }
  printf '| %s | %.1f | %.1f | %.2f | %.2f | %.2f |\n' "${binaries[$index]}" "$(pick version | awk '{ print $1 / 1000 }')" \
    "$(pick mount | awk '{ print $1 / 1000 }')" "$(pick rss | awk '{ print $1 / 1000 }')" "$(pick pss | awk '{ print $1 / 1000 }')" \
    "$(pick rss-walk | awk '{ print $1 / 1000 }')"
done
