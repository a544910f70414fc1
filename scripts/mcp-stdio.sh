#!/usr/bin/env bash
# `ce mcp` driven by the official MCP client library over stdio.
#
# It installs @modelcontextprotocol/client 2.4.0 and
# @modelcontextprotocol/ext-tasks 0.2.2 from scripts/mcp-stdio/package-lock.json
# (`npm ci`, Node 20 or newer), builds ce, starts `ce serve FILE --json` on a
# temp file, makes two invitations with `ce invite`, and runs
# scripts/mcp-stdio/stdio.test.mjs with node's test runner: two hosts, each
# launching its own `ce mcp` through the SDK's stdio transport.
#
#   scripts/mcp-stdio.sh                    from the repository root, or from .ci/run
#   CE_MCP_STDIO_VERBOSE=1 scripts/mcp-stdio.sh   also print each step and ce's logs
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/scripts/mcp-stdio"
start=$(date +%s)

if ! command -v node >/dev/null || ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  echo "mcp-stdio: Node.js 20 or newer is needed (found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi
installed() { node -p "try { require('$dir/node_modules/$1/package.json').version } catch { '' }"; }
locked() { node -p "require('$dir/package-lock.json').packages['node_modules/$1'].version"; }
if [ "$(installed @modelcontextprotocol/client)" != "$(locked @modelcontextprotocol/client)" ] ||
   [ "$(installed @modelcontextprotocol/ext-tasks)" != "$(locked @modelcontextprotocol/ext-tasks)" ]; then
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "node $(node --version), @modelcontextprotocol/client $(installed @modelcontextprotocol/client), @modelcontextprotocol/ext-tasks $(installed @modelcontextprotocol/ext-tasks)"

work="$(mktemp -d)"
. "$root/scripts/room.sh"
cleanup() {
  room_stop
  rm -rf "$work"
}
trap cleanup EXIT

room_build "$root" "$work"
printf '# Idea\n\nA room for the stdio test.\n\n## Plan\n\nstep one\n' > "$work/idea.md"
room_start mcp-stdio "$work/ce" "$work/idea.md" "$work/serve.json" "$work/serve.log" --log-level warn
invite() { "$work/ce" invite --workspace "$work/idea.md" --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).uri))'; }
export CE_BIN="$work/ce"
CE_INVITE_CREATOR="$(invite)"
CE_INVITE_WORKER="$(invite)"
export CE_INVITE_CREATOR CE_INVITE_WORKER
export CE_STATE_DIR="$work/state"
mkdir -m 700 "$CE_STATE_DIR"
(cd "$dir" && node --test --test-timeout 60000 stdio.test.mjs)
echo "mcp-stdio took $(( $(date +%s) - start ))s"
