#!/usr/bin/env bash
# Writes Sources/proxybundle/function-order.txt: the functions the daemon runs while it mounts
# and serves everyday requests, for lld's --symbol-ordering-file (see Package.swift), which lays
# them out together so the code the daemon runs sits in few pages (about 1.7 MB less resident).
#
#   Scripts/order-functions.sh          (as root; takes a few minutes; run after larger changes)
#
# It builds a copy of HEAD with one change for profiling only: valgrind 3.19 does not know
# openat2, so that copy falls back to openat when openat2 fails with ENOSYS. The copy serves a
# small generated tree under callgrind while a workload of common operations runs through it;
# the functions callgrind saw are the list. Names missing from a later build are skipped by
# the linker, and functions missing from the list keep their usual place.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
[ "$(id -u)" = 0 ] || { echo "order-functions.sh: needs root (FUSE)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "order-functions.sh: needs valgrind" >&2; exit 1; }
repo=$PWD
work=$(mktemp -d /tmp/proxybundle-order.XXXXXX)
mnt=$work/mnt
cleanup() { umount -l "$mnt" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

echo "building a profiling copy of HEAD"
git archive HEAD | tar -x -C "$work" --one-top-level=src
perl -0pi -e 's/(    return \(int\)syscall\(SYS_openat2, dirfd, path, &how, sizeof\(how\)\);)/    int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));\n    if (fd < 0 && errno == ENOSYS) fd = openat(dirfd, path, (int)flags, (mode_t)mode);\n    return fd;/' \
  "$work/src/Sources/CSyscalls/CSyscalls.c"
grep -q ENOSYS "$work/src/Sources/CSyscalls/CSyscalls.c" || { echo "order-functions.sh: cannot patch pb_openat2" >&2; exit 1; }
(cd "$work/src" && swift build -c release -Xswiftc -static-executable --product proxybundle >/dev/null)
# valgrind cannot read clang's DWARF 5; the symbol table is enough
strip --strip-debug -o "$work/proxybundle" "$work/src/.build/release/proxybundle"

echo "generating a tree"
mkdir -p "$work/main" "$work/sub" "$mnt"
for d in a b c d/e d/f x.lproj y.bundle/z; do
  mkdir -p "$work/main/$d"
  for i in $(seq 20); do printf 'file %s %s\n' "$d" "$i" > "$work/main/$d/f$i.strings"; done
done
head -c 300000 /dev/urandom > "$work/main/a/big.png"
ln -s f1.strings "$work/main/a/link"
mkdir -p "$work/sub/a" "$work/sub/b" "$work/sub/new"
echo patched > "$work/sub/a/f1.strings"
touch "$work/sub/a/.wh.f2.strings" "$work/sub/b/.wh..wh..opq"
echo added > "$work/sub/new/g"

# over /dev/fuse: valgrind does not follow io_uring's completions, and the daemon under it
# hangs on its rings (the everyday functions of the two transports are the same handlers)
echo "serving it under callgrind"
(cd "$work" && exec valgrind --tool=callgrind --demangle=no --dump-instr=no --compress-strings=no \
  --callgrind-out-file="$work/callgrind.out" "$work/proxybundle" --serve-checked-mount \
  "$work/main" "$mnt" "$work/sub" info stderr transport=device >"$work/valgrind.log" 2>&1) &
for _ in $(seq 600); do mountpoint -q "$mnt" && break; sleep 0.1; done
mountpoint -q "$mnt" || { tail -5 "$work/valgrind.log" >&2; exit 1; }

m=$mnt
find "$m" -printf '%s %m %y\n' >/dev/null; ls -la "$m"/* >/dev/null; cat "$m"/a/* "$m"/d/e/* >/dev/null
for i in $(seq 30); do stat "$m/a/missing$i" >/dev/null 2>&1 || true; done
mkdir -p "$m/w/sub"; for i in $(seq 20); do echo "$i" > "$m/w/n$i"; done; sync
for f in "$m"/c/*; do echo more >> "$f"; done
ln -s n1 "$m/w/s"; readlink "$m/w/s" >/dev/null; ln "$m/w/n1" "$m/w/h"
mv "$m/w/n2" "$m/w/m2"; mv "$m/d/e" "$m/d/e2"; mv "$m/w/sub" "$m/w/sub2"
chmod 600 "$m/w/n3"; chown 1:1 "$m/w/n4"; touch -d 2020-01-01 "$m/w/n5"; truncate -s 3 "$m/w/n6"
setfattr -n user.k -v 1 "$m/w/n7"; getfattr -d "$m/w/n7" >/dev/null; setfattr -x user.k "$m/w/n7"
rm "$m/w/n8" "$m/a/f3.strings"; rm -r "$m/w/sub2" "$m/d/f"; rmdir "$m/new" 2>/dev/null || rm -r "$m/new"
dd if=/dev/zero of="$m/w/big" bs=64k count=64 2>/dev/null; dd if="$m/a/big.png" of=/dev/null bs=4k 2>/dev/null
df "$m" >/dev/null; cat "$m/.stats" >/dev/null; echo > "$m/.invalidate"; echo a > "$m/.invalidate"
find "$m" >/dev/null; sync; echo 2 > /proc/sys/vm/drop_caches; find "$m" -type f -exec cat {} + >/dev/null
python3 - "$m" <<'PY'
import os, sys
m = sys.argv[1]
fd = os.open(m + "/w/n9", os.O_RDWR); os.pwrite(fd, b"abc", 10); os.fsync(fd); os.ftruncate(fd, 2); os.close(fd)
fd = os.open(m + "/w/n10", os.O_RDWR | os.O_APPEND); os.write(fd, b"x"); os.fdatasync(fd); os.close(fd)
os.rename(m + "/w/n11", m + "/w/n12"); os.utime(m + "/w/n13", (1, 2)); os.statvfs(m); os.listdir(m + "/w")
os.mknod(m + "/w/fifo", 0o600 | 0o010000); os.access(m + "/w/n14", os.R_OK)
PY
umount "$mnt"
for _ in $(seq 300); do [ -s "$work/callgrind.out" ] && ! pgrep -f "$work/proxybundle" >/dev/null && break; sleep 0.1; done

# functions of the daemon itself (not of valgrind's preloads), sorted by name so that a new
# list differs from the old only by what the code changed (any order packs them as tightly)
awk '
  /^ob=/ { ob = substr($0, 4) }
  /^fn=/ { fn = substr($0, 4); own[fn] = (ob ~ /\/proxybundle$/) }
  /^(cob|cfn|calls)=/ { skip = ($0 ~ /^calls=/); next }
  /^[0-9+-]/ { if (skip) { skip = 0; next } if (fn != "" && own[fn]) cost[fn] += $2 }
  END { for (f in cost) if (f !~ /^0x/) print f }
' "$work/callgrind.out" | LC_ALL=C sort > "$repo/Sources/proxybundle/function-order.txt"
# the build does not see the list as an input: relink
rm -f "$repo"/.build/*/proxybundle "$repo"/.build/*/*/proxybundle
echo "wrote $(wc -l < "$repo/Sources/proxybundle/function-order.txt") functions to Sources/proxybundle/function-order.txt"
