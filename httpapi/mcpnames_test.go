package httpapi

import (
	"strconv"

	"github.com/commonroom/ce/httpapi/mcp"
)

// The MCP door moved to its own package (httpapi/mcp, issue 15); these are
// the names of it the black-box tests here use, so they read as they did.
// The wire values are written out as the spec gives them (§6 codes, the
// application codes of mcp.go), not taken from the door's constants, so a
// test pins the number on the wire rather than whatever the door says.
const (
	mcpProtocolVersion   = "2026-07-28"
	tasksExtension       = "io.modelcontextprotocol/tasks"
	codeParseError       = -32700
	codeInvalidRequest   = -32600
	codeInvalidParams    = -32602
	codeInternalError    = -32603
	codeUnauthorized     = -31001
	codePermissionDenied = -31003
)

// tool is a tool of the door's catalog as tools/list shows it.
type tool = mcp.Tool

// toolCatalog is the door's tool catalog.
func toolCatalog() []tool { return mcp.Tools() }

// EncodeChange is the hub's encoder the test servers use, as ce serve does.
var EncodeChange = mcp.EncodeChange

func itoa(n int) string { return strconv.Itoa(n) }
