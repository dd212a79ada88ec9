#!/usr/bin/env bash
# Times proxybundle over many patches against the same merged view with fewer layers, side by
# side in one run. Each workload runs on a fresh mount after `drop_caches`; the reference is
# measured right before each row, and with --rounds, rows alternate round by round and the
# medians are printed.
#   Scripts/bench/layers.sh [--shape uniform|thin] [--rounds N] [--swaps SECONDS] [BINARY] [COUNTS...]
# BINARY: the proxybundle to time (default: the release build); COUNTS: patch counts (default
# 1 10 100 1000 10000). Run as root. Prints a markdown table; with PROXYBUNDLE_BENCH_CHART=FILE,
# also draws the ratios as an SVG line chart there (layers-chart.pl).
#
# Shapes:
# - uniform (issue 34's table): 10,000 patch files in 50 top directories, over a main bundle
#   of 1,000 files, spread over N patches; the reference is the same files in one patch.
#   2,000 existing and 2,000 missing names looked up, 200 in each of 10 directories.
# - thin (issue 49, the shape of mods): a main bundle of 5,000 files in 220 directories 2-4
#   deep and N patches of 1-5 entries each anywhere in that tree (files replaced or added,
#   whiteouts, opaque directories, a file made a directory and back; Scripts/bench/thin.pl); the
#   reference is "the same view on two layers": what the patches over the main bundle show,
#   written as one directory and mounted as the main bundle under the substitution. 2,000
#   existing files and 2,000 missing names of the view, in random order, looked up before any
#   listing; a cold walk of the whole view.
# --swaps SECONDS (thin shape, at each count): four readers open and read the files that both
#   orders of the patches show, for SECONDS alone, then while `.layers` swaps 100 times a
#   second between the patches and the same patches in reverse order; prints failed reads, the
#   readers' p99 in both phases, the swaps made and a swap's p50 and p99.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
shape=uniform rounds=1 swaps=0
while [ $# -gt 0 ]; do
  case $1 in
    --shape) shape=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --swaps) swaps=$2; shift 2 ;;
    *) break ;;
  esac
done
case $shape in uniform|thin) ;; *) echo "layers.sh: --shape uniform or thin" >&2; exit 2 ;; esac
binary=${1:-$here/../../.build/release/proxybundle}
shift || true
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1 10 100 1000 10000)
cache=${PROXYBUNDLE_BENCH_CACHE:-/var/tmp/proxybundle-bench}
files=10000 dirs=50
scratch=$(mktemp -d)
mnt=$scratch/mnt
mkdir -p "$mnt"
cleanup() { umount -l "$mnt" 2>/dev/null || true; rm -rf "$scratch"; }
trap cleanup EXIT

# the uniform shape: the main bundle, and the patch files spread over N patch directories
# (N=one: the reference)
make_uniform() {
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
  [ -f "$data/missing" ] || sed 's/p\([0-9]*\)$/q\1/' "$data/names" > "$data/missing"
}

if [ "$shape" = uniform ]; then
  data=$cache/layers
  mkdir -p "$data"
  make_uniform
else
  data=$cache/layers-thin
  mkdir -p "$data"
  perl "$here/thin.pl" "$data" "${counts[@]}"
fi

now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
# mounts what row KIND (a count, or ref-COUNT: its reference) measures
mount_layers() {
  local kind=$1 sub=$scratch/sub-$1
  mkdir -p "$sub"
  case $shape/$kind in
    uniform/ref-*) "$binary" mount "$data/main" "$mnt" --substitution "$sub" --patches-from "$data/one.list" ;;
    uniform/*) "$binary" mount "$data/main" "$mnt" --substitution "$sub" --patches-from "$data/$kind.list" ;;
    thin/ref-*) "$binary" mount "$data/${kind#ref-}.view" "$mnt" --substitution "$sub" ;;
    thin/*) "$binary" mount "$data/main" "$mnt" --substitution "$sub" --patches-from "$data/$kind.list" ;;
  esac 2>/dev/null
}
names_of() { case $shape/$1 in uniform/*) echo "$data/names" ;; thin/*) echo "$data/${1#ref-}.names" ;; esac; }
missing_of() { case $shape/$1 in uniform/*) echo "$data/missing" ;; thin/*) echo "$data/${1#ref-}.missing" ;; esac; }
# unmounts, waiting out a moment's EBUSY (a reader just gone)
unmount() { local i; for i in $(seq 1 50); do umount "$mnt" 2>/dev/null && return 0; grep -q " $mnt " /proc/mounts || return 0; sleep 0.1; done; umount "$mnt"; }
drop() { unmount; sync; echo 2 > /proc/sys/vm/drop_caches; }
daemon_pid() { awk '/^pid:/ { print $2; exit }' "$mnt/.stats"; }

# one row's figures for KIND: mount ms, existing lookups ms, missing lookups ms, walk ms,
# entries, peak KiB
measure() {
  local kind=$1 a b mount_ms exist_ms missing_ms walk_ms entries pid peak
  drop
  a=$(now); mount_layers "$kind"; b=$(now); mount_ms=$(ms "$a" "$b")
  a=$(now); (cd "$mnt" && perl -ne 'chomp; stat($_) or die "stat $_: $!\n"' "$(names_of "$kind")"); b=$(now); exist_ms=$(ms "$a" "$b")
  a=$(now); (cd "$mnt" && perl -ne 'chomp; stat($_) and die "found $_\n"; $!{ENOENT} or die "stat $_: $!\n"' "$(missing_of "$kind")"); b=$(now)
  missing_ms=$(ms "$a" "$b")
  drop
  mount_layers "$kind"
  a=$(now); entries=$(find "$mnt" | wc -l); b=$(now); walk_ms=$(ms "$a" "$b")
  pid=$(daemon_pid)
  peak=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  unmount
  echo "$mount_ms $exist_ms $missing_ms $walk_ms $entries $peak"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) b = 1; printf "%.2f", a / b }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# the readers during swaps (thin shape): see the header
swap_run() {
  local n=$1 seconds=$2 pids=() phase r
  cc -O2 -o "$scratch/pbbench" "$here/pbbench.c"
  for r in 1 2 3 4; do perl -MList::Util=shuffle -e 'srand(shift); print shuffle(<>)' "$r" "$data/$n.stable" > "$scratch/stable.$r"; done
  drop
  mount_layers "$n"
  for phase in alone swapping; do
    pids=()
    for r in 1 2 3 4; do
      "$scratch/pbbench" readany "$mnt" "$scratch/stable.$r" "$seconds" > "$scratch/$phase.$r" & pids+=($!)
    done
    if [ $phase = swapping ]; then
      "$scratch/pbbench" swaploop "$mnt/.layers" "$data/$n.reversed" "$data/$n.list" 100 "$seconds" > "$scratch/swaps" & pids+=($!)
    fi
    for r in "${pids[@]}"; do wait "$r" || true; done
  done
  unmount
  p99() { awk '{ for (i = 1; i < NF; i++) if ($i == "p99") print $(i + 1) }' "$scratch/$1".[1234] | sort -n | tail -1; }
  field() { awk -v f="$2" '{ for (i = 1; i < NF; i++) if ($i == f) s += $(i + 1) } END { print s + 0 }' "$scratch/$1".[1234]; }
  local alone swapping
  alone=$(p99 alone) swapping=$(p99 swapping)
  printf '| %s | %s | %s | %s µs | %s µs (%sx) | %s |\n' "$n" "$(field alone reads)+$(field swapping reads)" \
    "$(( $(field alone failures) + $(field swapping failures) ))" "$alone" "$swapping" "$(ratio "$swapping" "$alone")" \
    "$(awk '{ printf "%d in %s s, p50 %.1f ms, p99 %.1f ms, longest %.1f ms", $2, $4, $7 / 1000, $9 / 1000, $11 / 1000 }' "$scratch/swaps")"
}

case $shape in
  uniform) reference="one patch" ;;
  thin) reference="the same view on two layers" ;;
esac
echo "Shape: $shape; ratios against $reference, same run; $rounds round(s), medians; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| patches | mount ms (reference) | existing names ms (x) | missing names ms (x) | cold walk ms (x, per entry) | daemon peak MiB |"
echo "|---|---|---|---|---|---|"
: > "$scratch/samples"
for round in $(seq 1 "$rounds"); do
  for n in "${counts[@]}"; do
    read -r om oe ox ow oentries _ <<<"$(measure "ref-$n")"
    read -r m e x w entries peak <<<"$(measure "$n")"
    echo "$n $om $m $e $(ratio "$e" "$oe") $x $(ratio "$x" "$ox") $w $(awk -v w="$w" -v n="$entries" -v ow="$ow" -v on="$oentries" \
      'BEGIN { printf "%.2f", (w / n) / ((ow > 0 ? ow : 1) / on) }') $peak" >> "$scratch/samples"
  done
done
for n in "${counts[@]}"; do
  col() { awk -v n="$n" -v c="$1" '$1 == n { print $c }' "$scratch/samples" | median; }
  printf '| %s | %s (%s) | %s (%s) | %s (%s) | %s (%s) | %s |\n' "$n" "$(col 3)" "$(col 2)" "$(col 4)" "$(col 5)" \
    "$(col 6)" "$(col 7)" "$(col 8)" "$(col 9)" "$(awk -v k="$(col 10)" 'BEGIN { printf "%.1f", k / 1024 }')"
  printf '%s\t%s\t%s\t%s\n' "$n" "$(col 5)" "$(col 7)" "$(col 9)" >> "$scratch/ratios.tsv"
done
if [ "$rounds" -gt 1 ]; then
  echo
  echo "Per round (existing, missing, walk ratios):"
  for n in "${counts[@]}"; do
    echo "- $n: $(awk -v n="$n" '$1 == n { printf "%s%s/%s/%s", sep, $5, $7, $9; sep = ", " }' "$scratch/samples")"
  done
fi
if [ "$swaps" != 0 ] && [ "$shape" = thin ]; then
  echo
  echo "| patches | reads (alone+swapping) | failed | reader p99 alone | during swaps | swaps (100/s asked) |"
  echo "|---|---|---|---|---|---|"
  for n in "${counts[@]}"; do swap_run "$n" "$swaps"; done
fi
if [ -n "${PROXYBUNDLE_BENCH_CHART:-}" ]; then
  perl "$here/layers-chart.pl" "$scratch/ratios.tsv" > "$PROXYBUNDLE_BENCH_CHART"
fi
