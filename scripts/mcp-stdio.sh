#!/usr/bin/env bash
# `ce mcp` under @modelcontextprotocol/client 2.x + @modelcontextprotocol/ext-tasks
# over stdio: the client2 part of scripts/mcp-clients.sh, which installs the
# pinned packages (npm ci), builds ce, starts a room and runs
# scripts/mcp-stdio/stdio.test.mjs.
#
#   scripts/mcp-stdio.sh                          from the repository root
#   CE_MCP_CLIENTS_VERBOSE=1 scripts/mcp-stdio.sh  also print each step and ce's logs
set -euo pipefail
[ -z "${CE_MCP_STDIO_VERBOSE:-}" ] || export CE_MCP_CLIENTS_VERBOSE=1
exec "$(dirname "$0")/mcp-clients.sh" client2
