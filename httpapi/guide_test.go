package httpapi

// The guide an agent is given — SKILL.md (GET /skills/commonroom, the
// skill:// resource), the discovery instructions and every prompt rendered
// for every role — held against the tool catalog as served: it names only
// tools that exist, a call it spells out as `tool {field, …}` names only
// fields of that tool's input schema and every field the tool requires,
// and a tools-only agent finds the whole handoff workflow in it.

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/httpapi/skill"
)

// guideTexts are the texts a model is given about the room, by where they
// come from, read over the wire.
func guideTexts(t *testing.T, h *roomHarness, c *mcpClient) map[string]string {
	t.Helper()
	out := map[string]string{
		"SKILL.md":     string(h.Do(t, "GET", h.IngressURL("/skills/commonroom"), "", nil).Body),
		"instructions": str(c.ok(t, "server/discover", nil)["instructions"]),
	}
	contents, _ := c.ok(t, "resources/read", map[string]any{"uri": skill.URI})["contents"].([]any)
	if len(contents) != 1 || str(jsonAt(contents[0], "text")) != out["SKILL.md"] {
		t.Fatalf("the skill resource is not SKILL.md")
	}
	prompts, _ := c.ok(t, "prompts/list", nil)["prompts"].([]any)
	for _, p := range prompts {
		name := str(jsonAt(p, "name"))
		for _, role := range []string{"", "requester", "worker"} {
			res := c.ok(t, "prompts/get", map[string]any{"name": name, "arguments": map[string]any{"role": role}})
			msgs, _ := res["messages"].([]any)
			for _, m := range msgs {
				out["prompt "+name+" role="+role] += str(jsonAt(m, "content", "text"))
			}
		}
	}
	return out
}

// fieldNames adds every property name of s, at any depth, to names.
func fieldNames(s *jsonschema.Schema, names map[string]bool) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		names[name] = true
		fieldNames(p, names)
	}
	fieldNames(s.Items, names)
	fieldNames(s.AdditionalProperties, names)
}

// schemaHas reports whether path (a.b, list[].c, map.KEY.d) names a
// property of s.
func schemaHas(s *jsonschema.Schema, path string) bool {
	for seg := range strings.SplitSeq(path, ".") {
		if s == nil {
			return false
		}
		if seg == "KEY" {
			s = s.AdditionalProperties
			continue
		}
		name, items := strings.CutSuffix(seg, "[]")
		s = s.Properties[name]
		if items && s != nil {
			s = s.Items
		}
	}
	return s != nil
}

var (
	toolNameRE = regexp.MustCompile(`\b(?:workspace|handoff)_[a-z_]*[a-z]\b`)
	callRE     = regexp.MustCompile("`((?:workspace|handoff)_[a-z_]+) \\{([^}`]*)\\}`")
)

func TestGuideNamesOnlyTheCatalog(t *testing.T) {
	h := newHarness(t, "")
	g := h.join("reader", "read")
	texts := guideTexts(t, h, g.mcp)
	schemas := map[string]*jsonschema.Schema{}
	fields := map[string]bool{"task_id": true} // and what a handoff answers with
	for _, tl := range toolCatalog() {
		s, err := ops.InputSchema(tl.Op.Call.Input())
		if err != nil {
			t.Fatal(err)
		}
		schemas[tl.Name] = s
		fieldNames(s, fields)
	}
	if len(texts) < 6 {
		t.Fatalf("only %d guide texts: %v", len(texts), slices.Collect(func(yield func(string) bool) {
			for k := range texts {
				yield(k)
			}
		}))
	}
	for where, text := range texts {
		t.Run(where+" names only tools that exist", func(t *testing.T) {
			// Names of tools, not the error codes (handoff_conflict) or
			// fields (handoff_id) spelled the same way.
			for _, name := range toolNameRE.FindAllString(text, -1) {
				if _, ok := schemas[name]; !ok && !slices.Contains(errorCodes, name) && !fields[name] {
					t.Errorf("names %s, which is no tool", name)
				}
			}
		})
		calls := callRE.FindAllStringSubmatch(text, -1)
		t.Run(where+" spells out calls with their fields, all required ones included", func(t *testing.T) {
			if where == "instructions" {
				return // one paragraph that names tools and spells out no call
			}
			if len(calls) < 3 {
				t.Fatalf("only %d calls spelled out as `tool {field, …}`", len(calls))
			}
			for _, call := range calls {
				tool, s := call[1], schemas[call[1]]
				if s == nil {
					t.Errorf("%s: no such tool", call[0])
					continue
				}
				var named []string
				for f := range strings.SplitSeq(call[2], ",") {
					f = strings.TrimSpace(f)
					if f == "" {
						continue
					}
					named = append(named, f)
					if !schemaHas(s, f) {
						t.Errorf("%s: %s has no field %q", call[0], tool, f)
					}
				}
				for _, req := range ops.RequiredPaths(s) {
					if !slices.Contains(named, req) {
						t.Errorf("%s: leaves out %q, which %s requires", call[0], req, tool)
					}
				}
			}
		})
	}
	// A tools-only agent finds the whole handoff workflow, the twins of the
	// task methods and when to poll, wherever it is taught.
	workflow := []string{"handoff_create", "handoff_accept", "handoff_request_input", "handoff_answer", "handoff_complete",
		"handoff_approve", "handoff_cancel", "handoff_get", "poll_interval_ms"}
	for _, where := range []string{"SKILL.md", "instructions", "prompt commonroom_handoff_workflow role="} {
		t.Run(where+" teaches the handoff workflow with tools alone", func(t *testing.T) {
			for _, w := range workflow {
				if !strings.Contains(texts[where], w) {
					t.Errorf("does not name %s", w)
				}
			}
		})
	}
	t.Run("SKILL.md names the document tools in the order of the flow", func(t *testing.T) {
		order := []string{"workspace_status", "workspace_summary", "workspace_read", "workspace_checkout",
			"workspace_propose", "workspace_commit", "workspace_release"}
		at := -1
		for _, name := range order {
			i := regexp.MustCompile("`" + name + "[ `]").FindStringIndex(texts["SKILL.md"])
			if i == nil {
				t.Fatalf("the skill does not name %s", name)
			}
			if i[0] < at {
				t.Errorf("%s is named before the step that precedes it", name)
			}
			at = i[0]
		}
	})
	t.Run("SKILL.md ends with every tool of the catalog", func(t *testing.T) {
		table := texts["SKILL.md"][strings.Index(texts["SKILL.md"], "## Tools"):]
		for name := range schemas {
			if !strings.Contains(table, "| `"+name+"` |") {
				t.Errorf("the tools table has no row for %s", name)
			}
		}
	})
}

// TestGuideSchemaPaths pins the path notation the guide test reads.
func TestGuideSchemaPaths(t *testing.T) {
	s, err := ops.InputSchema(toolByName(t, "handoff_request_input").Op.Call.Input())
	if err != nil {
		t.Fatal(err)
	}
	answer, err := ops.InputSchema(toolByName(t, "handoff_answer").Op.Call.Input())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    *jsonschema.Schema
		path string
		want bool
	}{
		{s, "handoff_id", true},
		{s, "requests[].key", true},
		{s, "requests[].nope", false},
		{s, "requests.key", false},
		{s, "nope", false},
		{answer, "input_responses.KEY.action", true},
		{answer, "input_responses.KEY.content", true},
		{answer, "input_responses.KEY.nope", false},
	} {
		name := "finds "
		if !c.want {
			name = "does not find "
		}
		t.Run(name+c.path, func(t *testing.T) {
			if got := schemaHas(c.s, c.path); got != c.want {
				t.Errorf("schemaHas(%s) = %v, want %v", c.path, got, c.want)
			}
		})
	}
}

func toolByName(t *testing.T, name string) tool {
	t.Helper()
	for _, tl := range toolCatalog() {
		if tl.Name == name {
			return tl
		}
	}
	t.Fatalf("no tool %s", name)
	return tool{}
}
