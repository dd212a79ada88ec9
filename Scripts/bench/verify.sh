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
registry_pid="" nginx_pid="" gnupg=""
cleanup() {
  umount -l "$scratch/mnt" 2>/dev/null || true
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null && wait "$registry_pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null || true
  [ -n "$gnupg" ] && { GNUPGHOME=$gnupg gpgconf --kill all 2>/dev/null; rm -rf "$gnupg"; }
  rm -rf "$scratch"
}
trap cleanup EXIT
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rport=$(port); nport=$(port); host=127.0.0.1:$rport
mkdir -p "$scratch/registry/data" "$scratch/sigs" "$scratch/nginx" "$scratch/registries.d" "$scratch/main" "$scratch/mnt"
printf 'version: 0.1\nlog: { level: error }\nstorage: { filesystem: { rootdirectory: %s/registry/data } }\nhttp: { addr: %s }\n' "$scratch" "$host" > "$scratch/registry/config.yml"
/usr/bin/docker-registry serve "$scratch/registry/config.yml" > "$scratch/registry/log" 2>&1 & registry_pid=$!
cat > "$scratch/nginx/nginx.conf" <<EOF
daemon off; master_process off; pid $scratch/nginx/pid; error_log $scratch/nginx/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $scratch/nginx; proxy_temp_path $scratch/nginx;
       fastcgi_temp_path $scratch/nginx; uwsgi_temp_path $scratch/nginx; scgi_temp_path $scratch/nginx;
       server { listen 127.0.0.1:$nport; root $scratch/sigs; } }
EOF
nginx -c "$scratch/nginx/nginx.conf" -p "$scratch/nginx" 2>/dev/null & nginx_pid=$!
for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$rport) 2>/dev/null && break; sleep 0.05; done
printf 'docker:\n  %s:\n    lookaside: http://127.0.0.1:%s\n    lookaside-staging: file://%s\n' "$host" "$nport" "$scratch/sigs" > "$scratch/registries.d/t.yaml"
gnupg=$(mktemp -d /tmp/pb-si-gpg.XXXXXX); export GNUPGHOME=$gnupg
gpg --batch --passphrase '' --quick-gen-key 'T <t@proxybundle.invalid>' ed25519 sign never 2>/dev/null
fpr=$(gpg --with-colons --list-keys t@proxybundle.invalid 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')
gpg --export "$fpr" > "$scratch/t.gpg"
for v in v1 v2; do mkdir -p "$scratch/src-$v/files"; for i in $(seq 20); do echo "$v $i" > "$scratch/src-$v/files/$i"; done
  "$binary" push "$scratch/src-$v" "$host/app:$v" --tls-verify=false --registries.d "$scratch/registries.d" --sign-by "$fpr" > /dev/null; done
echo '{"default":[{"type":"insecureAcceptAnything"}]}' > "$scratch/anything.json"
printf '{"default":[{"type":"reject"}],"transports":{"docker":{"%s":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"%s"}]}}}\n' "$host" "$scratch/t.gpg" > "$scratch/signed.json"
"$binary" mount "$scratch/main" "$scratch/mnt" --no-substitution
set_image() { "$binary" layers "$scratch/mnt" --set-image "$host/app:$2" --store "$scratch/store" --tls-verify=false --policy "$scratch/$1.json" --registries.d "$scratch/registries.d" > /dev/null 2>&1; }
for p in signed anything; do for v in v1 v2; do set_image $p $v; done; done
ms() { local s e; s=$(date +%s%N); set_image "$1" "$2"; e=$(date +%s%N); echo $(( (e - s) / 1000 )) | awk '{ printf "%.1f\n", $1 / 1000 }'; }
for r in $(seq "$rounds"); do for v in v1 v2; do echo "anything $(ms anything $v)"; echo "signed $(ms signed $v)"; done; done > "$scratch/times"
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
a=$(awk '$1 == "anything" { print $2 }' "$scratch/times" | median); s=$(awk '$1 == "signed" { print $2 }' "$scratch/times" | median)
echo "set-image in the store, median of $((2 * rounds)) each: unverified $a ms, signed $s ms ($(echo "$s - $a" | bc -l) ms)"
paste -sd' ' "$scratch/times"
"$binary" unmount "$scratch/mnt"
