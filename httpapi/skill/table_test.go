package skill

// The tools table at the end of SKILL.md is generated from the operations
// table, so the guide cannot name a tool, a required field or a
// capability the room does not have: TestGuideToolsTableIsCurrent fails
// when it differs, and -update rewrites it.

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/ops"
)

var update = flag.Bool("update", false, "rewrite the tools table in SKILL.md from the operations table")

const (
	tableStart = "<!-- tools table: generated from httpapi/ops.Table by `go test ./httpapi/skill -update`; do not edit by hand -->\n"
	tableEnd   = "<!-- end of the tools table -->\n"
)

// toolsTable is the table as SKILL.md carries it, markers included.
func toolsTable(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(tableStart)
	b.WriteString("| tool | required fields | who may call it |\n|---|---|---|\n")
	for _, op := range ops.Tools() {
		s, err := ops.InputSchema(op.Call.Input())
		if err != nil {
			t.Fatal(err)
		}
		req := "—"
		if paths := ops.RequiredPaths(s); len(paths) > 0 {
			req = "`" + strings.Join(paths, "`, `") + "`"
		}
		b.WriteString("| `" + op.Tool + "` | " + req + " | " + op.Capability + " |\n")
	}
	b.WriteString(tableEnd)
	return b.String()
}

func TestGuideToolsTableIsCurrent(t *testing.T) {
	raw, err := os.ReadFile("SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i, j := strings.Index(text, tableStart), strings.Index(text, tableEnd)
	if i < 0 || j < i {
		t.Fatalf("SKILL.md has no tools table between %q and %q", tableStart, tableEnd)
	}
	current, want := text[i:j+len(tableEnd)], toolsTable(t)
	if *update {
		if err := os.WriteFile("SKILL.md", []byte(text[:i]+want+text[j+len(tableEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if current != want {
		t.Errorf("SKILL.md's tools table is not the operations table's; run go test ./httpapi/skill -update\nhas:\n%s\nwant:\n%s", current, want)
	}
	if text != Text() {
		t.Errorf("the embedded guide is not SKILL.md")
	}
}
