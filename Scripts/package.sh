#!/usr/bin/env bash
# Builds proxybundle_VERSION-REV~debN_amd64.deb from the release executable, stripped, and
# proxybundle-dbgsym_..._amd64.deb with its symbols (/usr/lib/debug/.build-id/...), as
# Debian's own packages split them. The binary links the system's libraries as Debian's
# packages do (glibc, libfuse3, liburing, libcrypto, libstdc++, each a shared library of its
# Debian package, so their security updates reach it) and carries the Swift runtime and Apple's ICU
# (_FoundationICU) statically (`-static-stdlib`: Debian ships no Swift runtime). Its Depends
# are computed from those libraries' shlibs files (dpkg-shlibdeps), with fuse3 for mount.fuse.
# The package: the binary in /usr/bin, the man page, bash, zsh and fish completions, the
# systemd template unit (installed, not enabled), the README with the docs it links to, the
# copyright file, the Debian changelog. Installed with `apt install ./proxybundle_..._amd64.deb`,
# which pulls in the libraries, it needs no Swift toolchain.
# Reproducible: two runs on one commit give the same bytes. Every file's time is
# SOURCE_DATE_EPOCH (the commit's time unless set), owners are root, dpkg-deb sorts entries.
#   Scripts/package.sh [--binary PATH] [--output DIR] [--revision N]
#     --binary PATH   package this executable instead of building the release one (in
#                     .build-package); it must need no library that no Debian package provides
#     --output DIR    where the .debs go (default: the current directory)
#     --revision N    the Debian revision (default 1)
# DEBFULLNAME and DEBEMAIL name the maintainer (Debian's usual variables).
set -euo pipefail
umask 022
root=$(cd "$(dirname "$0")/.." && pwd -P)
binary="" output=$PWD revision=1
while [ $# -gt 0 ]; do
  case $1 in
    --binary) binary=$2; shift 2 ;;
    --output) output=$2; shift 2 ;;
    --revision) revision=$2; shift 2 ;;
    *) echo "package.sh: unknown argument $1 (see the header of Scripts/package.sh)" >&2; exit 64 ;;
  esac
done
for tool in dpkg-deb dpkg-shlibdeps objcopy readelf; do
  command -v $tool >/dev/null || { echo "package.sh: $tool is missing (Debian's dpkg-dev and binutils packages)" >&2; exit 1; }
done
maintainer="${DEBFULLNAME:-proxybundle developers} <${DEBEMAIL:-proxybundle@users.noreply.github.com}>"

if [ -z "$binary" ]; then
  [ -x /opt/swift/usr/bin/swift ] && export PATH="/opt/swift/usr/bin:$PATH"
  # no $ORIGIN run path (lintian's custom-library-search-path): every library is the system's
  (cd "$root" && swift build -c release -Xswiftc -static-stdlib --disable-local-rpath --scratch-path .build-package \
     --product proxybundle >&2)
  binary=$root/.build-package/release/proxybundle
fi
[ -x "$binary" ] || { echo "package.sh: $binary is not an executable" >&2; exit 1; }
upstream=$("$binary" --version | sed -n '1s/^proxybundle \([^ ]*\) .*/\1/p')
commit=$("$binary" --version | sed -n '1s/.*(commit \([^)]*\)).*/\1/p')
[ -n "$upstream" ] || { echo "package.sh: $binary --version names no version" >&2; exit 1; }
# the distribution this is built on and for: glibc's NSS modules must match (README, Install)
. /etc/os-release
codename=${VERSION_CODENAME:?package.sh: /etc/os-release names no VERSION_CODENAME}
version="$upstream-$revision~deb${VERSION_ID%%.*}"
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null) \
    || { echo "package.sh: not a git checkout: set SOURCE_DATE_EPOCH" >&2; exit 1; }
fi
export SOURCE_DATE_EPOCH

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage=$work/proxybundle debug=$work/dbgsym
mkdir -m 755 "$stage" "$debug"
doc=$stage/usr/share/doc/proxybundle

# the binary stripped, its symbols in the dbgsym package under its build id
section() { # FILE NAME: the section's file offset and size, in hex
  readelf -S -W "$1" 2>/dev/null | sed -n "s/^ *\[ *[0-9]*\] $2  *[A-Z_]*  *[0-9a-f]*  *\([0-9a-f]*\)  *\([0-9a-f]*\) .*/\1 \2/p"
}
zero() { dd if=/dev/zero of="$1" bs=1 seek="$2" count="$3" conv=notrunc status=none; }
id_offset() { local offset size; read -r offset size < <(section "$1" .note.gnu.build-id); echo $((16#$offset + 16)); }
[ -n "$(section "$binary" .note.gnu.build-id)" ] || { echo "package.sh: $binary has no build id (link with --build-id)" >&2; exit 1; }
symbols=$work/symbols.debug
objcopy --only-keep-debug --compress-debug-sections "$binary" "$symbols"
mkdir -p "$stage/usr/bin"
stripped=$stage/usr/bin/proxybundle
objcopy --strip-all --remove-section=.comment "$binary" "$stripped"
# Two compilations of one commit give the same code but differ in the module hashes Swift
# writes to .swift_modhash (read by debuggers, never at run time), and so in the linker's
# build id: the section is zeroed, and the build id made the SHA-1 of the stripped binary
# (its own 20 bytes zero), so that one commit's package is the same bytes every time.
if [ -n "$(section "$stripped" .swift_modhash)" ]; then
  read -r offset size < <(section "$stripped" .swift_modhash)
  zero "$stripped" $((16#$offset)) $((16#$size))
fi
zero "$stripped" "$(id_offset "$stripped")" 20
build_id=$(sha1sum "$stripped" | cut -c1-40)
for file in "$stripped" "$symbols"; do
  printf "$(sed 's/../\\x&/g' <<<"$build_id")" | dd of="$file" bs=1 seek="$(id_offset "$file")" conv=notrunc status=none
done
chmod 755 "$stripped"
# the libraries it links, as Depends: each library's package and version from its shlibs file
mkdir -p "$work/shlibs/debian"
printf '%s\n' "Source: proxybundle" "" "Package: proxybundle" "Architecture: amd64" > "$work/shlibs/debian/control"
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e"$stripped" 2>"$work/shlibs.log") || {
  echo "package.sh: $binary links a library no Debian package provides (build it with -static-stdlib):" >&2
  grep -m 3 "error" "$work/shlibs.log" >&2
  exit 1
}
depends=$(sed -n 's/^shlibs:Depends=//p' <<<"$shlibs")
# dpkg-shlibdeps goes by the symbols used, not by version nodes: the packed relative
# relocations (lld's -z pack-relative-relocs) need glibc's GLIBC_ABI_DT_RELR, new in 2.36
if readelf -V -W "$stripped" | grep -q "Name: GLIBC_ABI_DT_RELR"; then
  depends=$(sed -E 's/libc6 \(>= 2\.([0-9]|[0-2][0-9]|3[0-5])(\.[0-9]+)?\)/libc6 (>= 2.36)/' <<<"$depends")
fi
[ -n "$depends" ] || { echo "package.sh: dpkg-shlibdeps found no library $binary links (a static executable?)" >&2; exit 1; }
install -D -m 644 "$symbols" "$debug/usr/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug"
rm "$symbols"

install -D -m 644 "$root/docs/proxybundle.8" "$stage/usr/share/man/man8/proxybundle.8"
gzip -9n "$stage/usr/share/man/man8/proxybundle.8"
"$binary" --generate-completion-script bash | sed "1{/^#!/d}" | install -D -m 644 /dev/stdin "$stage/usr/share/bash-completion/completions/proxybundle"
"$binary" --generate-completion-script zsh | install -D -m 644 /dev/stdin "$stage/usr/share/zsh/vendor-completions/_proxybundle"
"$binary" --generate-completion-script fish | install -D -m 644 /dev/stdin "$stage/usr/share/fish/vendor_completions.d/proxybundle.fish"
install -D -m 644 "$root/docs/systemd/proxybundle@.service" "$stage/usr/lib/systemd/system/proxybundle@.service"
# the README and what it links to, at the same relative paths; LICENSE is the copyright file
install -D -m 644 "$root/README.md" "$doc/README.md"
sed -i 's|(LICENSE)|(copyright)|; s|(docs/debian/copyright)|(copyright)|' "$doc/README.md"
for file in docs/MERGED-VIEW.md docs/DESIGN.md docs/BENCHMARKS.md docs/bench-chart.svg docs/proxybundle.8 \
            Examples/README.md; do
  install -D -m 644 "$root/$file" "$doc/$file"
done
install -D -m 644 "$root/docs/debian/copyright" "$doc/copyright"
date=$(date -u -R -d "@$SOURCE_DATE_EPOCH")
printf '%s\n' "proxybundle ($version) $codename; urgency=medium" "" \
  "  * Upstream release $upstream, built from commit ${commit:-unknown}." "" \
  " -- $maintainer  $date" | gzip -9n > "$doc/changelog.Debian.gz"
chmod 644 "$doc/changelog.Debian.gz"

# the dbgsym package's own doc directory is a link to the main package's, as Debian's are
mkdir -p "$debug/usr/share/doc"
ln -s proxybundle "$debug/usr/share/doc/proxybundle-dbgsym"

control() { # DIR PACKAGE: DEBIAN/control (from stdin, after the common fields) and md5sums
  mkdir -m 755 "$1/DEBIAN"
  { printf '%s\n' "Package: $2" "Version: $version" "Architecture: amd64" "Maintainer: $maintainer" \
      "Installed-Size: $(du -sk --apparent-size "$1" | cut -f1)"; cat; } > "$1/DEBIAN/control"
  (cd "$1" && find usr -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) > "$1/DEBIAN/md5sums"
  chmod 644 "$1/DEBIAN/control" "$1/DEBIAN/md5sums"
  find "$1" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
}
control "$stage" proxybundle <<CONTROL
Depends: $depends, fuse3
Recommends: skopeo, zstd, gpgv, curl
Section: admin
Priority: optional
Homepage: https://github.com/proxybundle/proxybundle
Description: change an application's resources without rebuilding it
 A FUSE file system that shows a read-only main bundle (an app's resource
 directory) under read-only patches under a writable substitution directory,
 with the semantics of kernel overlayfs and OCI whiteouts. It also tells which
 file an app loads for a resource (NSBundle and UIImage rules) and which
 patched files never take effect.
CONTROL
control "$debug" proxybundle-dbgsym <<CONTROL
Depends: proxybundle (= $version)
Section: debug
Priority: optional
Auto-Built-Package: debug-symbols
Build-Ids: $build_id
Description: debug symbols for proxybundle
CONTROL

deb="$output/proxybundle_${version}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
dpkg-deb --root-owner-group -Zxz --build "$debug" "$output/proxybundle-dbgsym_${version}_amd64.deb" >/dev/null
echo "$deb"
