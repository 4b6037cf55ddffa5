# Shared set-up of the load scripts; source it after setting PROFILE.
# Sets root (the repository), work (a temp dir removed on exit), pids
# (background processes killed on exit) and out (target/release or
# target/debug); gives free_port and build ARGS… (cargo build in PROFILE,
# skipped with BUILD=0, to run binaries already built).

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d -t "gpuscale-$(basename "$0" .sh)-XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

if [ "$PROFILE" = release ]; then out="$root/target/release"; else out="$root/target/debug"; fi

build() {
  [ "${BUILD:-1}" = 0 ] && return
  if [ "$PROFILE" = release ]; then
    (cd "$root" && cargo build --release "$@")
  else
    (cd "$root" && cargo build "$@")
  fi
}
