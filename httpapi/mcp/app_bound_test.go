package mcp_test

// The board's answer is bounded like any read's: its pending proposals'
// diffs together take at most half the body bound (what one proposal's
// diff may take alone), so a few large proposals cannot make each
// workspace_board call, which the view makes after every linked tool's
// answer, tens of megabytes.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/mcpapp"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
	"github.com/commonroom/ce/room"
)

func TestMCPAppBoardBounded(t *testing.T) {
	lines := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s line %05d %s\n", prefix, i, strings.Repeat("x", 80))
		}
		return b.String()
	}
	h := apitest.New(t, roomtest.Options{Content: threeSections("A trip.", lines("kept", 3000), "Step one.")}, nil)
	author := h.Join("author", "read", "propose")
	reader := h.Join("reader", "read")
	base := int64(author.MCP.ToolOK(t, "workspace_status", nil)["version"].(float64))
	const proposals = 4
	for i := range proposals {
		author.MCP.ToolOK(t, "workspace_propose", map[string]any{"target": "Goals", "base_version": base, "summary": fmt.Sprint("rewrite ", i),
			"change": map[string]any{"section": "Goals", "content": "## Goals\n\n" + lines(fmt.Sprint("new", i), 2000)}})
	}
	budget := int(room.Defaults().MaxBodyBytes / 2)

	res := uiTool(t, reader.MCP, declaredUI, mcpapp.BoardTool, map[string]any{})
	ps, _ := roomtest.JSONAt(res, "structuredContent", "proposals").([]any)
	if len(ps) != proposals {
		t.Fatalf("board holds %d proposals, want %d", len(ps), proposals)
	}
	total, cut := 0, 0
	for _, p := range ps {
		d, _ := roomtest.JSONAt(p, "diff", "diff").(string)
		bd, _ := roomtest.JSONAt(p, "diff", "base_diff").(string)
		total += len(d) + len(bd)
		if roomtest.JSONAt(p, "diff", "diff_truncated") == true {
			cut++
		}
	}
	t.Run("the diffs together stay within half the body bound", func(t *testing.T) {
		if total > budget {
			t.Errorf("the board carries %d bytes of diffs, want at most %d", total, budget)
		}
	})
	t.Run("a proposal whose diff was cut says so", func(t *testing.T) {
		if cut == 0 {
			t.Errorf("no proposal says its diff was cut")
		}
	})
	t.Run("the first proposal's diff is shown", func(t *testing.T) {
		if d, _ := roomtest.JSONAt(ps[0], "diff", "diff").(string); !strings.Contains(d, "+new") {
			t.Errorf("the first diff shows no added line: %.200q", d)
		}
	})
}
