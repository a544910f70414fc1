#!/usr/bin/env bash
# Disaster recovery with Litestream, tested for real (issue 13 item 16).
#
# Installs litestream v0.5.18 (`go install`, into a cache directory that is
# reused when it already holds that version) and runs TestLitestreamRecovery:
# ce serve under `litestream replicate -exec`, handoffs driven, both killed
# with SIGKILL, `litestream restore` beside a copy of the Markdown file, ce
# serve there, and the recovery point measured on every kill.
#
#   scripts/litestream.sh                 from the repository root, or from .ci/run
#   CE_LITESTREAM_CACHE=DIR               where the binary is kept (default ~/.cache/ce-litestream)
#   CE_LITESTREAM_RUNS=N                  kills (default 3)
#   CE_LITESTREAM_SYNC=SECONDS            the replica's sync interval (default 0.5)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
version="v0.5.18"
cache="${CE_LITESTREAM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ce-litestream}/$version"
bin="$cache/litestream"

start=$SECONDS
if [ -x "$bin" ] && [ "$("$bin" version 2>/dev/null)" = "$version" ]; then
  echo "litestream $version: cached at $bin"
else
  echo "litestream $version: installing into $cache"
  mkdir -p "$cache"
  # Outside the module, so ce's go.mod has no say in litestream's build.
  (cd "$cache" && GOBIN="$cache" GOFLAGS="${GOFLAGS:-} -buildvcs=false" go install "github.com/benbjohnson/litestream/cmd/litestream@$version")
  got="$("$bin" version)"
  if [ "$got" != "$version" ]; then
    echo "litestream.sh: installed $bin reports $got, want $version" >&2
    exit 1
  fi
fi
installed=$SECONDS
echo "   install step took $((installed - start))s"

cd "$root"
CE_LITESTREAM="$bin" go test -count=1 -run '^TestLitestreamRecovery$' -v ./crashtest
echo "   test step took $((SECONDS - installed))s"
