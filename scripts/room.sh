# Sourced by the scripts that drive a real `ce serve` (e2e.sh, mcp-clients.sh):
# one way to build ce, start a room, wait for its banner and stop it.
#
#   room_build ROOT DIR            go build ./cmd/ce into DIR/ce
#   room_start NAME CE DOC OUT LOG [serve flags…]
#                                  ce serve DOC --json in the background (its pid in room_pid);
#                                  waits up to 20 s for the one-line banner in OUT; on failure
#                                  prints LOG and exits 1
#   room_stop                      SIGTERM, up to 5 s, then SIGKILL; reaps it

room_pid=""

room_build() {
  (cd "$1" && GOFLAGS="${GOFLAGS:--buildvcs=false}" go build -o "$2/ce" ./cmd/ce)
}

room_start() {
  local name="$1" ce="$2" doc="$3" out="$4" log="$5"
  shift 5
  "$ce" serve "$doc" --json "$@" >"$out" 2>"$log" &
  room_pid=$!
  for _ in $(seq 200); do [ -s "$out" ] && break; kill -0 "$room_pid" 2>/dev/null || break; sleep 0.1; done
  if [ ! -s "$out" ]; then
    echo "$name: ce serve did not start:" >&2
    cat "$log" >&2
    exit 1
  fi
}

room_stop() {
  if [ -n "$room_pid" ] && kill -0 "$room_pid" 2>/dev/null; then
    kill -TERM "$room_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$room_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$room_pid" 2>/dev/null || true
  fi
  wait 2>/dev/null || true
}
