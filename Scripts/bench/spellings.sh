#!/usr/bin/env bash
# The daemon's CPU time for lookups of directories spelled twice, as content written on
# Windows has them: COUNT directories, each `DirNNNN/` in one patch and `dirNNNN/` in
# another, with FILES files in each, under -o casefold. Every path is looked up in both
# spellings on a fresh mount, no listing first (lstat of each, then again). Builds side by
# side, rounds interleaved; CPU time only (utime + stime of every daemon thread), which a
# busy machine moves much less than wall time. Run as root.
#
#   Scripts/bench/spellings.sh ROUNDS COUNT FILES BINARY...
#
# Prints a line per measurement (binary, workload, round, daemon CPU seconds), then the
# medians and each binary's ratio to the first.
set -uo pipefail
[ $# -ge 4 ] || { sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 2; }
rounds=$1 count=$2 files=$3; shift 3
work=$(mktemp -d /var/tmp/spellings-bench.XXXXXX)
mnt=$work/mnt list=$work/paths
mkdir -p "$mnt" "$work/main" "$work/upper" "$work/lower"
pid=""
# shellcheck source=daemon.sh
. "$(dirname "$0")/daemon.sh"

for ((d = 0; d < count; d++)); do
  printf -v n '%04d' "$d"
  mkdir "$work/upper/Dir$n" "$work/lower/dir$n"
  for ((f = 0; f < files; f++)); do
    : >"$work/upper/Dir$n/up$f"; : >"$work/lower/dir$n/low$f"
    printf 'Dir%s/up%d\ndir%s/up%d\nDir%s/low%d\ndir%s/low%d\n' "$n" "$f" "$n" "$f" "$n" "$f" "$n" "$f" >>"$list"
  done
done

mount_pb() { # BINARY
  "$1" mount "$work/main" "$mnt" --no-substitution --patch "$work/upper" --patch "$work/lower" \
    -o transport=device,casefold --foreground >>"$work/daemon.log" 2>&1 &
  pid=$!
  wait_mounted
}
lookups() { (cd "$mnt" && python3 -c 'import os, sys
for line in open(sys.argv[1]): os.lstat(line.rstrip("\n"))' "$list"); }

run() { # WORKLOAD
  local c0 c1
  c0=$(cpu)
  lookups || { echo "spellings.sh: $1 failed" >&2; exit 1; }
  c1=$(cpu)
  printf '%s\t%s\t%d\t%.2f\n' "$binary" "$1" "$r" "$(echo "($c1 - $c0) / $ticks" | bc -l)" | tee -a "$work/samples.tsv"
}

for ((r = 1; r <= rounds; r++)); do
  for binary in "$@"; do
    mount_pb "$binary"
    run lookup
    run lookup_again
    unmount_pb "$binary"
  done
done

echo
echo "medians: daemon CPU s; ratio to $1"
awk -F'\t' -v first="$1" '
  { key = $1 SUBSEP $2; n[key]++; v[key, n[key]] = $4; keys[key] = 1; work[$2] = 1; bins[$1] = 1 }
  function median(k,   i, j, t, a, c) {
    c = n[k]
    for (i = 1; i <= c; i++) a[i] = v[k, i]
    for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
  }
  END {
    for (w in work) for (b in bins) {
      m = median(b SUBSEP w); base = median(first SUBSEP w)
      printf "%s\t%s\t%.2f\t%s\n", w, b, m, (base > 0 ? sprintf("%.2fx", m / base) : "-")
    }
  }' "$work/samples.tsv" | sort
