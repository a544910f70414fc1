#!/usr/bin/env bash
# Checks the release configuration (issue 29 item 2): `goreleaser check` on
# .goreleaser.yaml (GoReleaser v2, the module's tool: go tool goreleaser),
# then a snapshot build of this machine's target only (the four targets are
# the same build with another GOOS/GOARCH), and the built ce's version must
# be the stamp GoReleaser gave it, not "dev" or a pseudo-version.
set -euo pipefail
cd "$(dirname "$0")/.."

# GoReleaser reads the tag and commit from git: a clone without tags (CI's)
# gets v0.0.0. It refuses a dirty tree unless --snapshot, which we use.
start=$SECONDS
go tool goreleaser check
echo "   goreleaser check took $((SECONDS - start))s"

start=$SECONDS
go tool goreleaser build --snapshot --clean --single-target
echo "   snapshot build took $((SECONDS - start))s"

bin=$(find dist -type f -name ce -perm -u+x | head -n 1)
[ -n "$bin" ] || { echo "release-check: no ce binary under dist/" >&2; exit 1; }
want=$(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' dist/metadata.json | head -n 1)
got=$("$bin" version --json)
echo "   $bin version: $got"
case "$got" in
*"\"version\":\"$want\""*) ;;
*) echo "release-check: ce version says $got, GoReleaser stamped $want" >&2; exit 1 ;;
esac
case "$want" in
"" | dev | *"(devel)"*) echo "release-check: no version stamped ($want)" >&2; exit 1 ;;
esac
echo "release-check: .goreleaser.yaml checks out; the snapshot's ce says $want"
