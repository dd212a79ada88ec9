#!/usr/bin/env bash
# Times `proxybundle resolve` and `proxybundle check` on a mount of the bundle bundle.pl makes
# (about 13,700 entries, 58 localizations, bundles inside it) under its 790-file patch, and the
# daemon's resident memory after them. Run as root.
#   Scripts/bench/resources.sh [BINARY] [RUNS]
# BINARY: the proxybundle to time (default: the release build bench.sh uses); RUNS: runs per
# command, the median is printed (default 21).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=${1:-$here/../../.build/release/proxybundle}
runs=${2:-21}
# the data set is made again when bundle.pl changes
data=${PROXYBUNDLE_BENCH_CACHE:-/var/tmp/proxybundle-bench}/resources-$(cksum <"$here/bundle.pl" | cut -d' ' -f1)
[ -d "$data/main" ] || perl "$here/bundle.pl" "$data"
scratch=$(mktemp -d)
mnt=$scratch/mnt
mkdir -p "$mnt" "$scratch/sub"
cleanup() { umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT
"$binary" mount "$data/main" "$mnt" --patch "$data/patch" --substitution "$scratch/sub" 2>"$scratch/mount.err" \
  || { cat "$scratch/mount.err" >&2; exit 1; }

# median ms of RUNS runs of a command (its output discarded; exit status 1 of check is normal)
median_ms() {
  local times=() start end
  for _ in $(seq "$runs"); do
    start=$(date +%s%N)
    "$@" >/dev/null 2>&1 || true
    end=$(date +%s%N)
    times+=($(( (end - start) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk -v n="${#times[@]}" 'NR == int((n + 1) / 2) { printf "%.1f", $1 / 1000 }'
}

entries=$(find "$data/main" | wc -l)
echo "bundle: $entries entries, patch: $(find "$data/patch" -type f | wc -l) files; median of $runs runs"
printf '| command | ms |\n|---|---|\n'
printf '| resolve Localizable.strings --languages fr-CA | %s |\n' "$(median_ms "$binary" resolve "$mnt" Localizable.strings --languages fr-CA)"
printf '| resolve Screen7.strings --languages zh-Hant-HK,en | %s |\n' "$(median_ms "$binary" resolve "$mnt" Screen7.strings --languages zh-Hant-HK,en)"
printf '| resolve Images/Set5/image5 --image --scale 3 | %s |\n' "$(median_ms "$binary" resolve "$mnt" Images/Set5/image5 --image --scale 3)"
printf '| resolve --type strings --languages de-AT | %s |\n' "$(median_ms "$binary" resolve "$mnt" --type strings --languages de-AT)"
printf '| resolve Kit.strings --all-bundles --languages ja | %s |\n' "$(median_ms "$binary" resolve "$mnt" Kit.strings --all-bundles --languages ja)"
runs=$(( runs < 5 ? runs : 5 ))
printf '| check (median of %s) | %s |\n' "$runs" "$(median_ms "$binary" check "$mnt")"
pid=$(awk -v m="$mnt" '$2 == m' /proc/self/mounts >/dev/null; pgrep -f "proxybundle.*$mnt" | head -n 1)
[ -n "$pid" ] && echo "daemon resident memory: $(awk '/VmRSS/ {print $2, $3}' "/proc/$pid/status")"
