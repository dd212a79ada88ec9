#!/usr/bin/env bash
# Benchmarks proxybundle against kernel overlayfs, fuse-overlayfs, unionfs-fuse and mergerfs over
# identical layers, and checks each one's overlay semantics on the way. Run as root.
#
#   Scripts/bench.sh [--quick] [--scale F] [--rounds N] [--only IMPL[,IMPL...]] [--transports LIST]
#                    [--binary PATH] [--out DIR] [--memory-names N] [--cache DIR] [--groups LIST]
#
#   --scale F          grows or shrinks the dataset (1 = 20,000 files in 1,000 directories, a
#                      20,000-entry merged directory, a 1 GiB file); default 1
#   --quick            --scale 0.05 and one round (under a minute)
#   --rounds N         rounds, interleaved across implementations; medians are reported (default 3)
#   --only LIST        any of: kernel, proxybundle, fuse-overlayfs, unionfs-fuse, mergerfs
#   --transports LIST  proxybundle's transports, a column each: device (/dev/fuse: the column
#                      proxybundle), uring (FUSE over io_uring: proxybundle-uring; the fuse
#                      module's enable_uring is switched on for the run, then back), casefold
#                      (/dev/fuse with -o casefold: proxybundle-casefold); default device
#   --binary PATH      the proxybundle binary (or PROXYBUNDLE_BIN); default: swift build -c release -Xswiftc -static-executable
#   --out DIR          results (results.md, results.json, samples.tsv, logs); default under --cache
#   --memory-names N   only measure proxybundle's memory per cached name, walking N names
#   --cache DIR        datasets, helper and scratch space (default /var/tmp/proxybundle-bench)
#   --groups LIST      only these workload groups: walk, list, read, seq, rand, lookup, missing,
#                      stat, statfs, invalidate, create, copyup, stack (default all; statfs: a FUSE
#                      round trip each; stack: the dataset over four stacked layers, kernel
#                      overlayfs and proxybundle only)
#
# Datasets are generated once per scale (deterministic, fixed seed) and reused.
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
ALL_IMPLS=(kernel proxybundle fuse-overlayfs unionfs-fuse mergerfs)

scale=1 rounds="" only="" binary="${PROXYBUNDLE_BIN:-}" out="" memnames=0 groups="" transports=device
cache=/var/tmp/proxybundle-bench
usage() { sed -n '2,25s/^# \{0,1\}//p' "$0"; }
while [ $# -gt 0 ]; do
  case $1 in
    --quick) scale=0.05; rounds=${rounds:-1} ;;
    --scale) scale=${2:?}; shift ;;
    --rounds) rounds=${2:?}; shift ;;
    --only) only=${2:?}; shift ;;
    --binary) binary=${2:?}; shift ;;
    --out) out=${2:?}; shift ;;
    --memory-names) memnames=${2:?}; shift ;;
    --cache) cache=${2:?}; shift ;;
    --groups) groups=${2:?}; shift ;;
    --transports) transports=${2:?}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
rounds=${rounds:-3}
say() { echo "bench: $*" >&2; }
die() { echo "bench.sh: $*" >&2; exit 1; }

[[ $scale =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v s="$scale" 'BEGIN{exit !(s > 0)}' || die "--scale wants a positive number"
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die "--rounds wants a positive integer"
[[ $memnames =~ ^[0-9]+$ ]] || die "--memory-names wants a number"
[ "$(id -u)" -eq 0 ] || die "must run as root (kernel overlayfs, mounts and drop_caches need it)"

impls=()
if [ "$memnames" -gt 0 ]; then
  impls=(proxybundle)
elif [ -n "$only" ]; then
  IFS=, read -r -a wanted <<<"$only"
  for i in "${ALL_IMPLS[@]}"; do   # keep the canonical order
    for w in "${wanted[@]}"; do [ "$w" = "$i" ] && impls+=("$i"); done
  done
  for w in "${wanted[@]}"; do
    [[ " ${ALL_IMPLS[*]} " == *" $w "* ]] || die "--only: unknown implementation $w (${ALL_IMPLS[*]})"
  done
else
  impls=("${ALL_IMPLS[@]}")
fi
# proxybundle's column for each transport asked for, in its place
IFS=, read -r -a wanted_transports <<<"$transports"
pb_columns=()
for t in "${wanted_transports[@]}"; do
  case $t in
    device) pb_columns+=(proxybundle) ;;
    uring) pb_columns+=(proxybundle-uring) ;;
    casefold) pb_columns+=(proxybundle-casefold) ;;
    *) die "--transports: unknown transport $t (device, uring, casefold)" ;;
  esac
done
[ ${#pb_columns[@]} -gt 0 ] || die "--transports wants device, uring or both"
columns=()
for i in "${impls[@]}"; do
  if [ "$i" = proxybundle ]; then columns+=("${pb_columns[@]}"); else columns+=("$i"); fi
done
impls=("${columns[@]}")
has_impl() { [[ " ${impls[*]} " == *" $1 "* ]]; }
# proxybundle over either transport
is_pb() { [ "$1" = proxybundle ] || [ "$1" = proxybundle-uring ] || [ "$1" = proxybundle-casefold ]; }
has_pb() { has_impl proxybundle || has_impl proxybundle-uring || has_impl proxybundle-casefold; }
# the mount options of proxybundle's column
pb_options() { if [ "$1" = proxybundle-casefold ]; then echo "transport=device,casefold"; else echo "transport=$(pb_transport "$1")"; fi; }
pb_transport() { if [ "$1" = proxybundle-uring ]; then echo uring; else echo device; fi; }

# ---------------------------------------------------------------------------- packages, binary
need=()
command -v fio >/dev/null || need+=(fio)
has_pb && ! command -v fusermount3 >/dev/null && need+=(fuse3)
has_impl fuse-overlayfs && ! command -v fuse-overlayfs >/dev/null && need+=(fuse-overlayfs)
has_impl unionfs-fuse && ! command -v unionfs >/dev/null && need+=(unionfs-fuse)
has_impl mergerfs && ! command -v mergerfs >/dev/null && need+=(mergerfs)
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq "${need[@]}"; } >/dev/null \
    || die "could not install ${need[*]}"
fi
has_impl kernel && ! grep -qw overlay /proc/filesystems && { modprobe overlay 2>/dev/null || die "no overlay module"; }

if has_pb; then
  if [ -z "$binary" ]; then
    say "building proxybundle (swift build -c release -Xswiftc -static-executable)"
    export PATH=/opt/swift/usr/bin:$PATH
    (cd "$REPO" && timeout 3600 swift build -c release -Xswiftc -static-executable >&2) || die "swift build failed"
    binary=$REPO/.build/release/proxybundle
  fi
  [ -x "$binary" ] || die "proxybundle binary $binary is not executable"
  binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
fi

mkdir -p "$cache" || die "cannot create $cache"
cache=$(cd "$cache" && pwd)
stamp=$(date -u +%Y%m%d-%H%M%S)
out=${out:-$cache/results-$stamp}
mkdir -p "$out" || die "cannot create $out"
out=$(cd "$out" && pwd)

# the syscall loops: C when a compiler is present, else the Perl equivalent
helper_sum=$(md5sum "$HERE/bench/pbbench.c" | cut -c1-12)
PBB=("$cache/pbbench-$helper_sum")
if [ ! -x "${PBB[0]}" ]; then
  cc=$(command -v cc || command -v gcc || command -v clang || echo /opt/swift/usr/bin/clang)
  if [ -x "$cc" ] && "$cc" -O2 -o "${PBB[0]}.tmp.$$" "$HERE/bench/pbbench.c" 2>/dev/null; then
    mv "${PBB[0]}.tmp.$$" "${PBB[0]}"
  else
    say "no C compiler: using the Perl helper (stat-heavy figures include more of its own time)"
    PBB=(perl "$HERE/bench/pbbench.pl")
  fi
fi

# ---------------------------------------------------------------------------- scratch + cleanup
run=$cache/run-$$
mainro=$run/mainro
layersro=$run/layers   # the stacked group's patches, read-only: patch1, patch2 and kernel-patch1, kernel-patch2
declare -A DPID   # implementation -> its daemon's pid while it runs
# bash reaps children as they exit, so a pid is checked to still be our child before a signal
ours() {
  local s f
  [ -n "$1" ] && read -r s 2>/dev/null < "/proc/$1/stat" || return 1
  read -r -a f <<<"${s##*) }"   # after the command name: state, parent pid, ...
  [ "${f[1]}" = "$$" ]
}
mounted_under() { awk -v p="$1/" '{ gsub(/\\040/, " ", $2); if (index($2 "/", p) == 1) print $2 }' /proc/self/mounts; }
cleanup() {
  trap - EXIT INT TERM
  local m pid
  [ -n "$uring_saved" ] && echo "$uring_saved" > "$uring_switch"
  [ -n "${CHILD:-}" ] && kill -TERM -- "-$CHILD" 2>/dev/null
  for m in $(mounted_under "$run" | sort -r); do
    [ "$m" = "$mainro" ] || [ "${m#"$layersro"/}" != "$m" ] && continue
    timeout 10 umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
  done
  for pid in "${DPID[@]}"; do ours "$pid" && kill "$pid" 2>/dev/null; done
  sleep 0.2
  for pid in "${DPID[@]}"; do ours "$pid" && kill -9 "$pid" 2>/dev/null; done
  for m in $(mounted_under "$run" | sort -r); do timeout 10 umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  if [ -d "$run" ] && [ -z "$(mounted_under "$run")" ]; then rm -rf --one-file-system "$run"; fi
}
uring_switch=/sys/module/fuse/parameters/enable_uring uring_saved=""
trap cleanup EXIT
# FUSE over io_uring needs the fuse module's switch on for the run; cleanup() puts it back
if has_impl proxybundle-uring; then
  [ -w "$uring_switch" ] || die "--transports uring: this kernel has no FUSE over io_uring ($uring_switch)"
  saved=$(cat "$uring_switch")
  echo Y > "$uring_switch" || die "cannot switch $uring_switch on"
  uring_saved=$saved
fi
trap 'say interrupted; exit 130' INT
trap 'say terminated; exit 143' TERM

# every step gets at most this long
step_limit=$(awk -v s="$scale" 'BEGIN{ printf "%d", 60 + 600 * s }')
drop_caches() { timeout 300 sync; echo 3 > /proc/sys/vm/drop_caches; }
ELAPSED=0
FNS=$run/functions.sh
# timed LIMIT CMD...: runs CMD (a program or a function of this script) in a child bash with a
# timeout; the child times CMD itself, so its own start-up is not counted. Sets ELAPSED (s).
timed() {
  local limit=$1; shift
  bounded "$limit" timed_inside "$@" > "$run/times" || return 1
  ELAPSED=$(awk '{ printf "%.4f", $2 - $1 }' "$run/times")
}
timed_inside() { local t0=$EPOCHREALTIME; "$@" || return $?; echo "$t0 $EPOCHREALTIME"; }
# bounded LIMIT CMD...: the same, untimed. timeout runs in the background and is waited for, so
# that INT and TERM reach this script's traps at once (cleanup() stops it: its process group).
CHILD=""
bounded() {
  local limit=$1 rc; shift
  timeout "$limit" bash -c '. "$1"; shift; "$@"' _ "$FNS" "$@" &
  CHILD=$!
  wait "$CHILD"; rc=$?
  CHILD=""
  return $rc
}
vm_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }

# ---------------------------------------------------------------------------- mounting
MERGERFS_OPTS=category.create=ff,category.action=ff,category.search=ff,func.getattr=ff
MERGERFS_OPTS+=,cache.files=full,cache.entry=86400,cache.attr=86400,cache.negative_entry=86400
MERGERFS_OPTS+=,cache.readdir=true,cache.statfs=86400,cache.symlinks=true,dropcacheonclose=false
# unionfs-fuse raises its open-file limit to max_files and dies if that is above the hard limit
unionfs_files=$(ulimit -Hn); [ "$unionfs_files" = unlimited ] || [ "$unionfs_files" -gt 65536 ] && unionfs_files=65536
UNIONFS_OPTS=cow,max_files=$unionfs_files,kernel_cache,entry_timeout=86400,attr_timeout=86400,negative_timeout=86400
dir_of() { echo "$run/$1"; }

# A layout is "two" (the main bundle under a substitution) or "stack" (the main bundle, patch2,
# patch1 and a substitution, top last); each has its own substitution and work directory.
stack_capable() { [ "$1" = kernel ] || is_pb "$1"; }
upper_of() { # IMPL LAYOUT
  if [ "$2" = stack ]; then echo "$(dir_of "$1")/stack-up"; else echo "$(dir_of "$1")/up"; fi
}
mount_impl() { # IMPL [LAYOUT]
  local impl=$1 layout=${2:-two} d; d=$(dir_of "$1")
  local up wk mnt=$d/mnt log=$d/daemon.log pid="" lower=$mainro patches=()
  up=$(upper_of "$impl" "$layout") wk=${up%up}work
  if [ "$layout" = stack ]; then
    stack_capable "$impl" || { say "$impl does not take stacked layers"; return 1; }
    lower=$layersro/kernel-patch1:$layersro/kernel-patch2:$mainro
    patches=(--patch "$layersro/patch1" --patch "$layersro/patch2")
  fi
  case $impl in
    kernel)
      timeout 30 mount -t overlay overlay -o "lowerdir=$lower,upperdir=$up,workdir=$wk" "$mnt" 2>>"$log" || return 1 ;;
    proxybundle|proxybundle-uring|proxybundle-casefold)
      "$binary" mount "$mainro" "$mnt" --substitution "$up" "${patches[@]}" -o "$(pb_options "$impl")" \
        --foreground >>"$log" 2>&1 & pid=$! ;;
    fuse-overlayfs)
      fuse-overlayfs -f -o "lowerdir=$mainro,upperdir=$up,workdir=$wk,timeout=86400" "$mnt" >>"$log" 2>&1 & pid=$! ;;
    unionfs-fuse)
      unionfs -f -o "$UNIONFS_OPTS" "$up=RW:$mainro=RO" "$mnt" >>"$log" 2>&1 & pid=$! ;;
    mergerfs)
      mergerfs -f -o "$MERGERFS_OPTS" "$up=RW:$mainro=RO" "$mnt" >>"$log" 2>&1 & pid=$! ;;
  esac
  DPID[$impl]=$pid
  local deadline=$((SECONDS + 20))
  while [ $SECONDS -lt $deadline ]; do
    if mountpoint -q "$mnt" && timeout 5 stat "$mnt/." >/dev/null 2>&1; then return 0; fi
    if [ -n "$pid" ] && ! ours "$pid"; then
      say "$impl died while mounting: $(tail -3 "$log" | tr '\n' ' ')"; return 1
    fi
    sleep 0.01
  done
  say "$impl did not mount within 20 s"
  return 1
}

unmount_impl() {
  local impl=$1 d; d=$(dir_of "$1")
  local mnt=$d/mnt pid=${DPID[$1]:-} deadline
  if mountpoint -q "$mnt"; then
    if is_pb "$impl"; then
      timeout 30 "$binary" unmount "$mnt" >>"$d/daemon.log" 2>&1
    else
      timeout 30 umount "$mnt" 2>>"$d/daemon.log"
    fi
  fi
  if [ -n "$pid" ]; then
    deadline=$((SECONDS + 10))
    while ours "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.01; done
    ours "$pid" && { kill "$pid"; sleep 1; ours "$pid" && kill -9 "$pid"; }
    wait "$pid" 2>/dev/null
  fi
  DPID[$impl]=""
  mountpoint -q "$mnt" && { umount "$mnt" 2>/dev/null || umount -l "$mnt"; }
  return 0
}

# kernel overlayfs reads whiteouts as 0/0 character devices and opaque directories as an xattr
to_kernel_whiteouts() {
  local w d n
  while IFS= read -r -d '' w; do
    d=${w%/*} n=${w##*/.wh.}
    rm -f "$w"
    if [ "$n" = .wh..opq ]; then setfattr -n trusted.overlay.opaque -v y "$d"; else mknod "$d/$n" c 0 0; fi
  done < <(find "$1" -name '.wh.*' -print0)
}

# a fresh copy of the substitution for one implementation and layout (not timed); both layouts
# start from the same substitution
fresh_layers() { # IMPL [LAYOUT]
  local impl=$1 d up; d=$(dir_of "$1") up=$(upper_of "$1" "${2:-two}")
  rm -rf --one-file-system "$up" "${up%up}work"
  mkdir -p "${up%up}work" "$d/mnt"
  timeout 600 cp -a "$data/sub" "$up" || die "copying the substitution failed"
  [ "$impl" = kernel ] && to_kernel_whiteouts "$up"
  return 0
}

# ---------------------------------------------------------------------------- dataset
dataset() { # DIR SCALE: generates once, under a lock
  local dir=$1 s=$2 p
  exec 9>"$cache/lock"
  flock 9
  if [ ! -f "$dir/.complete" ]; then
    say "generating the dataset at scale $s in $dir"
    rm -rf --one-file-system "$dir"
    timeout 3600 perl "$HERE/bench/generate.pl" "$dir" "$s" || die "dataset generation failed"
    # the stacked layers' patches as kernel overlayfs reads them (their files hard links)
    mkdir -p "$dir/stack/kernel"
    for p in patch1 patch2; do
      cp -al "$dir/stack/$p" "$dir/stack/kernel/$p" && to_kernel_whiteouts "$dir/stack/kernel/$p" \
        || die "converting $p for kernel overlayfs failed"
    done
    touch "$dir/.complete"
  fi
  flock -u 9
}
fingerprint() { find "$1" -printf '%P %s %T@ %m\n' | LC_ALL=C sort | md5sum | cut -d' ' -f1; }

# ============================================================================ memory per name
if [ "$memnames" -gt 0 ]; then
  ndata=$cache/names-$memnames
  exec 9>"$cache/lock"; flock 9
  if [ ! -f "$ndata/.complete" ]; then
    say "generating $memnames empty files in $ndata"
    rm -rf --one-file-system "$ndata"
    timeout 3600 perl -e '
      my ($dir, $n) = @ARGV; mkdir $dir; mkdir "$dir/main"; mkdir "$dir/sub";
      for my $i (0 .. $n - 1) {
        my $d = sprintf("%s/main/d%05d", $dir, int($i / 1000));
        mkdir $d if $i % 1000 == 0;
        open(my $f, ">", sprintf("%s/f%07d", $d, $i)) or die "$!\n"; close $f;
      }' "$ndata" "$memnames" || die "generating failed"
    touch "$ndata/.complete"
  fi
  flock -u 9
  data=$ndata
  mkdir -p "$mainro" && mount --bind "$data/main" "$mainro" && mount -o remount,bind,ro "$mainro" || die "bind mount failed"
  d=$(dir_of proxybundle); mkdir -p "$d/mnt" "$d/up"
  mount_impl proxybundle || die "mount failed"
  pid=${DPID[proxybundle]}
  ndirs=$(( (memnames + 999) / 1000 )); half=$(( ndirs / 2 ))
  dirs_a=(); dirs_b=()
  for ((i = 0; i < ndirs; i++)); do
    p=$(printf '%s/mnt/d%05d' "$d" "$i")
    if [ $i -lt $half ]; then dirs_a+=("$p"); else dirs_b+=("$p"); fi
  done
  rss0=$(vm_kib "$pid" VmRSS)
  [ $half -gt 0 ] && { timeout 3600 find "${dirs_a[@]}" -printf '%s\n' >/dev/null || die "walk failed"; }
  rss1=$(vm_kib "$pid" VmRSS); n1=$(( half * 1000 < memnames ? half * 1000 + half : memnames + half ))
  timeout 3600 find "${dirs_b[@]}" -printf '%s\n' >/dev/null || die "walk failed"
  rss2=$(vm_kib "$pid" VmRSS); hwm=$(vm_kib "$pid" VmHWM)
  unmount_impl proxybundle
  n2=$(( memnames + ndirs ))
  awk -v n="$memnames" -v n1="$n1" -v n2="$n2" -v r0="$rss0" -v r1="$rss1" -v r2="$rss2" -v hwm="$hwm" \
      -v date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -v kernel="$(uname -r)" -v cores="$(nproc)" -v out="$out" '
    BEGIN {
      second = n1 > 0 ? (r2 - r1) * 1024 / (n2 - n1) : 0
      overall = (r2 - r0) * 1024 / n2
      md = out "/memory-names.md"; js = out "/memory-names.json"
      printf "proxybundle memory per cached name (%s, kernel %s, %d cores)\n\n", date, kernel, cores > md
      printf "RSS is read before the walk, after walking half of the names, and after all of them; the second half shows the growth rate (table resizes make it uneven), the overall figure the average.\n\n" > md
      printf "| names walked | RSS before | RSS after half | RSS after all | peak | bytes per name (second half) | bytes per name (overall) | for 1,000,000 names |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n" > md
      printf "| %d | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %.0f | %.0f | %.0f MiB |\n", n2, r0/1024, r1/1024, r2/1024, hwm/1024, second, overall, overall * 1e6 / 1048576 > md
      printf "{\"date\":\"%s\",\"kernel\":\"%s\",\"cores\":%d,\"names\":%d,\"rss_before_kib\":%d,\"rss_half_kib\":%d,\"rss_after_kib\":%d,\"hwm_kib\":%d,\"bytes_per_name_second_half\":%.1f,\"bytes_per_name_overall\":%.1f,\"mib_per_million_names\":%.1f}\n", date, kernel, cores, n2, r0, r1, r2, hwm, second, overall, overall * 1e6 / 1048576 > js
      close(md); while ((getline l < md) > 0) print l
    }'
  exit 0
fi

# ============================================================================ main run
data=$cache/data-$(md5sum "$HERE/bench/generate.pl" | cut -c1-8)-s$scale
dataset "$data" "$scale"
# shellcheck disable=SC1091
. "$data/meta.env"
STATFS_CALLS=$(awk -v s="$scale" 'BEGIN{ n = int(20000 * s); print (n < 1000 ? 1000 : n) }')
mkdir -p "$mainro" && mount --bind "$data/main" "$mainro" && mount -o remount,bind,ro "$mainro" \
  || die "read-only bind mount of the main bundle failed"
main_print=$(fingerprint "$data/main")
for impl in "${impls[@]}"; do mkdir -p "$(dir_of "$impl")"; done

samples=$out/samples.tsv checks=$out/correctness.tsv
: > "$samples"; : > "$checks"
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >> "$samples"; say "round $3 $2 $1: $4"; }
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------- correctness
check() { # IMPL NAME: records the outcome of the command that follows
  local impl=$1 name=$2; shift 2
  if bounded 300 "$@" >/dev/null 2>&1; then printf '%s\t%s\tok\n' "$impl" "$name" >> "$checks"
  else printf '%s\t%s\tfail\n' "$impl" "$name" >> "$checks"; say "check $name failed for $impl"; fi
}
check_listing() { # MNT: the merged directory lists every name once
  local names; names=$(ls -A "$1/$HUGE_DIR") || return 1
  [ "$(printf '%s\n' "$names" | wc -l)" -eq "$HUGE" ] && [ -z "$(printf '%s\n' "$names" | sort | uniq -d)" ]
}
check_whiteouts() { # MNT
  { [ -z "$WHITEOUT_SAMPLE" ] || [ ! -e "$1/$WHITEOUT_SAMPLE" ]; } &&
  [ "$(ls -A "$1/$OPAQUE_DIR" | wc -l)" -eq "$OPAQUE_ENTRIES" ] &&
  [ -z "$(find "$1" -name '.wh.*' -print -quit)" ]
}
check_entries() { # MNT: the walk sees exactly the expected names (control files aside)
  [ "$(find "$1" -mindepth 1 | wc -l)" -eq "$ENTRIES" ]
}
check_write() { # MNT UP
  echo "written through the mount" > "$1/Contents/bench-check.txt" &&
  [ -f "$2/Contents/bench-check.txt" ] && [ ! -e "$data/main/Contents/bench-check.txt" ]
}
check_copyup() { # MNT UP
  local f size; f=$(head -1 "$data/copyup.list"); size=$(stat -c %s "$data/main/$f")
  echo "appended by the check" >> "$1/$f" && sync &&
  [ "$(stat -c %s "$1/$f")" -eq $((size + 22)) ] && [ -f "$2/$f" ] && [ "$(stat -c %s "$data/main/$f")" -eq "$size" ]
}
correctness() {
  local impl=$1 d; d=$(dir_of "$1")
  fresh_layers "$impl"
  if ! mount_impl "$impl"; then
    printf '%s\tmount\tfail\n' "$impl" >> "$checks"; unmount_impl "$impl"; return
  fi
  local m=$d/mnt
  check "$impl" shadowing cmp "$m/$SHADOW_SAMPLE" "$data/sub/$SHADOW_SAMPLE"
  check "$impl" merged_listing check_listing "$m"
  check "$impl" new_files cmp "$m/$NEW_SAMPLE" "$data/sub/$NEW_SAMPLE"
  check "$impl" whiteouts check_whiteouts "$m"
  check "$impl" entries check_entries "$m"
  check "$impl" write_in_substitution check_write "$m" "$d/up"
  check "$impl" copy_up check_copyup "$m" "$d/up"
  unmount_impl "$impl"
  check "$impl" main_untouched test "$(fingerprint "$data/main")" = "$main_print"
  [ "$stacked" = 1 ] && stack_capable "$impl" && correctness_stack "$impl"
}

# the stacked layers: the view is compared with the generator's resolution of the stack (and
# proxybundle's with kernel overlayfs's), names and types of every entry, content of a sample
stack_view() { # ROOT SAMPLE: every entry below ROOT with its type, then the hash of each sampled file
  (cd "$1" && find . -mindepth 1 -printf '%P\t%y\n' | LC_ALL=C sort && xargs -d '\n' -a "$2" md5sum | LC_ALL=C sort)
}
stack_layer() { case $1 in main|sub) echo "$data/$1" ;; *) echo "$data/stack/$1" ;; esac; }
stack_reference() { # SAMPLE: the same from the generator's view, each sampled file read from its layer
  local layer
  cut -f1,2 "$data/stack-view.tsv" | LC_ALL=C sort
  for layer in sub patch1 patch2 main; do
    (cd "$(stack_layer "$layer")" && awk -F'\t' -v l="$layer" 'NR == FNR { s[$1]; next } $3 == l && ($1 in s) { print $1 }' \
       "$1" "$data/stack-view.tsv" | xargs -r -d '\n' md5sum)
  done | LC_ALL=C sort
}
check_stack_view() { # MNT OUT: writes the mount's view to OUT
  stack_view "$1" "$stack_sample" > "$2" && cmp -s "$2" "$stack_expected"
}
check_stack_copyup() { # MNT UP: a file of each patch, appended to, is copied up with the patch's content
  local f p size
  for f in $(head -2 "$data/stack-copyup.list"); do
    p=$data/stack/patch1/$f; [ -f "$p" ] || p=$data/stack/patch2/$f
    size=$(stat -c %s "$p")
    echo "appended by the check" >> "$1/$f" && sync &&
    [ "$(stat -c %s "$1/$f")" -eq $((size + 22)) ] && cmp -s -n "$size" "$p" "$2/$f" &&
    [ "$(stat -c %s "$2/$f")" -eq $((size + 22)) ] && [ ! -e "$data/main/$f" ] || return 1
  done
}
patches_print() { # IMPL: the fingerprint of the patches it mounts
  local k=""; [ "$1" = kernel ] && k=kernel/
  echo "$(fingerprint "$data/stack/${k}patch1") $(fingerprint "$data/stack/${k}patch2")"
}
correctness_stack() {
  local impl=$1 d; d=$(dir_of "$1")
  fresh_layers "$impl" stack
  if ! mount_impl "$impl" stack; then
    printf '%s\tstack_mount\tfail\n' "$impl" >> "$checks"; unmount_impl "$impl"; return
  fi
  local m=$d/mnt kview; kview=$(dir_of kernel)/stack-view
  check "$impl" stack_view check_stack_view "$m" "$d/stack-view"
  [ "$impl" != kernel ] && [ -s "$kview" ] && check "$impl" stack_same_as_kernel cmp "$d/stack-view" "$kview"
  check "$impl" stack_copy_up check_stack_copyup "$m" "$(upper_of "$impl" stack)"
  unmount_impl "$impl"
  check "$impl" patches_untouched test "$(patches_print "$impl")" = "${patches_prints[$impl]}"
}

# ---------------------------------------------------------------------------- workloads
# Each starts on a fresh mount; "cold" ones after sync and drop_caches.
WORKLOADS=(walk_cold walk_warm walk_types_cold list_huge list_huge_warm read_small_cold read_small_sorted seq_cold seq_warm rand4k lookup lookup_again missing missing_again stat_one statfs invalidate create_sync copyup
           stack_walk_cold stack_walk_warm stack_read_small_cold stack_missing stack_copyup)
describe() {
  case $1 in
    walk_cold) echo "metadata walk, cold ($ENTRIES entries, find with a stat of each)" ;;
    walk_warm) echo "metadata walk, warm" ;;
    walk_types_cold) echo "walk by type (find -type f, no stat), cold" ;;
    list_huge) echo "list the $HUGE-entry merged directory, cold" ;;
    list_huge_warm) echo "list it again (ls -f), warm" ;;
    read_small_cold) echo "read every small file, cold" ;;
    read_small_sorted) echo "read every small file, cold, in sorted path order" ;;
    seq_cold) echo "sequential read of the $BIG_MIB MiB file, cold" ;;
    seq_warm) echo "sequential read of the $BIG_MIB MiB file, warm" ;;
    rand4k) echo "$RANDREADS random 4 KiB reads (fio psync), cold" ;;
    lookup) echo "lstat of every file by its path, no listing first, fresh mount" ;;
    lookup_again) echo "the same lstats again" ;;
    missing) echo "$MISSING lookups of missing names, first time" ;;
    missing_again) echo "the same lookups again (missing names known)" ;;
    stat_one) echo "$STATS stats of one file" ;;
    statfs) echo "$STATFS_CALLS statfs calls (a FUSE round trip each)" ;;
    invalidate) echo "out-of-band change made visible (.invalidate; peers: remount)" ;;
    create_sync) echo "create $CREATE_FILES 4 KiB files, then sync" ;;
    copyup) echo "append a line to $COPYUP main-only files (copy-up), cold" ;;
    stack_walk_cold) echo "stacked layers: metadata walk, cold ($STACK_ENTRIES entries)" ;;
    stack_walk_warm) echo "stacked layers: metadata walk, warm" ;;
    stack_read_small_cold) echo "stacked layers: read every small file, cold" ;;
    stack_missing) echo "stacked layers: $MISSING lookups of missing names" ;;
    stack_copyup) echo "stacked layers: append a line to $STACK_COPYUP files only in a patch (copy-up from a middle layer), cold" ;;
  esac
}
target() {
  case $1 in
    # issue 25's figures to beat
    walk_cold) echo 1.1 ;; walk_warm) echo 1.0 ;; walk_types_cold) echo 1.1 ;; list_huge_warm) echo 0.37 ;; read_small_cold) echo 1.2 ;;
    read_small_sorted) echo 1.2 ;; seq_cold) echo 1.05 ;; seq_warm) echo 1.1 ;; missing_again) echo 0.85 ;;
    create_sync) echo 1.3 ;; copyup) echo 1.0 ;; *) echo "" ;;
  esac
}

group_walk() {
  local impl=$1 r=$2 m; m=$(dir_of "$1")/mnt
  drop_caches
  mount_impl "$impl" || { record "$impl" walk_cold "$r" fail; record "$impl" walk_warm "$r" fail; return; }
  local pid=${DPID[$impl]} rss0=""
  [ -n "$pid" ] && rss0=$(vm_kib "$pid" VmRSS)
  if timed "$step_limit" walk "$m"; then record "$impl" walk_cold "$r" "$ELAPSED"
  else record "$impl" walk_cold "$r" fail; fi
  if timed "$step_limit" walk "$m"; then record "$impl" walk_warm "$r" "$ELAPSED"
  else record "$impl" walk_warm "$r" fail; fi
  if [ -n "$pid" ]; then
    local hwm; hwm=$(vm_kib "$pid" VmHWM)
    record "$impl" memory_kib "$r" "$hwm"
    record "$impl" bytes_per_name "$r" "$(awk -v a="$hwm" -v b="$rss0" -v n="$ENTRIES" 'BEGIN{ printf "%.0f", (a - b) * 1024 / n }')"
  fi
  unmount_impl "$impl"
  simple "$impl" "$r" walk_types_cold cold walk_types "$m"
}

simple() { # IMPL ROUND WORKLOAD cold|warm COMMAND... (the command may use $m; stack_* workloads run on the stacked layers)
  local impl=$1 r=$2 w=$3 temp=$4 layout=two; shift 4
  [[ $w == stack_* ]] && layout=stack
  [ "$temp" = cold ] && drop_caches
  mount_impl "$impl" "$layout" || { record "$impl" "$w" "$r" fail; unmount_impl "$impl"; return; }
  if timed "$step_limit" "$@"; then record "$impl" "$w" "$r" "$ELAPSED"; else record "$impl" "$w" "$r" fail; fi
  unmount_impl "$impl"
}

# the timed commands, run by timed() in a child bash (they see the variables saved in $FNS)
walk() { find "$1" -printf '%s %m\n' >/dev/null; }
walk_types() { find "$1" -type f >/dev/null; }
read_small() { find "$1" -type f ! -path "$1/$BIG" -print0 | xargs -0 -n 256 cat >/dev/null; }
# the same files in sorted path order (an app reads in the order its screens need, not the
# listing's): the list is made before the caches are dropped, so only the reads are timed
read_sorted() { xargs -0 -n 256 cat <"$2" >/dev/null; }
list_dir() { ls -f1 "$1" >/dev/null; }
seq_read() { dd if="$1" of=/dev/null bs=1M status=none; }
rand_read() {
  fio --name=rand --filename="$1" --readonly --rw=randread --bs=4k --ioengine=psync --numjobs=1 \
      --size="${BIG_MIB}M" --number_ios="$RANDREADS" --norandommap --randrepeat=1 --randseed=20240905 \
      --invalidate=0 --output=/dev/null
}
helper() { "${PBB[@]}" "$@"; }
create_sync() { helper create "$1" "$CREATE_FILES" 4096 && sync; }
# writes .invalidate and reads the changed file back, with builtins only (no fork to time)
invalidate_and_read() { local line; echo > "$1/.invalidate" && read -r line < "$1/$2" && [ "$line" = "$3" ]; }

# missing names looked up once, then again on the same mount, where a file system that keeps
# negative entries answers without its daemon (issue 25 measured the second pass)
group_missing() {
  local impl=$1 r=$2 m; m=$(dir_of "$1")/mnt
  mount_impl "$impl" || { record "$impl" missing "$r" fail; record "$impl" missing_again "$r" fail; return; }
  local w
  for w in missing missing_again; do
    if timed "$step_limit" helper missing "$m/$MISSING_DIR" "$MISSING"; then record "$impl" $w "$r" "$ELAPSED"
    else record "$impl" $w "$r" fail; fi
  done
  unmount_impl "$impl"
}

# every file looked up by its path on a fresh mount, without a listing first (an app opens
# what it needs by name), then again; the paths are listed once per run, through the first
# column's mount, so every column looks up the same names
group_lookup() {
  local impl=$1 r=$2 m list=$run/lookup.list; m=$(dir_of "$1")/mnt
  if [ ! -s "$list" ]; then
    mount_impl "$impl" || { record "$impl" lookup "$r" fail; record "$impl" lookup_again "$r" fail; return; }
    (cd "$m" && find . -type f ! -path "./$BIG" | sed 's|^\./||' | sort) >"$list"
    unmount_impl "$impl"
  fi
  mount_impl "$impl" || { record "$impl" lookup "$r" fail; record "$impl" lookup_again "$r" fail; return; }
  local w
  for w in lookup lookup_again; do
    if timed "$step_limit" helper statlist "$m" "$list"; then record "$impl" $w "$r" "$ELAPSED"
    else record "$impl" $w "$r" fail; fi
  done
  unmount_impl "$impl"
}

group_list() {
  local impl=$1 r=$2 m; m=$(dir_of "$1")/mnt
  drop_caches
  mount_impl "$impl" || { record "$impl" list_huge "$r" fail; record "$impl" list_huge_warm "$r" fail; return; }
  if timed "$step_limit" list_dir "$m/$HUGE_DIR"; then record "$impl" list_huge "$r" "$ELAPSED"
  else record "$impl" list_huge "$r" fail; fi
  if timed "$step_limit" list_dir "$m/$HUGE_DIR"; then record "$impl" list_huge_warm "$r" "$ELAPSED"
  else record "$impl" list_huge_warm "$r" fail; fi
  unmount_impl "$impl"
}

group_read_sorted() {
  local impl=$1 r=$2 m list; m=$(dir_of "$1")/mnt list=$run/sorted-$impl
  mount_impl "$impl" || { record "$impl" read_small_sorted "$r" fail; return; }
  find "$m" -type f ! -path "$m/$BIG" -print0 | sort -z >"$list"
  unmount_impl "$impl"
  drop_caches
  mount_impl "$impl" || { record "$impl" read_small_sorted "$r" fail; return; }
  if timed "$step_limit" read_sorted "$m" "$list"; then record "$impl" read_small_sorted "$r" "$ELAPSED"
  else record "$impl" read_small_sorted "$r" fail; fi
  unmount_impl "$impl"
}

group_seq() {
  local impl=$1 r=$2 m; m=$(dir_of "$1")/mnt
  drop_caches
  mount_impl "$impl" || { record "$impl" seq_cold "$r" fail; record "$impl" seq_warm "$r" fail; return; }
  if timed "$step_limit" seq_read "$m/$BIG"; then record "$impl" seq_cold "$r" "$ELAPSED"; else record "$impl" seq_cold "$r" fail; fi
  if timed "$step_limit" seq_read "$m/$BIG"; then record "$impl" seq_warm "$r" "$ELAPSED"; else record "$impl" seq_warm "$r" fail; fi
  unmount_impl "$impl"
}

change_visible() { # MNT ROUND: the mount shows the changed content
  local line; read -r line < "$1/$SHADOW_SAMPLE" && [ "$line" = "changed in round $2" ]
}
INVALIDATE_REPEATS=3   # a single change is a short, noisy figure: each round times three
group_invalidate() {
  local impl=$1 r=$2 d k; d=$(dir_of "$1")
  mount_impl "$impl" || { record "$impl" invalidate "$r" fail; return; }
  for ((k = 1; k <= INVALIDATE_REPEATS; k++)); do
    # everything cached again, then a file of the substitution replaced on disk
    bounded "$step_limit" walk "$d/mnt"
    bounded 30 cat "$d/mnt/$SHADOW_SAMPLE" >/dev/null
    echo "changed in round $r.$k" > "$d/up/$SHADOW_SAMPLE.new" && mv "$d/up/$SHADOW_SAMPLE.new" "$d/up/$SHADOW_SAMPLE"
    if is_pb "$impl"; then
      if timed 30 invalidate_and_read "$d/mnt" "$SHADOW_SAMPLE" "changed in round $r.$k"; then
        record "$impl" invalidate "$r" "$ELAPSED"
      else record "$impl" invalidate "$r" fail; fi
    else
      # the remount runs in this shell (it keeps track of the daemons); each step has its timeout
      local t0=$EPOCHREALTIME ok=1 t1
      unmount_impl "$impl"
      mount_impl "$impl" && bounded 30 change_visible "$d/mnt" "$r.$k" || ok=0
      t1=$EPOCHREALTIME
      if [ $ok = 1 ]; then record "$impl" invalidate "$r" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{ printf "%.4f", b - a }')"
      else record "$impl" invalidate "$r" fail; break; fi
    fi
  done
  unmount_impl "$impl"
}

# the dataset over four layers, on a fresh copy of the substitution each round; this group
# compares proxybundle with kernel overlayfs only, the FUSE peers are left out
group_stack() {
  local impl=$1 r=$2 m; m=$(dir_of "$1")/mnt
  stack_capable "$impl" || return 0
  fresh_layers "$impl" stack
  drop_caches
  if mount_impl "$impl" stack; then
    if timed "$step_limit" walk "$m"; then record "$impl" stack_walk_cold "$r" "$ELAPSED"
    else record "$impl" stack_walk_cold "$r" fail; fi
    if timed "$step_limit" walk "$m"; then record "$impl" stack_walk_warm "$r" "$ELAPSED"
    else record "$impl" stack_walk_warm "$r" fail; fi
  else
    record "$impl" stack_walk_cold "$r" fail; record "$impl" stack_walk_warm "$r" fail
  fi
  unmount_impl "$impl"
  simple "$impl" "$r" stack_read_small_cold cold read_small "$m"
  simple "$impl" "$r" stack_missing warm helper missing "$m/$STACK_MISSING_DIR" "$MISSING"
  simple "$impl" "$r" stack_copyup cold helper append "$m" "$data/stack-copyup.list"
}

run_group() { # GROUP IMPL ROUND
  local g=$1 impl=$2 r=$3 m; m=$(dir_of "$2")/mnt
  case $g in
    walk) group_walk "$impl" "$r" ;;
    list) group_list "$impl" "$r" ;;
    read) simple "$impl" "$r" read_small_cold cold read_small "$m"
          group_read_sorted "$impl" "$r" ;;
    seq) group_seq "$impl" "$r" ;;
    rand) command -v fio >/dev/null && simple "$impl" "$r" rand4k cold rand_read "$m/$BIG" ;;
    lookup) group_lookup "$impl" "$r" ;;
    missing) group_missing "$impl" "$r" ;;
    stat) simple "$impl" "$r" stat_one warm helper statloop "$m/$STAT_FILE" "$STATS" ;;
    statfs) simple "$impl" "$r" statfs warm helper statfsloop "$m" "$STATFS_CALLS" ;;
    invalidate) group_invalidate "$impl" "$r" ;;
    create) simple "$impl" "$r" create_sync warm create_sync "$m/Contents/Resources/Created-$r" ;;
    copyup) simple "$impl" "$r" copyup cold helper append "$m" "$data/copyup.list" ;;
    stack) group_stack "$impl" "$r" ;;
  esac
}
GROUPS_ORDER=(walk list read seq rand lookup missing stat statfs invalidate create copyup stack)
if [ -n "$groups" ]; then
  IFS=, read -r -a wanted_groups <<<"$groups"
  for g in "${wanted_groups[@]}"; do
    [[ " ${GROUPS_ORDER[*]} " == *" $g "* ]] || die "--groups: unknown group $g (${GROUPS_ORDER[*]})"
  done
  GROUPS_ORDER=("${wanted_groups[@]}")
fi

# the stacked group's layers: the patches mounted read-only like the main bundle, the sample of
# files the correctness check reads, and what it compares with
stacked=0 stack_sample=$run/stack-sample stack_expected=$run/stack-expected
declare -A patches_prints
if [[ " ${GROUPS_ORDER[*]} " == *" stack "* ]]; then
  stacked=1
  for p in patch1 patch2 kernel/patch1 kernel/patch2; do
    ro=$layersro/${p/\//-}
    mkdir -p "$ro" && mount --bind "$data/stack/$p" "$ro" && mount -o remount,bind,ro "$ro" \
      || die "read-only bind mount of $p failed"
  done
  awk -F'\t' '$2 == "f" && n++ % 20 == 0 { print $1 }' "$data/stack-view.tsv" > "$stack_sample"
  stack_reference "$stack_sample" > "$stack_expected"
  for impl in "${impls[@]}"; do stack_capable "$impl" && patches_prints[$impl]=$(patches_print "$impl"); done
fi

# what the child shells of timed() and bounded() need: the functions and the dataset's variables
{ declare -f
  declare -p PBB data main_print stack_sample stack_expected
  sed 's/^/declare -- /' "$data/meta.env"
} > "$FNS"

say "scale $scale: $FILES files, $DIRS directories, $HUGE-entry merged directory, $BIG_MIB MiB file; $rounds round(s); ${impls[*]}"
if [ "$stacked" = 1 ]; then
  skipped=(); for impl in "${impls[@]}"; do stack_capable "$impl" || skipped+=("$impl"); done
  say "stacked layers: $STACK_ENTRIES entries; kernel overlayfs and proxybundle only${skipped[*]:+ (${skipped[*]} skipped)}"
fi
for impl in "${impls[@]}"; do correctness "$impl"; done
for ((r = 1; r <= rounds; r++)); do
  # rotate the order each round so no implementation always goes first
  order=()
  for ((k = 0; k < ${#impls[@]}; k++)); do order+=("${impls[$(( (k + r - 1) % ${#impls[@]} ))]}"); done
  for impl in "${order[@]}"; do fresh_layers "$impl"; done
  for g in "${GROUPS_ORDER[@]}"; do
    for impl in "${order[@]}"; do run_group "$g" "$impl" "$r"; done
  done
done
if [ "$(fingerprint "$data/main")" != "$main_print" ]; then
  say "the main bundle changed during the run"
  for impl in "${impls[@]}"; do printf '%s\tmain_untouched\tfail\n' "$impl" >> "$checks"; done
fi
for impl in "${!patches_prints[@]}"; do
  if [ "$(patches_print "$impl")" != "${patches_prints[$impl]}" ]; then
    say "the patches $impl mounts changed during the run"; printf '%s\tpatches_untouched\tfail\n' "$impl" >> "$checks"
  fi
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------------------- report
mem_total=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
{ for w in "${WORKLOADS[@]}"; do printf 'W\t%s\t%s\t%s\n' "$w" "$(describe "$w")" "$(target "$w")"; done
  for i in "${impls[@]}"; do printf 'I\t%s\n' "$i"; done
  awk '{ print "C\t" $0 }' "$checks"
  awk '{ print "S\t" $0 }' "$samples"
} | awk -F'\t' -v date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -v kernel="$(uname -r)" -v cores="$(nproc)" \
    -v memkib="$mem_total" -v scale="$scale" -v rounds="$rounds" -v files="$FILES" -v dirs="$DIRS" \
    -v huge="$HUGE" -v bigmib="$BIG_MIB" -v entries="$ENTRIES" -v load1="$load_start" -v load2="$load_end" \
    -v md="$out/results.md" -v js="$out/results.json" -v helper="${PBB[0]##*/}" \
    -v stacked="$stacked" -v stackentries="$STACK_ENTRIES" -v p1files="$STACK_PATCH1_FILES" -v p2files="$STACK_PATCH2_FILES" \
    -v stackwh="$STACK_WHITEOUTS" -v stackcopyup="$STACK_COPYUP" '
  function median(key,    n, i, j, t, v) {
    n = cnt[key]; if (n == 0) return ""
    for (i = 1; i <= n; i++) v[i] = val[key, i]
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
  }
  function jstr(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
  $1 == "W" { nw++; wl[nw] = $2; desc[$2] = $3; tgt[$2] = $4 }
  $1 == "I" { ni++; im[ni] = $2; if ($2 == "kernel") haskernel = 1; if ($2 == "proxybundle") haspb = 1 }
  $1 == "C" { if (!(($2, $3) in chk)) { nc[$2]++; cn[$2, nc[$2]] = $3 } ; if (chk[$2, $3] != "fail") chk[$2, $3] = $4 }
  $1 == "S" { k = $2 SUBSEP $3; if ($5 == "fail") failed[k]++; else { cnt[k]++; val[k, cnt[k]] = $5 + 0 } ; seen[k] = 1 }
  END {
    names["kernel"] = "kernel overlayfs"
    hdr = "| workload |"; sep = "|---|"
    for (i = 1; i <= ni; i++) { hdr = hdr " " (im[i] in names ? names[im[i]] : im[i]) " |"; sep = sep "---:|" }
    if (haspb) { hdr = hdr " proxybundle target |"; sep = sep "---|" }
    printf "## Benchmark, %s\n\n", date > md
    printf "Kernel %s, %d cores, %.1f GiB memory; load average %s at start, %s at end.  \n", kernel, cores, memkib / 1048576, load1, load2 > md
    printf "Scale %s: %d files in %d directories, a %d-entry merged directory, a %d MiB file (%d entries in all); %d round(s), medians; times in seconds, ratio to kernel overlayfs in the same run.\n\n", scale, files, dirs, huge, bigmib, entries, rounds > md
    print hdr > md; print sep > md
    printf "{\n  \"date\": %s, \"kernel\": %s, \"cores\": %d, \"memory_kib\": %d,\n  \"load_start\": %s, \"load_end\": %s,\n  \"scale\": %s, \"rounds\": %d, \"helper\": %s,\n", jstr(date), jstr(kernel), cores, memkib, jstr(load1), jstr(load2), scale, rounds, jstr(helper) > js
    printf "  \"dataset\": {\"files\": %d, \"directories\": %d, \"merged_directory_entries\": %d, \"big_file_mib\": %d, \"entries\": %d, \"stacked_entries\": %d},\n", files, dirs, huge, bigmib, entries, stackentries > js
    printf "  \"implementations\": [" > js
    for (i = 1; i <= ni; i++) printf "%s%s", (i > 1 ? ", " : ""), jstr(im[i]) > js
    printf "],\n  \"workloads\": [\n" > js
    for (w = 1; w <= nw; w++) {
      name = wl[w]; row = "| " desc[name] " |"
      kmed = haskernel ? median("kernel" SUBSEP name) : ""
      printf "    {\"name\": %s, \"description\": %s, \"unit\": \"s\", \"target_ratio\": %s, \"results\": {", jstr(name), jstr(desc[name]), (tgt[name] == "" ? "null" : tgt[name]) > js
      first = 1; pbratio = ""
      for (i = 1; i <= ni; i++) {
        k = im[i] SUBSEP name
        if (!(k in seen)) { row = row " — |"; continue }
        m = median(k)
        ratio = (m != "" && kmed != "" && kmed > 0) ? m / kmed : ""
        if (im[i] == "proxybundle") { pbratio = ratio; pbmed = m }
        if (m == "") cell = "fails"
        else cell = sprintf("%.3f", m) (ratio != "" && im[i] != "kernel" ? sprintf(" (%.2f×)", ratio) : "") (failed[k] ? " (" failed[k] " failed)" : "")
        row = row " " cell " |"
        printf "%s%s: {\"median\": %s, \"ratio_to_kernel\": %s, \"failed\": %d, \"samples\": [", (first ? "" : ", "), jstr(im[i]), (m == "" ? "null" : sprintf("%.4f", m)), (ratio == "" ? "null" : sprintf("%.3f", ratio)), failed[k] + 0 > js
        for (s = 1; s <= cnt[k]; s++) printf "%s%.4f", (s > 1 ? ", " : ""), val[k, s] > js
        printf "]}" > js
        first = 0
      }
      t = ""
      if (tgt[name] != "") t = "≤ " tgt[name] "×" (pbratio != "" ? (pbratio <= tgt[name] + 0 ? " ✓" : " ✗") : "")
      if (name == "invalidate") {
        best = ""
        for (i = 1; i <= ni; i++) if (im[i] !~ /^proxybundle/ && cnt[im[i] SUBSEP name]) { v = median(im[i] SUBSEP name); if (best == "" || v < best) best = v }
        t = "≥ 10× faster than peers"
        if (best != "" && pbmed != "" && cnt["proxybundle" SUBSEP name]) t = t sprintf(" (%.0f×)", best / pbmed) (best >= 10 * pbmed ? " ✓" : " ✗")
      }
      print row (haspb ? " " t " |" : "") > md
      printf "}}%s\n", (w < nw ? "," : "") > js
    }
    # memory rows
    row = "| daemon peak memory after the walk (VmHWM, MiB) |"; row2 = "| daemon memory per walked entry (bytes) |"
    printf "  ],\n  \"memory\": {" > js
    first = 1
    for (i = 1; i <= ni; i++) {
      k = im[i] SUBSEP "memory_kib"; k2 = im[i] SUBSEP "bytes_per_name"
      if (!cnt[k]) { row = row " — |"; row2 = row2 " — |"; continue }
      m = median(k); b = median(k2)
      row = row sprintf(" %.1f |", m / 1024); row2 = row2 sprintf(" %.0f |", b)
      if (im[i] == "proxybundle") { pbmem = m; pbb = b }
      printf "%s%s: {\"peak_kib\": %d, \"bytes_per_entry\": %.0f}", (first ? "" : ", "), jstr(im[i]), m, b > js
      first = 0
    }
    printf "},\n" > js
    t = "≤ 11 MiB at scale 1"; if (pbmem != "" && scale == 1) t = t (pbmem <= 11 * 1024 ? " ✓" : " ✗")
    print row (haspb ? " " t " |" : "") > md
    t = ""; if (pbb != "") t = sprintf("≈ %.0f MiB per 1,000,000 names", pbb * 1e6 / 1048576)
    print row2 (haspb ? " " t " |" : "") > md
    # correctness
    row = "| correctness |"
    printf "  \"correctness\": {" > js
    for (i = 1; i <= ni; i++) {
      bad = ""; printf "%s%s: {", (i > 1 ? ", " : ""), jstr(im[i]) > js
      for (c = 1; c <= nc[im[i]]; c++) {
        cname = cn[im[i], c]; okc = chk[im[i], cname] == "ok"
        if (!okc) bad = bad (bad == "" ? "" : ", ") cname
        printf "%s: %s, ", jstr(cname), (okc ? "true" : "false") > js
      }
      if (nc[im[i]] == 0) bad = "not run"
      printf "\"passed\": %s}", (bad == "" ? "true" : "false") > js
      row = row " " (bad == "" ? "ok" : "✗ " bad) " |"
    }
    printf "}\n}\n" > js
    print row (haspb ? " |" : "") > md
    printf "\nCorrectness: shadowing, merged listing without duplicates, new files, whiteouts (OCI `.wh.` files and an opaque directory; kernel overlayfs gets them converted to its own form), entry count of the walk, write lands in the substitution, copy-up on append, main bundle untouched.\n" > md
    if (stacked) printf "\nStacked layers (the \"stacked layers\" rows): the same main bundle and substitution with two read-only patches between them, kernel overlayfs mounted with `lowerdir=patch1:patch2:main`, proxybundle with `--patch patch1 --patch patch2`; %d entries. patch2 holds another version of every 3rd main-bundle file (%d) and makes one directory opaque; patch1 another version of every 5th (%d) and %d whiteouts; each patch adds files of its own, %d of which the copy-up appends to. The FUSE peers are not run on them (—). Their checks: the mount lists the names and types the stack resolves to and a sample of files has the content of its top layer (stack_view; proxybundle also against kernel overlayfs, stack_same_as_kernel), appending copies a file of a patch up into the substitution (stack_copy_up), the patches untouched.\n", stackentries, p2files, p1files, stackwh, stackcopyup > md
    close(md); close(js)
    while ((getline l < md) > 0) print l
  }'
perl "$HERE/bench/chart.pl" "$out/results.json" > "$out/chart.svg" || say "chart.pl failed; no chart.svg"
say "results in $out (results.md, results.json, chart.svg, samples.tsv)"
# a failed check or workload of proxybundle is an error; the peers' are only reported
if has_pb && grep -qE $'^proxybundle(-uring|-casefold)?\t.*\tfail$' "$checks" "$samples"; then
  say "proxybundle failed a check or a workload"; exit 3
fi
exit 0
