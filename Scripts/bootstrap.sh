#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test proxybundle.
# Idempotent and quiet when everything is already present.
set -euo pipefail

packages=(libfuse3-dev liburing-dev libssl-dev fuse3 pkg-config attr sqlite3 rsync git tar fio
          strace  # counts what a lookup asks the layers (PatchIndexTests)
          man-db groff-base zsh fish  # the man page and completion tests
          lintian dpkg-dev debootstrap  # the package tests: lintian, dpkg-shlibdeps, a clean Debian root
          python3  # its plistlib writes the property lists PropertyListTests read
          unicode-data  # CaseFolding.txt, NormalizationTest.txt: CaseFoldTests; Scripts/casefold-table.py
          libext2fs2  # e2fsprogs' copy of the kernel's casefold tables: CaseFoldOracleTests
          docker-registry skopeo zstd gzip openssl apache2-utils  # delivery: registry, client, codecs; test CA, htpasswd
          gnupg gpgv curl nginx-light)  # signed patches: keys and signing, checks, signature fetches; a signature store
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bootstrap: missing packages (${missing[*]}); run as root or install them" >&2
    exit 1
  fi
  echo "bootstrap: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # another apt or dpkg (an unattended upgrade) may hold the locks: wait for it, up to 10 min
  wait_apt=(-o DPkg::Lock::Timeout=600)
  for attempt in $(seq 1 120); do
    if out=$(apt-get "${wait_apt[@]}" update -qq 2>&1); then break; fi
    grep -qi "lock" <<<"$out" && [ "$attempt" -lt 120 ] || { echo "$out" >&2; exit 1; }
    [ "$attempt" -eq 1 ] && echo "bootstrap: waiting for another apt to finish"
    sleep 5
  done
  apt-get "${wait_apt[@]}" install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  echo "bootstrap: swift is at /opt/swift/usr/bin; add it to PATH" >&2
fi
