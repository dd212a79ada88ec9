# Sourced by the delivery benches (pull.sh, verify.sh), after they set $scratch: Debian's
# docker-registry and an nginx lookaside (the signature store) on free ports of 127.0.0.1,
# a throwaway GPG key, and one cleanup for them and the scratch directory.
registry_pid="" nginx_pid="" gnupg=""
cleanup() {
  umount -l "$scratch/mnt" 2>/dev/null || true
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null && wait "$registry_pid" 2>/dev/null || true
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null || true
  [ -n "$gnupg" ] && { GNUPGHOME=$gnupg gpgconf --kill all 2>/dev/null; rm -rf "$gnupg"; }
  rm -rf "$scratch"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# start_registry [ACCESSLOG]: the registry, plain HTTP (as the tests start it), its log in
# $scratch/registry/log (with the access log when ACCESSLOG is given); sets $host
start_registry() {
  local port access=""; port=$(free_port)
  [ -n "${1:-}" ] && access=", accesslog: { disabled: false }"
  mkdir -p "$scratch/registry/data"
  printf 'version: 0.1\nlog: { level: error%s }\nstorage: { filesystem: { rootdirectory: %s/registry/data } }\nhttp: { addr: 127.0.0.1:%s }\n' \
    "$access" "$scratch" "$port" > "$scratch/registry/config.yml"
  /usr/bin/docker-registry serve "$scratch/registry/config.yml" > "$scratch/registry/log" 2>&1 & registry_pid=$!
  for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break; sleep 0.05; done
  host=127.0.0.1:$port
}

# start_lookaside: nginx serving $scratch/sigs, where signing writes (lookaside-staging), and
# $scratch/registries.d naming both for $host
start_lookaside() {
  local port; port=$(free_port)
  mkdir -p "$scratch/sigs" "$scratch/nginx" "$scratch/registries.d"
  cat > "$scratch/nginx/nginx.conf" <<CONF
daemon off; master_process off; pid $scratch/nginx/pid; error_log $scratch/nginx/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $scratch/nginx; proxy_temp_path $scratch/nginx;
       fastcgi_temp_path $scratch/nginx; uwsgi_temp_path $scratch/nginx; scgi_temp_path $scratch/nginx;
       server { listen 127.0.0.1:$port; root $scratch/sigs; } }
CONF
  nginx -c "$scratch/nginx/nginx.conf" -p "$scratch/nginx" 2>/dev/null & nginx_pid=$!
  printf 'docker:\n  %s:\n    lookaside: http://127.0.0.1:%s\n    lookaside-staging: file://%s\n' \
    "$host" "$port" "$scratch/sigs" > "$scratch/registries.d/bench.yaml"
}

# make_key: a GPG signing key in a throwaway GNUPGHOME; sets $fingerprint, exports the public
# key to $scratch/key.gpg and writes the policies $scratch/anything.json (accepts anything)
# and $scratch/signed.json (demands that key's signature for $host)
make_key() {
  gnupg=$(mktemp -d /tmp/pb-bench-gpg.XXXXXX)
  export GNUPGHOME=$gnupg
  gpg --batch --passphrase '' --quick-gen-key 'Bench <bench@proxybundle.invalid>' ed25519 sign never 2>/dev/null
  gpg --check-trustdb 2>/dev/null
  fingerprint=$(gpg --with-colons --list-keys bench@proxybundle.invalid 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')
  gpg --export "$fingerprint" > "$scratch/key.gpg"
  echo '{"default":[{"type":"insecureAcceptAnything"}]}' > "$scratch/anything.json"
  printf '{"default":[{"type":"reject"}],"transports":{"docker":{"%s":[{"type":"signedBy","keyType":"GPGKeys","keyPath":"%s"}]}}}\n' \
    "$host" "$scratch/key.gpg" > "$scratch/signed.json"
}

# median: the median of the numbers on standard input, one a line
median() { sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
