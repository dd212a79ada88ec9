#!/usr/bin/env bash
# Runs xfstests (an xfstests checkout, built with `make`; nothing is fetched here) against
# proxybundle, or with --kernel-overlay against kernel overlayfs on the same machine, for the
# baseline. Run as root. Not part of CI.
#
#   Scripts/xfstests.sh [--kernel-overlay] [--work DIR] XFSTESTS_CHECKOUT [check arguments...]
#
# The check arguments default to `-g quick`; name tests to run those (generic/080 generic/676).
# proxybundle: FSTYP=fuse, FUSE_SUBTYP=.proxybundle, so xfstests mounts with
# `mount -t fuse.proxybundle MAIN MOUNTPOINT -o substitution=...`, which fuse3's mount.fuse3
# runs as `proxybundle` from a PATH of its own: the run is in a private mount namespace whose
# /usr/local/bin holds only the built binary (nothing installed is used or changed). TEST_DEV and SCRATCH_DEV are
# empty main-bundle directories, each mount has its own substitution, and xfstests' mkfs for
# fuse removes everything through the scratch mount, which over an empty main bundle empties
# the scratch substitution. --kernel-overlay: `check -overlay` over two ext4 loop images
# kept in the work directory.
# The binary: $PROXYBUNDLE_BIN, else .build/release/proxybundle, else .build/debug/proxybundle.
set -euo pipefail

usage() { echo "usage: $0 [--kernel-overlay] [--work DIR] XFSTESTS_CHECKOUT [check arguments...]" >&2; exit 2; }
kernel=no
work=/var/tmp/proxybundle-xfstests
while [ $# -gt 0 ]; do
  case "$1" in
    --kernel-overlay) kernel=yes; shift ;;
    --work) [ $# -ge 2 ] || usage; work=$2; shift 2 ;;
    -h|--help) usage ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || usage
checkout=$(realpath "$1"); shift
[ -x "$checkout/check" ] || { echo "xfstests.sh: $checkout has no ./check (an xfstests checkout?)" >&2; exit 1; }
[ -x "$checkout/ltp/fsstress" ] || { echo "xfstests.sh: $checkout is not built (run make there)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "xfstests.sh: run as root (xfstests mounts)" >&2; exit 1; }
[ $# -gt 0 ] || set -- -g quick
mkdir -p "$work"
work=$(realpath "$work")

# unmounts our own mount at $1, if any
release() { if mountpoint -q "$1"; then umount "$1" || umount -l "$1"; fi; }

if [ "$kernel" = yes ]; then
  for role in test scratch; do
    image=$work/$role.ext4
    if [ ! -f "$image" ]; then truncate -s 8G "$image"; mkfs.ext4 -q -F "$image"; fi
    mkdir -p "$work/$role-base"
  done
  release "$work/test-base/ovl-mnt"; release "$work/scratch-base/ovl-mnt"
  release "$work/test-base"; release "$work/scratch-base"
  test_dev=$(losetup -f --show "$work/test.ext4")
  scratch_dev=$(losetup -f --show "$work/scratch.ext4")
  trap 'release "$work/test-base"; release "$work/scratch-base"; losetup -d "$test_dev" "$scratch_dev"' EXIT
  cat > "$work/local.config" <<EOF
export FSTYP=ext4
export TEST_DEV=$test_dev
export TEST_DIR=$work/test-base
export SCRATCH_DEV=$scratch_dev
export SCRATCH_MNT=$work/scratch-base
EOF
  cd "$checkout"
  HOST_OPTIONS=$work/local.config ./check -overlay "$@"
  exit
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
binary=${PROXYBUNDLE_BIN:-}
for candidate in "$repo/.build/release/proxybundle" "$repo/.build/debug/proxybundle"; do
  [ -n "$binary" ] || { [ -x "$candidate" ] && binary=$candidate; } || true
done
[ -n "$binary" ] && [ -x "$binary" ] || { echo "xfstests.sh: no proxybundle binary (swift build, or set PROXYBUNDLE_BIN)" >&2; exit 1; }
rm -rf "${work:?}/bin"
mkdir -p "$work/bin"
ln -s "$(realpath "$binary")" "$work/bin/proxybundle"
# xfstests compares the type df shows with FSTYP: the mount shows as fuse.proxybundle
cat > "$work/df" <<'EOF'
#!/bin/sh
df "$@" | sed 's/ fuse\.proxybundle / fuse /'
EOF
# and unmounts by TEST_DEV and SCRATCH_DEV, which umount takes for mountpoints: directories
cat > "$work/umount" <<'EOF'
#!/bin/bash
arguments=()
for argument in "$@"; do
  target=$(findmnt -n -o TARGET -t fuse.proxybundle --source "$argument" 2>/dev/null | tail -n 1)
  arguments+=("${target:-$argument}")
done
exec umount "${arguments[@]}"
EOF
chmod +x "$work/df" "$work/umount"

for role in test scratch; do
  release "$work/$role-mnt"
  rm -rf "${work:?}/$role-main" "${work:?}/$role-substitution"
  mkdir -p "$work/$role-main" "$work/$role-substitution" "$work/$role-mnt"
done
cat > "$work/local.config" <<EOF
export FSTYP=fuse
export FUSE_SUBTYP=.proxybundle
export DF_PROG="$work/df -T -P"
export UMOUNT_PROG=$work/umount
export TEST_DEV=$work/test-main
export TEST_DIR=$work/test-mnt
export SCRATCH_DEV=$work/scratch-main
export SCRATCH_MNT=$work/scratch-mnt
export TEST_FS_MOUNT_OPTS="-o substitution=$work/test-substitution,allow_other"
export MOUNT_OPTIONS="-o substitution=$work/scratch-substitution,allow_other"
EOF
# the mounts live and end with the namespace
exec unshare --mount --propagation private bash -c \
  'mount --bind "$1/bin" /usr/local/bin && cd "$2" && HOST_OPTIONS="$1/local.config" ./check "${@:3}"
   status=$?
   # a daemon outlives its mount namespace: stop it by unmounting
   umount "$1/test-mnt" "$1/scratch-mnt" 2>/dev/null
   exit $status' \
  xfstests "$work" "$checkout" "$@"
