#!/usr/bin/env bash
# The daemon's CPU per `.layers` swap between orders of the same thin patches, and the
# requests a swap costs readers: robust to a busy machine, unlike a swap's time.
#   Scripts/bench/swapcpu.sh [--reread | --readers SECONDS] BINARY [SWAPS] [PATCHES]
# Mounts layers.sh's thin stack (PATCHES, default 1000; made by `layers.sh --shape thin`),
# reads every file both orders show, then swaps SWAPS times (default 200) between the patches'
# list and its reverse, and prints the daemon's utime+stime per swap and the requests per
# swap from `.stats`. --reread reads every such file again after each swap, then as many
# times without swaps: the difference is what swaps cost the readers. --readers SECONDS runs
# layers.sh's four readers for SECONDS alone, then as long while `.layers` is asked to swap
# 100 times a second (SWAPS is not used), and prints the daemon's CPU and requests per read in
# both phases: what the swaps cost the readers while they happen (counts, not the readers'
# times, which are layers.sh's). PERF=FILE records the daemon with `perf record -g`
# meanwhile (during the swaps with --readers). Run as root.
set -euo pipefail
reread=no readers=0
[ "${1:-}" = --reread ] && { reread=yes; shift; }
[ "${1:-}" = --readers ] && { readers=$2; shift 2; }
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
# four readers, SECONDS alone then while swapping (see the header)
with_readers() {
  local seconds=$1 phase r pids c1 c2 a b
  cc -O2 -o "$scratch/pbbench" "$(dirname "$0")/pbbench.c"
  for r in 1 2 3 4; do perl -MList::Util=shuffle -e 'srand(shift); print shuffle(<>)' "$r" "$data/$count.stable" > "$scratch/stable.$r"; done
  for phase in alone swapping; do
    c1=$(counts) a=$(cpu) pids=()
    for r in 1 2 3 4; do "$scratch/pbbench" readany "$mnt" "$scratch/stable.$r" "$seconds" > "$scratch/$phase.$r" & pids+=($!); done
    if [ $phase = swapping ]; then
      [ -n "${PERF:-}" ] && { perf record -g -p "$pid" -o "$PERF" -- sleep "$seconds" > /dev/null 2>&1 & pids+=($!); }
      "$scratch/pbbench" swaploop "$mnt/.layers" "$data/$count.reversed" "$data/$count.list" 100 "$seconds" > "$scratch/swaps" & pids+=($!)
    fi
    for r in "${pids[@]}"; do wait "$r" || true; done
    b=$(cpu) c2=$(counts)
    read -r r1 h1 m1 <<<"$c1"; read -r r2 h2 m2 <<<"$c2"
    awk -v p=$phase -v d=$((b - a)) -v hz="$hz" -v r=$((r2 - r1)) -v m=$((m2 - m1)) \
        -v n="$(cat "$scratch/$phase".[1234] | awk '{ for (i = 1; i < NF; i++) if ($i == "reads") s += $(i + 1) } END { print s + 0 }')" \
        -v f="$(cat "$scratch/$phase".[1234] | awk '{ for (i = 1; i < NF; i++) if ($i == "failures") s += $(i + 1) } END { print s + 0 }')" \
        'BEGIN { printf "readers %s: %d reads (%d failed); daemon CPU %.1f us a read; requests %.2f, lookups resolved %.3f a read\n", p, n, f, d * 1e6 / hz / (n ? n : 1), r / (n ? n : 1), m / (n ? n : 1) }'
  done
  awk '{ printf "swaps made: %d in %s s\n", $2, $4 }' "$scratch/swaps"
}
swap_and_read() { swap "$1"; read_all; }
read_again() { read_all; }
read_all; swap 0; read_all; swap 1; read_all  # everything cached, the swap's memo made
if [ "$readers" != 0 ]; then
  with_readers "$readers"
  echo "last swap: $(stat_of last_invalidation_names) names and $(stat_of last_invalidation_nodes) nodes told to the kernel"
  exit 0
fi
[ -n "${PERF:-}" ] && { perf record -g -p "$pid" -o "$PERF" 2>/dev/null & perf=$!; sleep 1; }
if [ $reread = yes ]; then
  measure "swap, then every file read" "$swaps" swap_and_read
  measure "every file read, no swap" "$swaps" read_again
else
  measure "swap" "$swaps" swap
fi
[ -n "${PERF:-}" ] && { kill -INT "$perf"; wait "$perf" || true; }
echo "last swap: $(stat_of last_invalidation_names) names and $(stat_of last_invalidation_nodes) nodes told to the kernel, exact: $(stat_of last_invalidation_exact)"
