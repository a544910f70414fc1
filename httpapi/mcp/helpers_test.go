package mcp_test

// What the MCP door's tests need beyond the kit (internal/roomtest): small
// JSON helpers, the tool names as the operations table lists them, and the
// two facts about the other doors these tests compare with (the owner
// page's cookie name, the plain door's form of a task).

import (
	"regexp"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/internal/mcptest"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
)

// ownerCookie is the owner page's cookie name in h's room, as a browser
// sees it; the door must refuse it as a credential.
func ownerCookie(h *apitest.Harness) string { return roomtest.OwnerCookie(h.Eng.WorkspaceID) }

// tableTools is the tool names of the operations table, in its order: what
// tools/list lists.
func tableTools() []string {
	var out []string
	for _, op := range ops.Table {
		if op.Tool != "" {
			out = append(out, op.Tool)
		}
	}
	return out
}

// threeSections builds a document from the three sections' bodies.
func threeSections(idea, goals, plan string) string {
	return "# Idea\n\n" + idea + "\n\n## Goals\n\n" + goals + "\n\n## Plan\n\n" + plan + "\n"
}

// rawPOST writes one request on a fresh TCP connection byte for byte, for
// what net/http's client would normalise (padded header values).
func rawPOST(t testing.TB, hostport string, headerLines []string, body []byte) roomtest.MCPResponse {
	t.Helper()
	r, err := mcptest.RawPOST(hostport, headerLines, body)
	if err != nil {
		t.Fatal(err)
	}
	return roomtest.DecodeMCP(t, r.Status, r.Header, r.Raw)
}

// hostPort is a test server's host:port.
func hostPort(url string) string { return strings.TrimPrefix(url, "http://") }

// isoTimeRE is the ISO 8601 prefix conformance checks on task times.
var isoTimeRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}`)
