#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks to build and test proxybundle.
# Idempotent and quiet when everything is already present.
set -euo pipefail

packages=(libfuse3-dev fuse3 pkg-config attr sqlite3 rsync git tar fio)
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
  apt-get update -qq >/dev/null
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
  echo "bootstrap: swift is at /opt/swift/usr/bin; add it to PATH" >&2
fi
