#!/usr/bin/env bash
# The owner page's and a participant's page's end-to-end tests in a real
# headless browser (e2e/owner-page.test.mjs, then
# e2e/participant-page.test.mjs against a room of its own).
#
# It installs what it needs (Debian's chromium when absent, playwright-core
# from e2e/package-lock.json with `npm ci`; no browser is ever downloaded),
# builds ce, starts `ce serve FILE --json` on a temp file, joins two agents
# over HTTP (the banner's invitation, and one from `ce invite` for the
# second), runs e2e/owner-page.test.mjs with node's test runner, and stops
# everything. Screenshots land in e2e/artifacts/ (or $CE_E2E_ARTIFACTS).
#
#   scripts/e2e.sh            from the repository root, or from .ci/run
#   CE_E2E_KEEP=DIR           also copy the server log and JSON files to DIR
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
. "$root/scripts/e2e-setup.sh" # sets e2e, chromium, CE_E2E_ARTIFACTS, start

# --- what the test needs ------------------------------------------------------
e2e_setup e2e playwright-core

# --- the room -------------------------------------------------------------------
e2e_room

room_build "$root" "$work"
printf '# Trip plan\n\nA weekend away, planned together.\n\n## Goals\n\nTo be written.\n\n## Plan\n\nStep one.\n' >"$work/trip.md"
room_start e2e "$work/ce" "$work/trip.md" "$work/banner.json" "$work/serve.log" --name host
ingress="$(field "$work/banner.json" ingress_url)"

# Two agents over HTTP: the banner's invitation admits one; the second joins
# with one from `ce invite` (which reaches the running room through its owner
# listener), which admits two more later on.
node "$e2e/join.mjs" "$ingress" "$(field "$work/banner.json" invite)" alice >"$work/alice.json"
"$work/ce" invite --workspace "$work/trip.md" --json --capabilities read,observe,propose,checkout,commit --max-uses 2 >"$work/invite.json"
node "$e2e/join.mjs" "$ingress" "$(field "$work/invite.json" uri)" bob >"$work/bob.json"

export CE_E2E_BANNER="$work/banner.json" CE_E2E_ALICE="$work/alice.json" CE_E2E_BOB="$work/bob.json" \
  CE_E2E_INVITE="$work/invite.json" CE_E2E_CHROMIUM="$chromium" CE_E2E_DOC="$work/trip.md"
rc=0
e2e_run 240 owner-page.test.mjs "$work/serve.log" || rc=$?

# --- a participant's page (issue 28) -------------------------------------------
# A room of its own, whose document carries script, raw HTML and a
# javascript: link; three people join with the real `ce join`, each keeping
# the Page: link it printed (page_url): a writer (read,propose,checkout), an
# approver (read,observe,approve), a reader (read) and a helper
# (read,observe,checkout).
room_stop
printf '# Shared notes

Plain text. <script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2"> [click me](javascript:window.__pwned=3)

<div onclick="window.__pwned = 6">raw block</div>

## Goals

To be written.

## Plan

Step one.
' >"$work/notes.md"
room_start e2e-participant "$work/ce" "$work/notes.md" "$work/p-banner.json" "$work/p-serve.log" --name host
for who in writer:read,propose,checkout approver:read,observe,approve reader:read helper:read,observe,checkout; do
  name="${who%%:*}"
  "$work/ce" invite --workspace "$work/notes.md" --json --capabilities "${who#*:}" >"$work/p-invite-$name.json"
  "$work/ce" join "$(field "$work/p-invite-$name.json" uri)" --name "$name" --kind human --json >"$work/p-$name.json"
done
export CE_E2E_P_BANNER="$work/p-banner.json" CE_E2E_P_WRITER="$work/p-writer.json" \
  CE_E2E_P_APPROVER="$work/p-approver.json" CE_E2E_P_READER="$work/p-reader.json" CE_E2E_P_HELPER="$work/p-helper.json"
e2e_run 180 participant-page.test.mjs "$work/p-serve.log" || rc=$?
echo "e2e: $(($(date +%s) - start)) s; screenshots in $CE_E2E_ARTIFACTS"
exit $rc
