#!/usr/bin/env bash
# Times proxybundle over many patches against the same merged view on two layers, side by side
# in one run (issue 34's table): the same 10,000 patch files spread over N patches, or held by
# one. Each workload runs on a fresh mount; the ratio is N patches' time over one patch's.
#   Scripts/bench/layers.sh [BINARY] [COUNTS...]
# BINARY: the proxybundle to time (default: the release build); COUNTS: patch counts (default
# 1 10 100 1000 10000). Run as root. Prints a markdown table; with PROXYBUNDLE_BENCH_CHART=FILE,
# also draws the ratios as an SVG line chart there (layers-chart.pl).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=${1:-$here/../../.build/release/proxybundle}
shift || true
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 10 100 1000 10000)
data=${PROXYBUNDLE_BENCH_CACHE:-/var/tmp/proxybundle-bench}/layers
files=10000 dirs=50
scratch=$(mktemp -d)
mnt=$scratch/mnt
mkdir -p "$mnt"
cleanup() { umount -l "$mnt" 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT

# the main bundle, and the patch files spread over N patch directories (N=one: the reference)
make_data() {
  [ -d "$data/main" ] || for d in $(seq 0 $((dirs - 1))); do
    mkdir -p "$data/main/d$d"
    for f in $(seq 0 19); do : > "$data/main/d$d/m$f"; done
  done
  local n
  for n in one "${counts[@]}"; do
    [ -f "$data/$n.list" ] && continue
    perl -e '
      my ($root, $n, $files, $dirs) = @ARGV;
      my $layers = $n eq "one" ? 1 : $n;
      open(my $list, ">", "$root/$n.list.tmp") or die;
      for my $l (0 .. $layers - 1) { print $list "$root/$n/$l\n"; mkdir "$root/$n"; mkdir "$root/$n/$l"; }
      for my $i (0 .. $files - 1) {
        my $l = $i % $layers; my $d = $i % $dirs;
        mkdir "$root/$n/$l/d$d";
        open(my $fh, ">", "$root/$n/$l/d$d/p$i") or die "$!"; close $fh;
      }
      close $list; rename "$root/$n.list.tmp", "$root/$n.list" or die;
    ' "$data" "$n" "$files" "$dirs"
  done
  # the names looked up: every fifth patch file, and as many missing ones
  [ -f "$data/names" ] || perl -e 'my ($files, $dirs) = @ARGV; for (my $i = 0; $i < $files; $i += 5) { print "d" . ($i % $dirs) . "/p$i\n" }' \
    "$files" "$dirs" > "$data/names"
}

now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
mount_layers() { # N
  mkdir -p "$scratch/sub-$1"
  "$binary" mount "$data/main" "$mnt" --substitution "$scratch/sub-$1" --patches-from "$data/$1.list" 2>/dev/null
}
fresh() { # N: a fresh mount, caches dropped
  umount "$mnt" 2>/dev/null || true
  sync; echo 2 > /proc/sys/vm/drop_caches
  mount_layers "$1"
}

# one row's figures for N: mount ms, existing lookups ms, missing lookups ms, walk ms, entries, peak KiB
measure() {
  local n=$1 a b mount_ms exist_ms missing_ms walk_ms entries pid peak
  umount "$mnt" 2>/dev/null || true
  sync; echo 2 > /proc/sys/vm/drop_caches
  a=$(now); mount_layers "$n"; b=$(now); mount_ms=$(ms "$a" "$b")
  a=$(now); (cd "$mnt" && perl -ne 'chomp; stat($_) or die "stat $_: $!\n"' "$data/names"); b=$(now); exist_ms=$(ms "$a" "$b")
  a=$(now); (cd "$mnt" && perl -ne 'chomp; s/p(\d+)$/q$1/; stat($_) and die "found $_\n"' "$data/names"); b=$(now); missing_ms=$(ms "$a" "$b")
  fresh "$n"
  a=$(now); entries=$(find "$mnt" | wc -l); b=$(now); walk_ms=$(ms "$a" "$b")
  pid=$(pgrep -f -- "--serve-checked-mount $data/main" | head -n 1)
  peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  umount "$mnt"
  echo "$mount_ms $exist_ms $missing_ms $walk_ms $entries $peak"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) b = 1; printf "%.2f", a / b }'; }

make_data
echo "| patches | mount ms | existing names ms (x) | missing names ms (x) | cold walk ms (x, per entry) | daemon peak MiB |"
echo "|---|---|---|---|---|---|"
for n in "${counts[@]}"; do
  read -r om oe ox ow oentries _ <<<"$(measure one)"
  read -r m e x w entries peak <<<"$(measure "$n")"
  per_entry=$(awk -v w="$w" -v n="$entries" -v ow="$ow" -v on="$oentries" 'BEGIN { printf "%.2f", (w / n) / ((ow > 0 ? ow : 1) / on) }')
  printf '| %s | %s (%s) | %s (%s) | %s (%s) | %s (%s) | %s |\n' "$n" "$m" "$om" "$e" "$(ratio "$e" "$oe")" \
    "$x" "$(ratio "$x" "$ox")" "$w" "$per_entry" "$(awk -v k="$peak" 'BEGIN { printf "%.1f", k / 1024 }')"
  printf '%s\t%s\t%s\t%s\n' "$n" "$(ratio "$e" "$oe")" "$(ratio "$x" "$ox")" "$per_entry" >> "$scratch/ratios.tsv"
done
if [ -n "${PROXYBUNDLE_BENCH_CHART:-}" ]; then
  perl "$here/layers-chart.pl" "$scratch/ratios.tsv" > "$PROXYBUNDLE_BENCH_CHART"
fi
