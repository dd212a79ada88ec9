#!/usr/bin/env bash
# Builds proxybundle_VERSION_amd64.deb from the static release executable: the binary in
# /usr/bin, mount.fuse.proxybundle (what `mount -t fuse.proxybundle` runs), the man page,
# bash, zsh and fish completions, the README and an example systemd unit. Installed with
# `apt install ./proxybundle_VERSION_amd64.deb`, it needs no Swift toolchain.
#   Scripts/package.sh [--binary PATH] [--output DIR]
#     --binary PATH   package this executable instead of building the static release one
#     --output DIR    where the .deb goes (default: the current directory)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd -P)
binary="" output=$PWD
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    *) echo "package.sh: unknown argument $1 (see the header of Scripts/package.sh)" >&2; exit 64 ;;
  esac
done
command -v dpkg-deb >/dev/null || { echo "package.sh: dpkg-deb is missing (Debian's dpkg package)" >&2; exit 1; }

if [ -z "$binary" ]; then
  [ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
  (cd "$root" && swift build -c release -Xswiftc -static-executable --product proxybundle >&2)
  binary=$root/.build/release/proxybundle
fi
[ -x "$binary" ] || { echo "package.sh: $binary is not an executable" >&2; exit 1; }
version=$("$binary" --version | sed -n '1s/^proxybundle \([^ ]*\) .*/\1/p')
[ -n "$version" ] || { echo "package.sh: $binary --version names no version" >&2; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -D -m 755 "$binary" "$stage/usr/bin/proxybundle"
mkdir -p "$stage/usr/sbin"
ln -s mount.fuse3 "$stage/usr/sbin/mount.fuse.proxybundle"
install -D -m 644 "$root/docs/proxybundle.8" "$stage/usr/share/man/man8/proxybundle.8"
gzip -9n "$stage/usr/share/man/man8/proxybundle.8"
"$binary" --generate-completion-script bash | install -D -m 644 /dev/stdin "$stage/usr/share/bash-completion/completions/proxybundle"
"$binary" --generate-completion-script zsh | install -D -m 644 /dev/stdin "$stage/usr/share/zsh/vendor-completions/_proxybundle"
"$binary" --generate-completion-script fish | install -D -m 644 /dev/stdin "$stage/usr/share/fish/vendor_completions.d/proxybundle.fish"
install -D -m 644 "$root/README.md" "$stage/usr/share/doc/proxybundle/README.md"
install -D -m 644 "$root/docs/examples/proxybundle@.service" "$stage/usr/share/doc/proxybundle/examples/proxybundle@.service"
install -D -m 644 "$root/docs/debian/copyright" "$stage/usr/share/doc/proxybundle/copyright"

mkdir -p "$stage/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$stage" | cut -f1)
cat > "$stage/DEBIAN/control" <<CONTROL
Package: proxybundle
Version: $version
Architecture: amd64
Maintainer: proxybundle developers <proxybundle@localhost>
Depends: fuse3
Section: admin
Priority: optional
Installed-Size: $size
Homepage: https://github.com/proxybundle/proxybundle
Description: change an application's resources without rebuilding it
 A FUSE file system that shows a read-only main bundle (an app's resource
 directory) under read-only patches under a writable substitution directory,
 with the semantics of kernel overlayfs and OCI whiteouts. It also tells which
 file an app loads for a resource (NSBundle and UIImage rules) and which
 patched files never take effect.
CONTROL

deb="$output/proxybundle_${version}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
echo "$deb"
