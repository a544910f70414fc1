package httpapi

// The tool catalog, pinned. The operations table (httpapi/ops) is where a
// tool is declared; the tests derive what they need from it (the MCP
// door's tableTools, the authorization matrix's rows) instead of restating
// names, routes, capabilities or the count. What is pinned, so that a change to the table
// is seen and accepted on purpose, is this golden file: every operation's
// route and capability, then the catalog exactly as tools/list answers a
// client declaring no extension (an MCP App's tools, offered only to
// clients declaring io.modelcontextprotocol/ui, are not in it).

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/internal/roomtest"
)

var updateCatalog = flag.Bool("update", false, "rewrite testdata/catalog_golden.txt from the operations table and tools/list")

// tableOpOfTool is the operations-table row of a tool.
func tableOpOfTool(t testing.TB, tool string) ops.Op {
	t.Helper()
	i := slices.IndexFunc(ops.Table, func(op ops.Op) bool { return op.Tool == tool })
	if i < 0 {
		t.Fatalf("tool %s is not in ops.Table", tool)
	}
	return ops.Table[i]
}

func TestCatalogGolden(t *testing.T) {
	h := newHarness(t, "")
	p := h.join("reader", "read")
	res := p.mcp.ok(t, "tools/list", nil)
	tools, _ := res["tools"].([]any)

	var b strings.Builder
	b.WriteString("# The operations table and the MCP tool catalog. Generated: go test ./httpapi -run Catalog -update\n\n")
	b.WriteString("## ops.Table: name, route, capability, tool\n\n")
	for _, op := range ops.Table {
		tool := op.Tool
		if tool == "" {
			tool = "-"
		}
		fmt.Fprintf(&b, "%-28s %-46s %-36s %s\n", op.Name, op.HTTP, op.Capability, tool)
	}
	fmt.Fprintf(&b, "\n## tools/list (%d tools, no extension declared)\n\n", len(tools))
	for _, raw := range tools {
		js, err := json.MarshalIndent(raw, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b.Write(js)
		b.WriteString("\n")
	}
	roomtest.Golden(t, filepath.Join("testdata", "catalog_golden.txt"), []byte(b.String()), *updateCatalog,
		"go test ./httpapi -run Catalog -update")
}
