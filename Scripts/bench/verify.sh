#!/usr/bin/env bash
# Issue 48: what verification adds to `layers --set-image` of an image already in the store.
# A registry and nginx (the lookaside signature store) on 127.0.0.1, a GPG key, v1 and v2 of
# a 20-file patch pushed with --sign-by; then ROUNDS x (v1, v2) switches under a policy that
# demands the signature and under one that accepts anything, interleaved; prints the median
# of each and every time. (pull.sh's fourth part does the same on the 680 MB bench image.)
# Run as root (the mount).
#   Scripts/bench/verify.sh [BINARY] [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=${1:-$here/../../.build/release/proxybundle}
rounds=${2:-10}
scratch=$(mktemp -d /var/tmp/pb-setimage.XXXXXX)
. "$here/registry.sh"
mkdir -p "$scratch/main" "$scratch/mnt"
start_registry
start_lookaside
make_key
for v in v1 v2; do mkdir -p "$scratch/src-$v/files"; for i in $(seq 20); do echo "$v $i" > "$scratch/src-$v/files/$i"; done
  "$binary" push "$scratch/src-$v" "$host/app:$v" --tls-verify=false --registries.d "$scratch/registries.d" --sign-by "$fingerprint" > /dev/null; done
"$binary" mount "$scratch/main" "$scratch/mnt" --no-substitution
set_image() { "$binary" layers "$scratch/mnt" --set-image "$host/app:$2" --store "$scratch/store" --tls-verify=false --policy "$scratch/$1.json" --registries.d "$scratch/registries.d" > /dev/null 2>&1; }
for p in signed anything; do for v in v1 v2; do set_image $p $v; done; done
ms() { local s e; s=$(date +%s%N); set_image "$1" "$2"; e=$(date +%s%N); echo $(( (e - s) / 1000 )) | awk '{ printf "%.1f\n", $1 / 1000 }'; }
for r in $(seq "$rounds"); do for v in v1 v2; do echo "anything $(ms anything $v)"; echo "signed $(ms signed $v)"; done; done > "$scratch/times"
a=$(awk '$1 == "anything" { print $2 }' "$scratch/times" | median); s=$(awk '$1 == "signed" { print $2 }' "$scratch/times" | median)
echo "set-image in the store, median of $((2 * rounds)) each: unverified $a ms, signed $s ms ($(echo "$s - $a" | bc -l) ms)"
paste -sd' ' "$scratch/times"
"$binary" unmount "$scratch/mnt"
