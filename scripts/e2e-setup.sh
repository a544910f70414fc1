# What the browser end-to-end scripts (scripts/e2e.sh, scripts/e2e-app.sh)
# need before a test runs, in one place so both install and check the same
# way. Sourced, not run:
#
#   root=REPOSITORY; . "$root/scripts/e2e-setup.sh"
#   e2e_setup NAME PACKAGE...
#
#   e2e_room                 a temp dir $work, scripts/room.sh, cleanup on exit
#   field FILE KEY           one top-level field of a JSON file
#   e2e_run LIMIT TEST LOG   run e2e/TEST with node's test runner; on a
#                            failure print the tail of the server log LOG
#
# e2e_setup installs Debian's chromium when $chromium is absent (as root; no
# browser is ever downloaded), requires Node.js 20 or newer, runs `npm ci`
# in $e2e from the committed lock unless node_modules already holds exactly
# the locked version of every PACKAGE, and prints the versions used. NAME
# prefixes its error messages.

# What every run shares: the test directory, the browser ($CE_E2E_CHROMIUM
# or Debian's), where screenshots go, and when the run started.
e2e="$root/e2e"
chromium="${CE_E2E_CHROMIUM:-/usr/bin/chromium}"
export CE_E2E_ARTIFACTS="${CE_E2E_ARTIFACTS:-$e2e/artifacts}"
start=$(date +%s)

e2e_setup() {
  local name="$1" pkg locked installed stale="" versions
  shift
  if [ ! -x "$chromium" ]; then
    echo "installing Debian's chromium"
    if [ "$(id -u)" -ne 0 ]; then
      echo "$name: $chromium is missing and this is not root; install it with: apt-get install -y chromium" >&2
      exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq chromium >/dev/null
  fi
  if ! command -v node >/dev/null || ! node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
    echo "$name: Node.js 20 or newer is needed (found: $(node --version 2>/dev/null || echo none))" >&2
    exit 1
  fi
  # playwright-core never downloads a browser on install; say so anyway.
  export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
  for pkg in "$@"; do
    locked="$(node -p "require('$e2e/package-lock.json').packages['node_modules/$pkg'].version")"
    installed="$(node -p "try { require('$e2e/node_modules/$pkg/package.json').version } catch { '' }")"
    [ "$locked" = "$installed" ] || stale="$pkg"
  done
  if [ -n "$stale" ]; then
    (cd "$e2e" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  versions="node $(node --version), $("$chromium" --version 2>/dev/null | head -1)"
  for pkg in "$@"; do
    versions="$versions, ${pkg#@modelcontextprotocol/} $(node -p "require('$e2e/node_modules/$pkg/package.json').version")"
  done
  echo "$versions"
}

# e2e_room makes the temp dir $work for a run, loads scripts/room.sh, and on
# exit stops the room and removes $work (copying its JSON files and logs to
# $CE_E2E_KEEP first when set).
e2e_room() {
  work="$(mktemp -d)"
  . "$root/scripts/room.sh"
  trap e2e_cleanup EXIT
}

e2e_cleanup() {
  room_stop
  if [ -n "${CE_E2E_KEEP:-}" ]; then mkdir -p "$CE_E2E_KEEP" && cp "$work"/*.json "$work"/*.log "$CE_E2E_KEEP"/ 2>/dev/null || true; fi
  rm -rf "$work"
}

# field prints one top-level field of a JSON file (a banner, a grant, an
# invitation).
field() { node -e 'const o = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); process.stdout.write(String(o[process.argv[2]]))' "$1" "$2"; }

# e2e_run runs one test file under a time limit and returns its status; on
# a failure it prints the last 40 lines of the room's log, where the
# server's side of the failure is. Call it as `e2e_run ... || rc=$?`.
e2e_run() {
  local limit="$1" test="$2" log="$3" status=0
  mkdir -p "$CE_E2E_ARTIFACTS"
  (cd "$e2e" && timeout "$limit" node --test --test-reporter=spec --test-timeout=120000 "$test") || status=$?
  if [ "$status" -ne 0 ]; then
    echo "--- ce serve log $(basename "$log") (last 40 lines)"
    tail -40 "$log" || true
  fi
  return "$status"
}
