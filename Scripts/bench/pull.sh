#!/usr/bin/env bash
# Delivery through a registry (issue 35), against a local docker-registry on 127.0.0.1:
#  1. pull + extract of an image of ~20,000 files, ~700 MB in five layers: `proxybundle pull`
#     beside `skopeo copy` + `tar -x` of the same layers (each into its own directory, then
#     `sync -f`, as a pull syncs what it extracted), ROUNDS rounds (the order alternates), each
#     from an empty store; prints each side's wall, user and system seconds and their ratios
#     per round (system time, mostly ext4 allocating inodes, varies 3x between identical runs
#     on a shared disk; user time is the steady figure);
#  2. the update to v2, whose only new layer is a 5 MB hotfix: the bytes the registry sent;
#  3. `layers --set-image v2` (not yet pulled, then back and forth once pulled) while two
#     readers loop over the mount: every read must give the old or the new content; prints the
#     time from the command's start until a reader first sees v2 and until the command returns
#     (after which every open sees v2: checked at once on every changed file).
#  4. verification (issue 48): v1 and v2 signed with a GPG key (simple signing, signatures
#     served by nginx as the lookaside store): `pull` of v1 under a policy that demands the
#     signature beside one that accepts anything (same registries.d), ROUNDS rounds from an
#     empty store, the order alternating; then `layers --set-image` between v1 and v2, both in
#     the store, 2 x ROUNDS switches under each policy: the median command time of each.
# PB_PROFILE=DIR also profiles one pull (see below); PB_ONLY=verify runs the fourth part only.
# Run as root (the mount, syncfs).
#   Scripts/bench/pull.sh [BINARY] [ROUNDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
binary=${1:-$here/../../.build/release/proxybundle}
rounds=${2:-3}
scratch=$(mktemp -d /var/tmp/pb-pull-bench.XXXXXX)
registry_pid="" nginx_pid="" gnupg=""
cleanup() {
  umount -l "$scratch/mnt" 2>/dev/null || true
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null && wait "$registry_pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null || true
  [ -n "$gnupg" ] && { GNUPGHOME=$gnupg gpgconf --kill all 2>/dev/null; rm -rf "$gnupg"; }
  rm -rf "$scratch"
}
trap cleanup EXIT
cc -O2 -o "$scratch/pbbench" "$here/pbbench.c"
now() { date +%s.%N; }
elapsed() { echo "$2 - $1" | bc; }

# the registry, plain HTTP on a free port (as the tests start it)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$scratch/registry/data"
cat > "$scratch/registry/config.yml" <<EOF
version: 0.1
log: { level: error, accesslog: { disabled: false } }
storage: { filesystem: { rootdirectory: $scratch/registry/data } }
http: { addr: 127.0.0.1:$port }
EOF
/usr/bin/docker-registry serve "$scratch/registry/config.yml" > "$scratch/registry/log" 2>&1 & registry_pid=$!
for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
host=127.0.0.1:$port

# four base layers of 4,750 files (1 to 70 kB; half random bytes, half text), 500 small `u*`
# files for the readers in the last, and a 5 MB hotfix: 50 files of 100 kB and 500 small `m*`
# files holding `one` (v1) or `two` (v2)
echo "generating the layers" >&2
perl - "$scratch/src" <<'EOF'
use strict;
my $root = shift;
mkdir $root;
open(my $random, '<', '/dev/urandom') or die;
my @words = qw(label title button message error warning done cancel settings account network
               image colour layout version update install remove open close save);
sub put { my ($path, $data) = @_; open(my $f, '>', $path) or die "$path: $!"; print $f $data; close $f; }
sub bytes { my $n = shift; my $data; read($random, $data, $n) == $n or die; $data }
sub text { my ($n, $i) = @_; my $t = ''; my $k = $i;
           while (length($t) < $n) { $t .= "\"$words[$k % 20].$k\" = \"$words[($k * 7) % 20] $words[($k * 13) % 20] $k\";\n"; $k++ }
           substr($t, 0, $n) }
for my $layer (1 .. 4) {
    for my $i (0 .. 4749) {
        my $dir = sprintf("%s/base%d/res%d/d%02d", $root, $layer, $layer, $i % 50);
        mkdir "$root/base$layer"; mkdir "$root/base$layer/res$layer"; mkdir $dir;
        my $n = 1000 + ($i * 7919 + $layer * 104729) % 69000;
        put(sprintf("%s/f%04d.%s", $dir, $i, $i % 2 ? 'bin' : 'strings'), $i % 2 ? bytes($n) : text($n, $i));
    }
}
mkdir "$root/base4/read";
put("$root/base4/read/u$_", "main\n") for 0 .. 499;
for my $version ('one', 'two') {
    my $dir = "$root/hotfix-$version";
    mkdir $dir; mkdir "$dir/read"; mkdir "$dir/bulk";
    put("$dir/read/m$_", "$version\n") for 0 .. 499;
    put("$dir/bulk/b$_.bin", bytes(100_000)) for 0 .. 49;
}
EOF
(cd "$scratch/src/base4" && ls read | sed 's|^|read/|') > "$scratch/list"
(cd "$scratch/src/hotfix-one" && ls read | sed 's|^|read/|') >> "$scratch/list"

# the images, made by proxybundle push: base1..base4 stacked, then v1 and v2 over base4
echo "pushing the images" >&2
push() { "$binary" push "$1" "$host/app:$2" --tls-verify=false ${3:+--base "$host/app:$3"} > /dev/null 2>&1; }
push "$scratch/src/base1" b1
push "$scratch/src/base2" b2 b1
push "$scratch/src/base3" b3 b2
push "$scratch/src/base4" b4 b3
push "$scratch/src/hotfix-one" v1 b4
push "$scratch/src/hotfix-two" v2 b4
files=$(find "$scratch/src/base"* "$scratch/src/hotfix-one" -type f | wc -l)
bytes=$(du -sb "$scratch/src/base"* "$scratch/src/hotfix-one" | awk '{ s += $1 } END { print s }')
echo "image v1: $files files, $((bytes / 1000000)) MB in 5 layers"

timed() { /usr/bin/time -f "%e %U %S" -o "$scratch/time" "$@" > "$scratch/timed.out"; cat "$scratch/time"; }
ratio() { echo "$1 / $2" | bc -l; }
if [ "${PB_ONLY:-}" != verify ]; then
# 1. pull + extract, side by side
skopeo_tar() {  # skopeo copy, then tar -x of each layer (bottom first) into its own directory
  skopeo copy --quiet --src-tls-verify=false "docker://$host/app:v1" "oci:$1/oci:v1"
  local manifest n=0
  manifest=$(jq -r '.manifests[0].digest' "$1/oci/index.json" | cut -d: -f2)
  for blob in $(jq -r '.layers[].digest' "$1/oci/blobs/sha256/$manifest" | cut -d: -f2); do
    n=$((n + 1)); mkdir -p "$1/layers/$n"
    tar -xzf "$1/oci/blobs/sha256/$blob" -C "$1/layers/$n"
  done
  sync -f "$1/layers"
}
# wall, user and system seconds of a command (children included), as "WALL USER SYSTEM"
export -f skopeo_tar; export host
echo "round  pull: wall  user  sys   skopeo+tar: wall  user  sys   ratios: wall  user  sys"
for round in $(seq "$rounds"); do
  rm -rf "$scratch/store" "$scratch/pair"; mkdir -p "$scratch/pair"; sync
  # the order alternates, so neither side always runs on what the other left
  if [ $((round % 2)) = 0 ]; then read -r pair_wall pair_user pair_sys < <(timed bash -c 'skopeo_tar "$0"' "$scratch/pair"); fi
  read -r ours_wall ours_user ours_sys < <(timed "$binary" pull "$host/app:v1" --store "$scratch/store" --tls-verify=false)
  cp "$scratch/timed.out" "$scratch/patches"
  if [ $((round % 2)) = 1 ]; then read -r pair_wall pair_user pair_sys < <(timed bash -c 'skopeo_tar "$0"' "$scratch/pair"); fi
  printf "%5d  %11.2f %5.2f %5.2f  %17.2f %5.2f %5.2f  %13.2f %5.2f %5.2f\n" "$round" "$ours_wall" "$ours_user" "$ours_sys" \
    "$pair_wall" "$pair_user" "$pair_sys" "$(ratio "$ours_wall" "$pair_wall")" "$(ratio "$ours_user" "$pair_user")" \
    "$(ratio "$ours_sys" "$pair_sys")"
done
cmp <(cd "$scratch/pair/layers/5" && find . | sort) \
    <(cd "$(head -1 "$scratch/patches")" && find . | sort) > /dev/null \
  || echo "warning: the top layers differ" >&2

# PB_PROFILE=DIR: one more pull into an empty store with its progress lines (each layer's
# extraction time) in DIR/progress.txt, and one under `perf record -g` in DIR/perf.data
if [ -n "${PB_PROFILE:-}" ]; then
  mkdir -p "$PB_PROFILE"; rm -rf "$scratch/store-profile"
  script -qfec "stty cols 200; $binary pull $host/app:v1 --store $scratch/store-profile --tls-verify=false" /dev/null \
    | tr '\r' '\n' | grep -E 'extracted' > "$PB_PROFILE/progress.txt" || true
  rm -rf "$scratch/store-profile"
  perf record -q -g -o "$PB_PROFILE/perf.data" -- "$binary" pull "$host/app:v1" --store "$scratch/store-profile" \
    --tls-verify=false > /dev/null 2>&1 || echo "warning: perf record failed" >&2
fi

# 2. the update: bytes the registry sends for v2 once v1 is in the store
before=$(wc -l < "$scratch/registry/log")
start=$(now); "$binary" pull "$host/app:v2" --store "$scratch/store" --tls-verify=false > /dev/null; end=$(now)
sent=$(tail -n +"$((before + 1))" "$scratch/registry/log" | awk '$6 ~ /GET/ && $9 ~ /^2/ { s += $10 } END { print s + 0 }')
printf "update to v2: %.1f MB sent by the registry, pulled in %.2f s\n" "$(echo "$sent / 1000000" | bc -l)" \
  "$(elapsed "$start" "$end")"

# 3. --set-image under a reading load
rm -rf "$scratch/store2"
mkdir -p "$scratch/main" "$scratch/mnt"
"$binary" mount "$scratch/main" "$scratch/mnt" --no-substitution
"$binary" layers "$scratch/mnt" --set-image "$host/app:v1" --store "$scratch/store2" --tls-verify=false > /dev/null
switch() {  # IMAGE TEXT LABEL: switch while two readers loop and a watcher waits for TEXT
  "$scratch/pbbench" readloop "$scratch/mnt" "$scratch/list" 4 > "$scratch/r1" & local r1=$!
  "$scratch/pbbench" readloop "$scratch/mnt" "$scratch/list" 4 > "$scratch/r2" & local r2=$!
  "$scratch/pbbench" seen "$scratch/mnt/read/m7" "$2" 30 > "$scratch/seen" & local watcher=$!
  sleep 1
  local start end
  start=$(now)
  "$binary" layers "$scratch/mnt" --set-image "$host/app:$1" --store "$scratch/store2" --tls-verify=false > /dev/null
  end=$(now)
  "$scratch/pbbench" check "$scratch/mnt" "$scratch/list" "$2" > "$scratch/check" || echo "warning: an open after the command saw the old layers" >&2
  wait "$watcher"; local failed=0
  wait "$r1" || failed=1; wait "$r2" || failed=1
  printf "%-28s first open seeing %s after %6.1f ms, command returned after %6.1f ms; %s; readers: %s / %s%s\n" \
    "$3" "$2" "$(echo "($(cut -d' ' -f2 "$scratch/seen") - $start) * 1000" | bc -l)" \
    "$(echo "($end - $start) * 1000" | bc -l)" "$(cat "$scratch/check")" "$(cat "$scratch/r1")" "$(cat "$scratch/r2")" \
    "$([ $failed = 1 ] && echo ' FAILED READS')"
}
switch v2 two "v2 (pulled by the command)"
for i in $(seq "$rounds"); do
  switch v1 one "v1 (in the store)"
  switch v2 two "v2 (in the store)"
done
"$binary" unmount "$scratch/mnt"
fi

# 4. verification: nginx serves the signatures skopeo writes when it signs v1 and v2 in place
nginx_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$scratch/sigs" "$scratch/nginx" "$scratch/registries.d"
cat > "$scratch/nginx/nginx.conf" <<EOF
daemon off; master_process off; pid $scratch/nginx/pid; error_log $scratch/nginx/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $scratch/nginx; proxy_temp_path $scratch/nginx;
       fastcgi_temp_path $scratch/nginx; uwsgi_temp_path $scratch/nginx; scgi_temp_path $scratch/nginx;
       server { listen 127.0.0.1:$nginx_port; root $scratch/sigs; } }
EOF
nginx -c "$scratch/nginx/nginx.conf" -p "$scratch/nginx" 2>/dev/null & nginx_pid=$!
printf 'docker:\n  %s:\n    lookaside: http://127.0.0.1:%s\n    lookaside-staging: file://%s\n' \
  "$host" "$nginx_port" "$scratch/sigs" > "$scratch/registries.d/bench.yaml"
gnupg=$(mktemp -d /tmp/pb-bench-gpg.XXXXXX)
export GNUPGHOME=$gnupg
gpg --batch --passphrase '' --quick-gen-key 'Bench <bench@proxybundle.invalid>' ed25519 sign never 2>/dev/null
gpg --check-trustdb 2>/dev/null
fingerprint=$(gpg --with-colons --list-keys bench@proxybundle.invalid 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')
gpg --export "$fingerprint" > "$scratch/bench.gpg"
for tag in v1 v2; do
  skopeo --registries.d "$scratch/registries.d" copy --quiet --src-tls-verify=false --dest-tls-verify=false \
    --sign-by "$fingerprint" "docker://$host/app:$tag" "docker://$host/app:$tag"
done
echo '{"default":[{"type":"insecureAcceptAnything"}]}' > "$scratch/anything.json"
printf '{"default":[{"type":"reject"}],"transports":{"docker":{"%s":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"%s"}]}}}\n' \
  "$host" "$scratch/bench.gpg" > "$scratch/signed.json"
trusted() {  # POLICY COMMAND...: a command of the binary under that policy and registries.d
  local policy=$1; shift
  "$binary" "$@" --tls-verify=false --policy "$scratch/$policy.json" --registries.d "$scratch/registries.d"
}
echo "verification  round  unverified pull: wall  user  sys   signed pull: wall  user  sys   ratios: wall  user  sys"
for round in $(seq "$rounds"); do
  for side in $([ $((round % 2)) = 1 ] && echo "anything signed" || echo "signed anything"); do
    rm -rf "$scratch/store-$side"; sync
    read -r wall user sys < <(timed "$binary" pull "$host/app:v1" --store "$scratch/store-$side" --tls-verify=false \
                                --policy "$scratch/$side.json" --registries.d "$scratch/registries.d")
    eval "${side}_wall=$wall ${side}_user=$user ${side}_sys=$sys"
  done
  printf "%18d  %21.2f %5.2f %5.2f  %17.2f %5.2f %5.2f  %13.2f %5.2f %5.2f\n" "$round" \
    "$anything_wall" "$anything_user" "$anything_sys" "$signed_wall" "$signed_user" "$signed_sys" \
    "$(ratio "$signed_wall" "$anything_wall")" "$(ratio "$signed_user" "$anything_user")" "$(ratio "$signed_sys" "$anything_sys")"
done
grep -q "$fingerprint" "$scratch/store-signed/images/"* || echo "warning: the signed pull recorded no signer" >&2
mkdir -p "$scratch/main" "$scratch/mnt"
"$binary" mount "$scratch/main" "$scratch/mnt" --no-substitution
for tag in v1 v2; do trusted signed layers "$scratch/mnt" --set-image "$host/app:$tag" --store "$scratch/store-signed" > /dev/null; done
milliseconds() {  # POLICY: each --set-image's time, v1 and v2 in turn, in ms
  for _ in $(seq "$rounds"); do for tag in v1 v2; do
    local start end; start=$(now)
    trusted "$1" layers "$scratch/mnt" --set-image "$host/app:$tag" --store "$scratch/store-signed" > /dev/null 2>&1
    end=$(now); echo "($end - $start) * 1000" | bc -l
  done; done
}
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
unverified_ms=$(milliseconds anything | median) signed_ms=$(milliseconds signed | median)
printf "set-image of an image in the store, median of %d: unverified %.1f ms, signed %.1f ms (%+.1f ms)\n" \
  "$((2 * rounds))" "$unverified_ms" "$signed_ms" "$(echo "$signed_ms - $unverified_ms" | bc -l)"
"$binary" unmount "$scratch/mnt"
