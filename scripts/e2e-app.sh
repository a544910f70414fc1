#!/usr/bin/env bash
# The room's board as an MCP App, end to end in a real headless browser.
#
# It installs what it needs (Debian's chromium when absent; playwright-core,
# @modelcontextprotocol/ext-apps 2.0.4, its peers and esbuild from
# e2e/package-lock.json with `npm ci`; no browser is ever downloaded),
# builds ce, starts `ce serve FILE --json` on a temp file, joins two agents
# over HTTP (an owner from the banner's invitation, a worker with
# read,checkout), makes an invitation with read,approve for the approver,
# whose MCP client session is the SDK client over `ce mcp`, and runs
# e2e/mcp-app.test.mjs with node's test runner. Screenshots land in
# e2e/artifacts/ (or $CE_E2E_ARTIFACTS).
#
#   scripts/e2e-app.sh        from the repository root, or from .ci/run
#   CE_E2E_KEEP=DIR           also copy the server log and JSON files to DIR
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
e2e="$root/e2e"
chromium="${CE_E2E_CHROMIUM:-/usr/bin/chromium}"
export CE_E2E_ARTIFACTS="${CE_E2E_ARTIFACTS:-$e2e/artifacts}"
start=$(date +%s)

# --- what the test needs ------------------------------------------------------
if [ ! -x "$chromium" ]; then
  echo "installing Debian's chromium"
  if [ "$(id -u)" -ne 0 ]; then
    echo "e2e-app: $chromium is missing and this is not root; install it with: apt-get install -y chromium" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq chromium >/dev/null
fi
if ! command -v node >/dev/null || ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
  echo "e2e-app: Node.js 20 or newer is needed (found: $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
# npm ci from the committed lock, unless node_modules already holds exactly
# the locked versions of what this test imports.
stale=""
for pkg in playwright-core @modelcontextprotocol/ext-apps @modelcontextprotocol/client @modelcontextprotocol/core esbuild zod; do
  locked="$(node -p "require('$e2e/package-lock.json').packages['node_modules/$pkg'].version")"
  installed="$(node -p "try { require('$e2e/node_modules/$pkg/package.json').version } catch { '' }")"
  [ "$locked" = "$installed" ] || stale="$pkg"
done
if [ -n "$stale" ]; then
  (cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error)
fi
v() { node -p "require('$e2e/node_modules/$1/package.json').version"; }
echo "node $(node --version), $("$chromium" --version 2>/dev/null | head -1), playwright-core $(v playwright-core)," \
  "ext-apps $(v @modelcontextprotocol/ext-apps), client $(v @modelcontextprotocol/client), esbuild $(v esbuild)"

# --- the room -------------------------------------------------------------------
work="$(mktemp -d)"
. "$root/scripts/room.sh"
cleanup() {
  room_stop
  if [ -n "${CE_E2E_KEEP:-}" ]; then mkdir -p "$CE_E2E_KEEP" && cp "$work"/*.json "$work"/*.log "$CE_E2E_KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

room_build "$root" "$work"
printf '# Trip plan\n\nA weekend away, planned together.\n\n## Goals\n\nTo be written.\n\n## Plan\n\nStep one.\n' >"$work/trip.md"
room_start e2e-app "$work/ce" "$work/trip.md" "$work/banner.json" "$work/serve.log" --name host
field() { node -e 'const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); process.stdout.write(String(o[process.argv[2]]))' "$1" "$2"; }
ingress="$(field "$work/banner.json" ingress_url)"

node "$e2e/join.mjs" "$ingress" "$(field "$work/banner.json" invite)" owner >"$work/owner.json"
"$work/ce" invite --workspace "$work/trip.md" --json --capabilities read,checkout --max-uses 1 >"$work/worker-invite.json"
node "$e2e/join.mjs" "$ingress" "$(field "$work/worker-invite.json" uri)" worker >"$work/worker.json"
"$work/ce" invite --workspace "$work/trip.md" --json --capabilities read,approve --max-uses 1 >"$work/approver-invite.json"
mkdir -p "$work/state"

export CE_E2E_BANNER="$work/banner.json" CE_E2E_OWNER="$work/owner.json" CE_E2E_WORKER="$work/worker.json" \
  CE_E2E_APPROVER_INVITE="$work/approver-invite.json" CE_BIN="$work/ce" CE_E2E_STATE_DIR="$work/state" \
  CE_E2E_CHROMIUM="$chromium"
mkdir -p "$CE_E2E_ARTIFACTS"
set +e
(cd "$e2e" && timeout 240 node --test --test-reporter=spec --test-timeout=120000 mcp-app.test.mjs)
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "--- ce serve log (last 40 lines)"
  tail -40 "$work/serve.log" || true
fi
echo "e2e-app: $(($(date +%s) - start)) s; screenshots in $CE_E2E_ARTIFACTS"
exit $rc
