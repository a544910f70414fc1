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
. "$root/scripts/e2e-setup.sh" # sets e2e, chromium, CE_E2E_ARTIFACTS, start

# --- what the test needs ------------------------------------------------------
e2e_setup e2e-app playwright-core @modelcontextprotocol/ext-apps @modelcontextprotocol/client @modelcontextprotocol/core esbuild zod

# --- the room -------------------------------------------------------------------
e2e_room

room_build "$root" "$work"
printf '# Trip plan\n\nA weekend away, planned together.\n\n## Goals\n\nTo be written.\n\n## Plan\n\nStep one.\n' >"$work/trip.md"
room_start e2e-app "$work/ce" "$work/trip.md" "$work/banner.json" "$work/serve.log" --name host
ingress="$(field "$work/banner.json" ingress_url)"

node "$e2e/join.mjs" "$ingress" "$(field "$work/banner.json" invite)" owner >"$work/owner.json"
"$work/ce" invite --workspace "$work/trip.md" --json --capabilities read,checkout --max-uses 1 >"$work/worker-invite.json"
node "$e2e/join.mjs" "$ingress" "$(field "$work/worker-invite.json" uri)" worker >"$work/worker.json"
"$work/ce" invite --workspace "$work/trip.md" --json --capabilities read,approve --max-uses 1 >"$work/approver-invite.json"
mkdir -p "$work/state"

export CE_E2E_BANNER="$work/banner.json" CE_E2E_OWNER="$work/owner.json" CE_E2E_WORKER="$work/worker.json" \
  CE_E2E_APPROVER_INVITE="$work/approver-invite.json" CE_BIN="$work/ce" CE_E2E_STATE_DIR="$work/state" \
  CE_E2E_CHROMIUM="$chromium"
rc=0
e2e_run 240 mcp-app.test.mjs "$work/serve.log" || rc=$?
echo "e2e-app: $(($(date +%s) - start)) s; screenshots in $CE_E2E_ARTIFACTS"
exit $rc
