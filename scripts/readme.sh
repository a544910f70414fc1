#!/usr/bin/env bash
# Runs the README's shell blocks literally, as a newcomer on a fresh machine
# would follow them (issue 29 item 2): in a copy of this clone, with a fresh
# HOME and GOPATH, no ce on PATH until the README's own `go install` puts it
# there, one machine, loopback only.
#
# What runs: every ```sh block, in order, in one bash (a variable a block
# sets is there for the next ones, as in one terminal), with `set -euo
# pipefail`. A block is skipped when the line just before its fence is
#   <!-- readme.sh: skip, WHY -->
# (another machine, a tailnet, root and systemd, a tool the README only
# mentions, the CI's own stages); WHY is printed. One command per line (no
# backslash continuations in a block that runs). A line that serves a room
# (`ce serve …`, `go run ./cmd/ce serve …`) runs until Ctrl-C in a terminal:
# here it runs in the background, the next line waits until it is READY (its
# banner or --json line), and at the end each is stopped with SIGINT, as
# Ctrl-C would, and must stop cleanly (see stop_serves).
#
# It ends by itself: a serve must be ready within READY_TIMEOUT (the first one
# builds ce with `go run`: minutes on a cold cache), and the whole run is
# bounded by README_TIMEOUT.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
READY_TIMEOUT=${READY_TIMEOUT:-600}
README_TIMEOUT=${README_TIMEOUT:-1200}

tmp=$(mktemp -d)
pgids="$tmp/pgids"
: >"$pgids"
cleanup() {
	local rc=$?
	# Anything still serving (a failed run) is stopped, by its process group.
	while read -r pg; do
		kill -KILL -- "-$pg" 2>/dev/null || true
	done <"$pgids"
	chmod -R u+w "$tmp" 2>/dev/null || true
	rm -rf "$tmp"
	exit "$rc"
}
trap cleanup EXIT

# The clone as it is (tracked and new files, nothing ignored): what a
# newcomer has after `git clone`.
mkdir "$tmp/ce" "$tmp/home" "$tmp/gopath"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard |
	while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
	tar --null -T - -cf -) | tar -xf - -C "$tmp/ce"

# The generated script: helpers, then each block.
run="$tmp/readme-run.sh"
cat >"$run" <<'EOF'
set -euo pipefail
set -m # each background serve in its own process group, stopped as a whole
serve_n=0
serves=()
# serve_bg LINE: the README's serve line, in the background until READY.
serve_bg() {
	serve_n=$((serve_n + 1))
	local log="$README_LOGS/serve-$serve_n.log"
	echo "+ $1   # in the background, until READY"
	echo "+ $1" >"$log"
	eval "$1" >>"$log" 2>&1 &
	local pid=$!
	echo "$pid" >>"$README_PGIDS"
	serves+=("$pid")
	local deadline=$((SECONDS + READY_TIMEOUT))
	until grep -q -e '^Status: READY' -e '^{"workspace_id"' "$log"; do
		if ! kill -0 "$pid" 2>/dev/null; then
			echo "readme.sh: '$1' exited before READY:" >&2
			cat "$log" >&2
			return 1
		fi
		if ((SECONDS > deadline)); then
			echo "readme.sh: '$1' not READY within ${READY_TIMEOUT}s:" >&2
			cat "$log" >&2
			return 1
		fi
		sleep 0.2
	done
}
# stop_serves: Ctrl-C to each, newest first. Each must be gone within 60 s
# having logged that it stopped and no error; a `ce serve` must exit 0 (a
# `go run` exits 1 after an interrupt whatever its program did).
stop_serves() {
	local i pid rc log deadline
	for ((i = ${#serves[@]} - 1; i >= 0; i--)); do
		pid=${serves[i]} log="$README_LOGS/serve-$((i + 1)).log"
		kill -INT -- "-$pid"
		deadline=$((SECONDS + 60))
		while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
		kill -KILL -- "-$pid" 2>/dev/null || true
		rc=0
		wait "$pid" 2>/dev/null || rc=$?
		if ! grep -q 'msg=stopping' "$log" || grep -q 'level=ERROR' "$log" ||
			{ ((rc != 0)) && ! head -n 1 "$log" | grep -q '^+ go run '; }; then
			echo "readme.sh: serve $((i + 1)) did not stop cleanly on Ctrl-C (exit $rc):" >&2
			cat "$log" >&2
			return 1
		fi
	done
	echo "+ every serve stopped cleanly on Ctrl-C"
}
EOF

# Blocks: fences ```sh … ```, a skip comment on the line before the fence.
awk -v run="$run" '
	function flush_skip() { skip = ""; }
	/^```sh[[:space:]]*$/ && !inblock {
		inblock = 1; n++; lines = "";
		if (prev ~ /^<!-- readme\.sh: skip/) {
			why = prev; sub(/^<!-- readme\.sh: skip,?[[:space:]]*/, "", why); sub(/[[:space:]]*-->.*$/, "", why);
			printf "echo \"== README block %d: skipped (%s)\"\n", n, why >> run; skipping = 1;
		} else {
			printf "echo \"== README block %d (README.md line %d)\"\n", n, NR >> run; skipping = 0;
		}
		prev = $0; next
	}
	/^```/ && inblock { inblock = 0; prev = $0; next }
	inblock && !skipping {
		if ($0 ~ /^[[:space:]]*(go run \.\/cmd\/ce|ce) serve /) {
			line = $0; sub(/[[:space:]]+#.*$/, "", line); gsub(/\047/, "\047\\\047\047", line);
			printf "serve_bg \047%s\047\n", line >> run;
		} else if ($0 !~ /^[[:space:]]*(#|$)/) {
			q = $0; gsub(/\047/, "\047\\\047\047", q);
			printf "echo \047+ %s\047\n%s\n", q, $0 >> run;
		}
	}
	{ prev = $0 }
	END { if (inblock) { print "readme.sh: an unclosed ```sh block" > "/dev/stderr"; exit 1 } }
' "$repo/README.md"
echo 'stop_serves' >>"$run"

# A fresh machine: HOME and GOPATH empty, PATH without any ce; the Go
# caches shared so the build is not done twice (CI built it just before).
goroot=$(go env GOROOT)
gocache=$(go env GOCACHE)
gomodcache=$(go env GOMODCACHE)
mkdir -p "$tmp/logs"
cd "$tmp/ce"
start=$SECONDS
env -i \
	HOME="$tmp/home" PATH="$goroot/bin:/usr/local/bin:/usr/bin:/bin" \
	GOPATH="$tmp/gopath" GOCACHE="$gocache" GOMODCACHE="$gomodcache" \
	GOFLAGS="${GOFLAGS:-}" GOTOOLCHAIN="$(go env GOTOOLCHAIN)" GOPROXY="$(go env GOPROXY)" \
	TMPDIR="${TMPDIR:-/tmp}" LANG=C.UTF-8 USER="${USER:-$(id -un)}" \
	README_LOGS="$tmp/logs" README_PGIDS="$pgids" READY_TIMEOUT="$READY_TIMEOUT" \
	timeout -k 10 "$README_TIMEOUT" bash "$run"
echo "readme.sh: every runnable block of README.md worked ($((SECONDS - start))s)"
