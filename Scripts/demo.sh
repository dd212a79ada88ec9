#!/usr/bin/env bash
# Scripts/demo.sh — end-to-end demonstration of proxybundle.
#
# Builds proxybundle, mounts Examples/Demo.app (the read-only main bundle)
# shadowed by a scratch copy of Examples/patch (the writable substitution
# directory), prints the merged tree with the layer serving each entry, shows
# the whiteouts, compares a shadowed file side by side, and unmounts.
#
# The repository's Examples/ are never modified: the patch is copied to a
# temporary directory first. Works from any working directory, as root or
# as an ordinary user (FUSE must be usable: /dev/fuse and fusermount3).
# Exits non-zero with a message on stderr if any step fails or the merged
# view differs from Examples/merged-view.txt.
#
# PROXYBUNDLE_BIN=PATH uses an already built binary (no bootstrap, no build;
# the tests run the demo so).
set -euo pipefail

say()  { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die()  { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

script_dir=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
root=$(cd -- "$script_dir/.." && pwd -P)
cd "$root"

main_bundle="$root/Examples/Demo.app"
example_patch="$root/Examples/patch"
expected_view="$root/Examples/merged-view.txt"
shadowed="en.lproj/Localizable.strings"

[ -d "$main_bundle" ]   || die "missing $main_bundle"
[ -d "$example_patch" ] || die "missing $example_patch"
[ -f "$expected_view" ] || die "missing $expected_view"

# --- prerequisites and build -------------------------------------------------

build() {
  say "Checking prerequisites (Scripts/bootstrap.sh)"
  [ -f "$root/Scripts/bootstrap.sh" ] || die "missing Scripts/bootstrap.sh"
  bash "$root/Scripts/bootstrap.sh" || die "Scripts/bootstrap.sh failed (see above)"

  if ! command -v swift >/dev/null 2>&1; then
    if [ -x /opt/swift/usr/bin/swift ]; then
      PATH="/opt/swift/usr/bin:$PATH"
      export PATH
    else
      die "swift not found on PATH nor at /opt/swift/usr/bin/swift"
    fi
  fi

  say "Building (swift build)"
  swift build || die "swift build failed"
  local bin_dir
  bin_dir=$(swift build --show-bin-path) || die "swift build --show-bin-path failed"
  bin="$bin_dir/proxybundle"
  [ -x "$bin" ] || die "built executable not found at $bin"
}

if [ -n "${PROXYBUNDLE_BIN:-}" ]; then
  bin=$PROXYBUNDLE_BIN
  [ -x "$bin" ] || die "PROXYBUNDLE_BIN=$bin is not an executable"
else
  build
fi
info "binary: $bin"

[ -e /dev/fuse ] || die "/dev/fuse does not exist: FUSE is unavailable here (in a container, run it with --device /dev/fuse --cap-add SYS_ADMIN)"

# --- scratch space, mounting and guaranteed cleanup --------------------------

work=""
mnt=""

# True if $1 is a mount point. Reads the mount table rather than stat()ing the
# path, so a FUSE mount whose daemon died (ENOTCONN) still counts as mounted.
is_mounted() {
  local path=$1 escaped
  if [ -r /proc/self/mountinfo ]; then
    escaped=$(printf '%s' "$path" | sed -e 's/\\/\\134/g' -e 's/ /\\040/g' -e 's/\t/\\011/g')
    awk -v m="$escaped" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo
  else
    mountpoint -q -- "$path"
  fi
}

# Waits up to ~5 s for $1 to (dis)appear from the mount table: wait_mount yes|no PATH
wait_mount() {
  local want=$1 path=$2 now
  for _ in $(seq 50); do
    now=no
    if is_mounted "$path"; then now=yes; fi
    [ "$now" = "$want" ] && return 0
    sleep 0.1
  done
  return 1
}

# Best effort: proxybundle unmount, then the usual FUSE / kernel fallbacks,
# ending with lazy unmounts, which detach the mount even while it is busy.
force_unmount() {
  local path=$1
  is_mounted "$path" || return 0
  if [ -n "${bin:-}" ] && [ -x "$bin" ]; then
    "$bin" unmount "$path" >/dev/null 2>&1 || true
    wait_mount no "$path" && return 0
  fi
  local attempt
  for attempt in "fusermount3 -u" "umount" "fusermount3 -uz" "umount -l"; do
    command -v "${attempt%% *}" >/dev/null 2>&1 || continue
    # shellcheck disable=SC2086 # $attempt is a command plus its options
    $attempt "$path" >/dev/null 2>&1 || true
    wait_mount no "$path" && return 0
  done
  ! is_mounted "$path"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$mnt" ] && ! force_unmount "$mnt"; then
    printf 'demo: error: could not unmount %s; leaving %s in place\n' "$mnt" "$work" >&2
    exit 1
  fi
  # Only reached once nothing under $work is mounted; --one-file-system is a
  # second guard against ever recursing into a mount.
  if [ -n "$work" ] && [ -d "$work" ]; then
    rm -rf --one-file-system -- "$work" || printf 'demo: warning: could not remove %s\n' "$work" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

work=$(mktemp -d "${TMPDIR:-/tmp}/proxybundle-demo.XXXXXX") || die "mktemp failed"
work=$(cd -- "$work" && pwd -P)   # canonical, so it matches the mount table
sub="$work/patch"
mnt="$work/mnt"
cp -a -- "$example_patch" "$sub" || die "could not copy $example_patch to $sub"
mkdir -- "$mnt"

say "Mounting"
info "main bundle:  $main_bundle"
info "substitution: $sub (scratch copy of Examples/patch)"
info "mount point:  $mnt"
"$bin" mount "$main_bundle" "$mnt" --substitution "$sub" \
  || die "'proxybundle mount' failed (exit status $?)"
wait_mount yes "$mnt" || die "'proxybundle mount' returned but $mnt is not a mount point"
ls -- "$mnt" >/dev/null || die "the mount at $mnt does not answer"

# --- the merged view ---------------------------------------------------------

# True if the main bundle's entry at relative path $1 shows through the
# substitution: it exists and no whiteout (plain or opaque) hides it or any of
# its ancestors, and no substitution non-directory shadows an ancestor.
main_visible() {
  local rel=$1 parent="" comp rest
  [ -e "$main_bundle/$rel" ] || [ -L "$main_bundle/$rel" ] || return 1
  rest=$rel
  while :; do
    comp=${rest%%/*}
    local sdir="$sub${parent:+/$parent}"
    if [ -d "$sdir" ] && [ ! -L "$sdir" ]; then
      [ -e "$sdir/.wh..wh..opq" ] && return 1
      { [ -e "$sdir/.wh.$comp" ] || [ -L "$sdir/.wh.$comp" ]; } && return 1
    elif [ -e "$sdir" ] || [ -L "$sdir" ]; then
      return 1
    fi
    [ "$comp" = "$rest" ] && return 0
    parent=${parent:+$parent/}$comp
    rest=${rest#*/}
  done
}

# Label for the layer serving relative path $1 of the mount.
layer_of() {
  local rel=$1 s="$sub/$1" m="$main_bundle/$1"
  if [ -e "$s" ] || [ -L "$s" ]; then
    if [ -d "$s" ] && [ ! -L "$s" ]; then
      if [ -e "$s/.wh..wh..opq" ]; then
        echo "[patch,opaque]"; return
      elif [ -d "$m" ] && [ ! -L "$m" ] && main_visible "$rel"; then
        echo "[patch+main]"; return
      fi
    fi
    echo "[patch]"
  else
    echo "[main]"
  fi
}

# the control files at the root (.invalidate, .stats, .layers, .remount) are reached by name, never listed
find "$mnt" -mindepth 1 -printf '%P\0' > "$work/listing.raw" || die "listing the mount with find failed"
entries=()
mapfile -d '' -t entries < <(LC_ALL=C sort -z "$work/listing.raw")

say "Merged view of $mnt (${#entries[@]} entries)"
info "[main] main bundle  [patch] substitution  [patch+main] merged directory"
info "[patch,opaque] substitution directory hiding the main bundle's entries"
echo
for rel in "${entries[@]}"; do
  shown=$rel
  if [ -L "$mnt/$rel" ]; then
    shown="$rel -> $(readlink -- "$mnt/$rel")"
  elif [ -d "$mnt/$rel" ]; then
    shown="$rel/"
  fi
  printf '    %-15s %s\n' "$(layer_of "$rel")" "$shown"
done

say "Whiteouts in the substitution"
whiteouts=()
mapfile -d '' -t whiteouts < <(find "$sub" -name '.wh.*' -printf '%P\0' | LC_ALL=C sort -z)
[ "${#whiteouts[@]}" -gt 0 ] || info "(none)"
for wh in "${whiteouts[@]}"; do
  dir=$(dirname -- "$wh")
  if [ "$dir" = . ]; then dir=""; else dir="$dir/"; fi
  name=$(basename -- "$wh")
  if [ "$name" = ".wh..wh..opq" ]; then
    info "${dir:-./} is opaque ($wh): every main-bundle entry of it is hidden"
    if [ -d "$main_bundle/$dir" ]; then
      while IFS= read -r -d '' hidden; do
        if [ -e "$sub/$dir$hidden" ] || [ -L "$sub/$dir$hidden" ]; then
          info "    $dir$hidden: main bundle's copy hidden, the substitution's is shown"
        else
          info "    $dir$hidden: hidden"
          { [ -e "$mnt/$dir$hidden" ] || [ -L "$mnt/$dir$hidden" ]; } \
            && die "$dir$hidden should be hidden by $wh but is visible in the mount"
        fi
      done < <(find "$main_bundle/$dir" -mindepth 1 -maxdepth 1 -printf '%f\0' | LC_ALL=C sort -z)
    fi
  else
    hidden="$dir${name#.wh.}"
    info "$hidden is hidden by a whiteout ($wh)"
    { [ -e "$mnt/$hidden" ] || [ -L "$mnt/$hidden" ]; } \
      && die "$hidden should be hidden by $wh but is visible in the mount"
  fi
done

# --- checks ------------------------------------------------------------------

say "Checking the merged view"
for rel in "${entries[@]}"; do
  case "/$rel" in
    */.wh.*) die "whiteout name visible through the mount: $rel" ;;
  esac
done
if ! printf '%s\n' "${entries[@]}" | diff -u --label expected "$expected_view" --label mount - ; then
  die "the merged view differs from Examples/merged-view.txt (see diff above)"
fi
info "listing matches Examples/merged-view.txt"
cmp -s -- "$mnt/$shadowed" "$sub/$shadowed" \
  || die "$shadowed in the mount is not the substitution's version"
info "$shadowed is served by the substitution"
cmp -s -- "$mnt/Images/AppIcon.png" "$sub/Images/icon@2x.png" \
  || die "Images/AppIcon.png (symlink to icon@2x.png) does not resolve to the substitution's icon@2x.png"
info "Images/AppIcon.png -> icon@2x.png resolves inside the mount, to the patched icon"

say "Shadowed file: $shadowed"
info "left:  main bundle   $main_bundle/$shadowed"
info "right: through mount $mnt/$shadowed"
echo
rc=0
diff --side-by-side --expand-tabs --width=140 -- "$main_bundle/$shadowed" "$mnt/$shadowed" || rc=$?
[ "$rc" -le 1 ] || die "diff failed on $shadowed"

# --- a change made directly in a layer ------------------------------------------

say "An updater drops a file into the substitution: visible after .invalidate"
printf 'dropped in by an updater\n' > "$sub/Dropped.txt"
printf '\n' > "$mnt/.invalidate" || die "writing $mnt/.invalidate failed"
[ "$(cat -- "$mnt/Dropped.txt")" = "dropped in by an updater" ] || die "$mnt/Dropped.txt not visible after .invalidate"
info "echo > $mnt/.invalidate showed $sub/Dropped.txt as $mnt/Dropped.txt"
info "the control files .invalidate, .stats, .layers and .remount are reached by name, never listed; the layers:"
sed 's/^/      /' -- "$mnt/.layers"
rm -f -- "$sub/Dropped.txt"
printf '\n' > "$mnt/.invalidate" || die "writing $mnt/.invalidate failed"

# --- bundle rules: which file an app loads, and what a patch misses -----------

say "Which icon does an app load? proxybundle resolve (UIImage rules)"
for scale in 1 2 3; do
  answer=$("$bin" resolve "$mnt" Images/icon --image --scale "$scale") \
    || die "'proxybundle resolve $mnt Images/icon --image --scale $scale' failed"
  info "scale $scale: $answer"
done
info "the patch replaced icon@2x.png only: scale 1 and 3 devices still load the main bundle's icons"

say "What the patch holds that never takes effect: proxybundle check"
rc=0
findings=$("$bin" check "$mnt") || rc=$?
[ "$rc" -eq 1 ] || die "'proxybundle check $mnt' exited $rc; expected 1 (the icon@2x trap)"
grep -q 'Images/icon@2x.png (substitution): on scale 3 devices, Images/icon@3x.png from main loads instead' <<<"$findings" \
  || die "'proxybundle check' did not report the icon@2x trap: $findings"
sed 's/^/    /' <<<"$findings"

# --- unmount -----------------------------------------------------------------

say "Unmounting"
"$bin" unmount "$mnt" || die "'proxybundle unmount $mnt' failed (exit status $?)"
wait_mount no "$mnt" || die "'proxybundle unmount' returned but $mnt is still mounted"
info "unmounted $mnt"
[ -z "$(ls -A -- "$mnt")" ] || die "$mnt is not empty after unmounting"
cmp -s -- "$example_patch/$shadowed" "$sub/$shadowed" || die "the substitution was modified by a read-only walk"

say "Demo finished"
