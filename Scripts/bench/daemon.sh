# Sourced by the bench scripts that measure a daemon mounted in the foreground (casefold.sh,
# spellings.sh): waiting for its mount, unmounting it, its CPU time, and the cleanup on exit.
# The script sets `work` (its scratch directory), `mnt` (the mountpoint) and `pid=""`, starts
# `BINARY mount ... --foreground >>"$work/daemon.log" 2>&1 &`, sets `pid=$!` and calls
# `wait_mounted`.

bench=$(basename "$0")

# Waits until the daemon `pid` answers on `mnt` (20 s at most; exits the script otherwise).
wait_mounted() {
  local deadline=$((SECONDS + 20))
  until mountpoint -q "$mnt" && stat "$mnt/." >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] && kill -0 "$pid" 2>/dev/null || { echo "$bench: mount failed" >&2; exit 1; }
    sleep 0.01
  done
}
unmount_pb() { # BINARY
  "$1" unmount "$mnt" >>"$work/daemon.log" 2>&1 || umount -l "$mnt"
  wait "$pid" 2>/dev/null
  pid=""
}
cpu() { awk '{ printf "%d", $14 + $15 }' "/proc/$pid/stat"; }  # clock ticks, every thread's
ticks=$(getconf CLK_TCK)
cleanup() {
  mountpoint -q "$mnt" && { umount "$mnt" 2>/dev/null || umount -l "$mnt"; }
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
