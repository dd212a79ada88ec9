#!/usr/bin/env bash
# The daemon's CPU per `.layers` swap between orders of the same thin patches, and the
# requests a swap costs readers: robust to a busy machine, unlike a swap's time.
#   Scripts/bench/swapcpu.sh [--reread] BINARY [SWAPS] [PATCHES]
# Mounts layers.sh's thin stack (PATCHES, default 1000; made by `layers.sh --shape thin`),
# reads every file both orders show, then swaps SWAPS times (default 200) between the patches'
# list and its reverse, and prints the daemon's utime+stime per swap and the requests per
# swap from `.stats`. --reread reads every such file again after each swap, then as many
# times without swaps: the difference is what swaps cost the readers. PERF=FILE records the
# daemon with `perf record -g` meanwhile. Run as root.
set -euo pipefail
reread=no
[ "${1:-}" = --reread ] && { reread=yes; shift; }
binary=$1 swaps=${2:-200} count=${3:-1000}
data=${PROXYBUNDLE_BENCH_CACHE:-/var/tmp/proxybundle-bench}/layers-thin
[ -f "$data/$count.list" ] || { echo "swapcpu.sh: no $data/$count.list (run layers.sh --shape thin first)" >&2; exit 2; }
scratch=$(mktemp -d); mnt=$scratch/mnt; mkdir -p "$mnt" "$scratch/sub"
cleanup() { umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT
"$binary" mount "$data/main" "$mnt" --substitution "$scratch/sub" --patches-from "$data/$count.list" 2>/dev/null
stat_of() { awk -F': ' -v k="$1" '$1 == k { print $2 }' "$mnt/.stats"; }
pid=$(stat_of pid) hz=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
counts() { echo "$(( $(stat_of requests_uring) + $(stat_of requests_device) )) $(stat_of hits) $(stat_of misses)"; }
read_all() { (cd "$mnt" && perl -ne 'chomp; open(my $f, "<", $_) or die "$_: $!\n"; read($f, my $b, 16); close $f' "$data/$count.stable"); }
swap() { if [ $(( $1 % 2 )) = 0 ]; then cat "$data/$count.reversed"; else cat "$data/$count.list"; fi > "$mnt/.layers"; }
# prints LABEL: CPU per run and requests, hits and misses per run, over N runs of COMMAND
measure() {
  local label=$1 n=$2 i; shift 2
  local c1 a b c2
  c1=$(counts) a=$(cpu)
  for i in $(seq 0 $((n - 1))); do "$@" "$i"; done
  b=$(cpu) c2=$(counts)
  read -r r1 h1 m1 <<<"$c1"; read -r r2 h2 m2 <<<"$c2"
  awk -v l="$label" -v d=$((b - a)) -v n="$n" -v hz="$hz" -v r=$((r2 - r1)) -v h=$((h2 - h1)) -v m=$((m2 - m1)) \
    'BEGIN { printf "%s: daemon CPU %.2f ms each; requests %.0f, lookups answered from the cache %.0f, resolved %.0f each (%d runs)\n", l, d * 1000 / hz / n, r / n, h / n, m / n, n }'
}
swap_and_read() { swap "$1"; read_all; }
read_again() { read_all; }
read_all; swap 0; read_all; swap 1; read_all  # everything cached, the swap's memo made
[ -n "${PERF:-}" ] && { perf record -g -p "$pid" -o "$PERF" 2>/dev/null & perf=$!; sleep 1; }
if [ $reread = yes ]; then
  measure "swap, then every file read" "$swaps" swap_and_read
  measure "every file read, no swap" "$swaps" read_again
else
  measure "swap" "$swaps" swap
fi
[ -n "${PERF:-}" ] && { kill -INT "$perf"; wait "$perf" || true; }
echo "last swap: $(stat_of last_invalidation_names) names and $(stat_of last_invalidation_nodes) nodes told to the kernel, exact: $(stat_of last_invalidation_exact)"
