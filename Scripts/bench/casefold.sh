#!/usr/bin/env bash
# The daemon's CPU time and the wall time of bench.sh's name workloads with and without
# -o casefold, for one or more builds side by side: on a shared machine the wall times move
# with other people's work, the daemon's own CPU time much less. Run as root, after bench.sh
# made its dataset (scale 1) and its helper.
#
#   Scripts/bench/casefold.sh ROUNDS BINARY...
#
# Each round runs every workload on a fresh mount of each binary, without and with casefold,
# in turn (rounds interleaved): list (ls -f of the 20,000-entry merged directory, then again),
# lookup (lstat of every file by its path, no listing first, then again), missing (20,000
# missing names, then again) and walk (find with a stat of each entry, then again). Prints a
# line per measurement (binary, option, workload, round, wall seconds, daemon CPU seconds,
# daemon peak memory in KiB), then the medians and each binary's ratio casefold/off.
set -uo pipefail
[ $# -ge 2 ] || { sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 2; }
rounds=$1; shift
cache=/var/tmp/proxybundle-bench
data=$(ls -d "$cache"/data-*-s1 | head -1)
pbb=$cache/pbbench-$(md5sum "$(dirname "$0")/pbbench.c" | cut -c1-12)
[ -d "$data" ] && [ -x "$pbb" ] || { echo "casefold.sh: run Scripts/bench.sh once first" >&2; exit 1; }
# shellcheck disable=SC1091
. <(sed 's/^/declare -- /' "$data/meta.env")
work=$(mktemp -d /var/tmp/casefold-bench.XXXXXX)
mnt=$work/mnt up=$work/up list=$work/lookup.list
mkdir -p "$mnt"
cp -a "$data/sub" "$up"
pid=""
# shellcheck source=daemon.sh
. "$(dirname "$0")/daemon.sh"

mount_pb() { # BINARY OPTIONS
  "$1" mount "$data/main" "$mnt" --substitution "$up" -o "$2" --foreground >>"$work/daemon.log" 2>&1 &
  pid=$!
  wait_mounted
}
peak() { awk '/^VmHWM/ { print $2 }' "/proc/$pid/status"; }

run() { # WORKLOAD COMMAND...
  local w=$1; shift
  local c0 t0 t1 c1
  c0=$(cpu); t0=$EPOCHREALTIME
  "$@" >/dev/null || { echo "casefold.sh: $w failed" >&2; exit 1; }
  t1=$EPOCHREALTIME; c1=$(cpu)
  printf '%s\t%s\t%s\t%d\t%.4f\t%.2f\t%s\n' "$binary" "$option" "$w" "$r" "$(echo "$t1 - $t0" | bc)" \
    "$(echo "($c1 - $c0) / $ticks" | bc -l)" "$(peak)" | tee -a "$work/samples.tsv"
}

binary=$1
mount_pb "$1" casefold
(cd "$mnt" && find . -type f ! -path "./$BIG" | sed 's|^\./||' | sort) >"$list"
unmount_pb "$1"

for ((r = 1; r <= rounds; r++)); do
  for binary in "$@"; do
    for option in off casefold; do
      opts=transport=device; [ $option = casefold ] && opts=transport=device,casefold
      for w in list lookup missing walk; do
        mount_pb "$binary" "$opts"
        case $w in
          list) run list ls -f1 "$mnt/$HUGE_DIR"; run list_again ls -f1 "$mnt/$HUGE_DIR" ;;
          lookup) run lookup "$pbb" statlist "$mnt" "$list"; run lookup_again "$pbb" statlist "$mnt" "$list" ;;
          missing) run missing "$pbb" missing "$mnt/$MISSING_DIR" "$MISSING"
                   run missing_again "$pbb" missing "$mnt/$MISSING_DIR" "$MISSING" ;;
          walk) run walk find "$mnt" -printf '%s %m\n'; run walk_again find "$mnt" -printf '%s %m\n' ;;
        esac
        unmount_pb "$binary"
      done
    done
  done
done

echo
echo "medians: wall s, daemon CPU s; ratio casefold/off"
awk -F'\t' '
  { key = $1 SUBSEP $3; n[key, $2]++; wall[key, $2, n[key, $2]] = $5; cpu[key, $2, n[key, $2]] = $6; keys[key] = 1 }
  function median(a, k, o, count,   i, j, t, v) {
    for (i = 1; i <= count; i++) v[i] = a[k, o, i]
    for (i = 1; i <= count; i++) for (j = i + 1; j <= count; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return count % 2 ? v[(count + 1) / 2] : (v[count / 2] + v[count / 2 + 1]) / 2
  }
  END {
    for (key in keys) {
      split(key, p, SUBSEP)
      c = n[key, "off"]
      wo = median(wall, key, "off", c); wc = median(wall, key, "casefold", c)
      co = median(cpu, key, "off", c); cc = median(cpu, key, "casefold", c)
      wr = wo > 0 ? sprintf("%.2fx", wc / wo) : "-"
      cr = co > 0 ? sprintf("%.2fx", cc / co) : "-"
      printf "%s\t%s\twall %.3f %.3f (%s)\tcpu %.2f %.2f (%s)\n", p[1], p[2], wo, wc, wr, co, cc, cr
    }
  }' "$work/samples.tsv" | sort
