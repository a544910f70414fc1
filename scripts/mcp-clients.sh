#!/usr/bin/env bash
# `ce mcp` under the real MCP clients, over stdio, against one room.
#
# Each client drives the whole handoff through its own `ce mcp` processes
# (one per host, each with its own state file): create as one agent, accept
# as another, the worker asks for input, the requester answers, the worker
# completes, a participant with approve approves; a second handoff is
# cancelled by its owner; and a resource subscription sees an edit made to
# the Markdown file from outside. Each prints its lifecycle's wall time as
# `lifecycle wall time: CLIENT N ms` (create to the approval read back).
#
#   sdk1       @modelcontextprotocol/sdk 1.x (Client + StdioClientTransport; initialize, 2025-11-25)
#              scripts/mcp-clients/sdk1, node --test
#   gosdk      go-sdk's client (mcp.CommandTransport), 2025-11-25 (initialize) and 2026-07-28 (server/discover)
#              scripts/mcp-clients/gosdk, its own Go module, go test
#   client2    @modelcontextprotocol/client 2.x + @modelcontextprotocol/ext-tasks: pinned 2026-07-28 with
#              task handles, tasks/update, tasks/cancel and listens; and its default mode (initialize)
#              scripts/mcp-stdio, node --test
#   inspector  the MCP Inspector's CLI mode (mcp-inspector --cli … --method tools/call), one process per call
#              scripts/mcp-clients/inspector, node --test
#
# The versions are pinned by each directory's package-lock.json (installed
# with `npm ci` when what is installed differs from the lock) and the
# gosdk module's go.mod/go.sum. It builds ce once, starts one room
# (scripts/room.sh), makes three invitations per client (two with the
# default capabilities, one with read,approve), runs every client named on
# the command line (all four by default) and fails if any failed.
#
#   scripts/mcp-clients.sh                     from the repository root, or from .ci/run
#   scripts/mcp-clients.sh sdk1 inspector      only those
#   CE_MCP_CLIENTS_VERBOSE=1 scripts/mcp-clients.sh   also print each step and ce mcp's debug logs
#   CE_MCP_CLIENTS_CE=/path/to/ce scripts/mcp-clients.sh   that ce binary instead of building one
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
here="$root/scripts/mcp-clients"
start=$(date +%s)
all=(sdk1 gosdk client2 inspector)
clients=("$@")
[ ${#clients[@]} -gt 0 ] || clients=("${all[@]}")
for c in "${clients[@]}"; do
  case " ${all[*]} " in *" $c "*) ;; *) echo "mcp-clients: unknown client $c (known: ${all[*]})" >&2; exit 2 ;; esac
done
wants() { case " ${clients[*]} " in *" $1 "*) return 0 ;; esac; return 1; }

if ! command -v node >/dev/null || ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  echo "mcp-clients: Node.js 20 or newer is needed (found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi

# npm_pinned DIR PKG…: `npm ci` in DIR unless every PKG is installed at the
# version its package-lock.json pins; then names each with its version.
installed() { node -p "try { require('$1/node_modules/$2/package.json').version } catch { '' }"; }
locked() { node -p "require('$1/package-lock.json').packages['node_modules/$2'].version"; }
versions="node $(node --version)"
npm_pinned() {
  local dir="$1" pkg stale=""
  shift
  for pkg in "$@"; do
    [ "$(installed "$dir" "$pkg")" = "$(locked "$dir" "$pkg")" ] || stale=1
  done
  if [ -n "$stale" ]; then
    # --ignore-scripts: the inspector's postinstall only installs the
    # clients of a source checkout (it exits early under node_modules), and
    # npm 11 does not run dependencies' install scripts without approval.
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error --ignore-scripts) >&2
  fi
  for pkg in "$@"; do
    [ "$(installed "$dir" "$pkg")" = "$(locked "$dir" "$pkg")" ] || { echo "mcp-clients: $dir: $pkg is not at its locked version after npm ci" >&2; exit 1; }
    versions+=", $pkg $(installed "$dir" "$pkg")"
  done
}
if wants sdk1; then npm_pinned "$here/sdk1" @modelcontextprotocol/sdk; fi
if wants client2; then npm_pinned "$root/scripts/mcp-stdio" @modelcontextprotocol/client @modelcontextprotocol/ext-tasks; fi
if wants inspector; then npm_pinned "$here/inspector" @modelcontextprotocol/inspector; fi
if wants gosdk; then versions+=", $(cd "$here/gosdk" && go list -m -f '{{.Path}} {{.Version}}' github.com/modelcontextprotocol/go-sdk)"; fi
echo "mcp-clients: $versions"

work="$(mktemp -d)"
. "$root/scripts/room.sh"
cleanup() {
  room_stop
  rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${CE_MCP_CLIENTS_CE:-}" ]; then
  cp "$CE_MCP_CLIENTS_CE" "$work/ce"
else
  room_build "$root" "$work"
fi
export CE_BIN="$work/ce"
export CE_DOC="$work/plan.md"
printf '# Plan\n\nA room for the MCP client tests.\n\n## Venue\n\nto be decided\n' > "$CE_DOC"
room_start mcp-clients "$CE_BIN" "$CE_DOC" "$work/serve.json" "$work/serve.log" --log-level warn
invite() {
  "$CE_BIN" invite --workspace "$CE_DOC" "$@" --json |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).uri))'
}

# run NAME DIR COMMAND…: one client with its own participants and state
# files, bounded in time; its output is shown as it runs.
failed=()
summary=()
run() {
  local name="$1" dir="$2" rc t0
  shift 2
  echo "== mcp-clients: $name"
  export CE_STATE_DIR="$work/state/$name"
  mkdir -p -m 700 "$CE_STATE_DIR"
  CE_INVITE_CREATOR="$(invite)"
  CE_INVITE_WORKER="$(invite)"
  CE_INVITE_APPROVER="$(invite --capabilities read,approve)"
  export CE_INVITE_CREATOR CE_INVITE_WORKER CE_INVITE_APPROVER
  t0=$(date +%s)
  set +e
  (cd "$dir" && timeout --kill-after=10 300 "$@") 2>&1 | tee "$work/$name.out"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" -eq 0 ]; then
    summary+=("$name: pass ($(( $(date +%s) - t0 ))s)")
  else
    summary+=("$name: FAIL (exit $rc)")
    failed+=("$name")
  fi
  summary+=("$(grep -ho 'lifecycle wall time: .*' "$work/$name.out" | sed 's/^/  /' || true)")
}

node_test=(node --test --test-concurrency=1 --test-timeout=120000)
if wants sdk1; then run sdk1 "$here/sdk1" "${node_test[@]}" lifecycle.test.mjs; fi
if wants gosdk; then run gosdk "$here/gosdk" env GOFLAGS="${GOFLAGS:--buildvcs=false}" go test -count=1 -v -timeout 240s ./...; fi
if wants client2; then run client2 "$root/scripts/mcp-stdio" "${node_test[@]}" stdio.test.mjs; fi
# The inspector's test starts some 25 processes one after the other.
if wants inspector; then run inspector "$here/inspector" "${node_test[@]}" --test-timeout=240000 inspector.test.mjs; fi

echo "== mcp-clients: results"
printf '%s\n' "${summary[@]}" | sed '/^$/d'
echo "mcp-clients took $(( $(date +%s) - start ))s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "mcp-clients: failed: ${failed[*]}" >&2
  [ -n "${CE_MCP_CLIENTS_VERBOSE:-}" ] || { echo "--- ce serve's log"; cat "$work/serve.log"; } >&2
  exit 1
fi
