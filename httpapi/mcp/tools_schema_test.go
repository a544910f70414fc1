package mcp_test

// The tool input schemas against the decoder and the engine: the schemas
// are generated from the operations' input types (ops.InputSchema), and
// these tests keep the two from drifting apart.

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/httpapi/mcp"
	"github.com/commonroom/ce/internal/roomtest"
	"github.com/commonroom/ce/internal/roomtest/apitest"
	"github.com/commonroom/ce/room"
)

// validValue is a JSON value of the schema's type that the decoder must take
// (the first of an enum's values).
func validValue(s map[string]any) any {
	if enum, _ := s["enum"].([]any); len(enum) > 0 {
		return enum[0]
	}
	switch s["type"] {
	case "string":
		return "x"
	case "integer":
		if m, ok := s["minimum"].(float64); ok && m > 1 {
			return m
		}
		return float64(1)
	case "boolean":
		return true
	case "array":
		items, _ := s["items"].(map[string]any)
		return []any{validValue(items)}
	case "object":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		for _, r := range roomtest.StringsOf(s["required"]) {
			out[r] = validValue(props[r].(map[string]any))
		}
		return out
	}
	return nil
}

// wrongValue is a JSON value no property of the schema's type accepts.
func wrongValue(s map[string]any) any {
	if s["type"] == "string" {
		return float64(7)
	}
	return "wrong"
}

func resolveSchema(t *testing.T, schema map[string]any) *jsonschema.Resolved {
	t.Helper()
	b, _ := json.Marshal(schema)
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// decodeArgs decodes args as tools/call does and re-encodes the result.
func decodeArgs(tl mcp.Tool, args map[string]any) (map[string]any, error) {
	b, _ := json.Marshal(args)
	v := reflect.New(tl.Op.Call.Input()).Interface()
	if err := wirejson.DecodeArgs(b, v); err != nil {
		return nil, err
	}
	out, _ := json.Marshal(v)
	var m map[string]any
	return m, json.Unmarshal(out, &m)
}

// TestToolSchemasMatchTheDecoder: for every tool, the schema's properties
// are exactly the fields the decoder reads (a value of the schema's type is
// taken and kept; a value of another type is refused by both), every object
// in it refuses other properties, and the decoder — on purpose, so newer
// clients keep working — ignores them.
func TestToolSchemasMatchTheDecoder(t *testing.T) {
	tools := mcp.Tools()
	var names []string
	for _, tl := range tools {
		names = append(names, tl.Name)
	}
	if want := tableTools(); !slices.Equal(names, want) {
		t.Errorf("the door's tools %v, want the operations table's %v", names, want)
	}
	for _, tl := range tools {
		t.Run(tl.Name, func(t *testing.T) {
			rs := resolveSchema(t, tl.Input)
			props, _ := tl.Input["properties"].(map[string]any)
			required := roomtest.StringsOf(tl.Input["required"])
			if tl.Input["type"] != "object" || tl.Input["additionalProperties"] != false {
				t.Fatalf("schema = %v, want an object without additional properties", tl.Input)
			}
			base := validValue(tl.Input).(map[string]any)
			if err := rs.Validate(base); err != nil {
				t.Fatalf("the required fields %v filled do not validate: %v", required, err)
			}
			if _, err := decodeArgs(tl, base); err != nil {
				t.Fatalf("the decoder refuses %v: %v", base, err)
			}
			for name, raw := range props {
				p := raw.(map[string]any)
				args := roomtest.WithKey(base, name, validValue(p))
				if err := rs.Validate(args); err != nil {
					t.Errorf("%s: the schema refuses its own type: %v", name, err)
				}
				got, err := decodeArgs(tl, args)
				if err != nil {
					t.Errorf("%s: the decoder refuses a value of the schema's type %v: %v", name, p["type"], err)
				} else if g, w := roomtest.JSONText(got[name]), roomtest.JSONText(args[name]); p["type"] != "object" && p["type"] != "array" && g != w {
					t.Errorf("%s: decoded %s, want %s (the decoder does not read this property)", name, g, w)
				} else if got[name] == nil {
					t.Errorf("%s: the decoder does not read this property", name)
				}
				bad := roomtest.WithKey(base, name, wrongValue(p))
				if rs.Validate(bad) == nil {
					t.Errorf("%s: the schema takes %v for a %v", name, bad[name], p["type"])
				}
				if _, err := decodeArgs(tl, bad); room.ErrorKind(err) != room.KindInvalidRequest || !strings.Contains(err.Error(), name) {
					t.Errorf("%s: the decoder takes %v for a %v (err %v)", name, bad[name], p["type"], err)
				}
			}
			// Every field the decoder reads is in the schema, unless it is
			// kept for old clients and hidden from agents.
			typ := tl.Op.Call.Input()
			for _, f := range reflect.VisibleFields(typ) {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if !f.IsExported() || name == "-" {
					continue
				}
				if _, ok := props[name]; !ok && !strings.Contains(f.Tag.Get("schema"), "hidden") {
					t.Errorf("the decoder reads %s.%s (%q), which the schema does not list", typ, f.Name, name)
				}
			}
			for _, r := range required {
				if _, ok := props[r]; !ok {
					t.Errorf("required %q is not a property", r)
				}
				if rs.Validate(roomtest.WithoutKey(base, r)) == nil {
					t.Errorf("the schema takes the arguments without required %q", r)
				}
			}
			unknown := roomtest.WithKey(base, "no_such_field", "x")
			if rs.Validate(unknown) == nil {
				t.Errorf("the schema takes an unknown property")
			}
			if _, err := decodeArgs(tl, unknown); err != nil {
				t.Errorf("the decoder refuses an unknown property (it ignores them so newer clients keep working): %v", err)
			}
		})
	}
}

// TestToolRequiredFieldsAreRequired calls every tool on a real room with no
// arguments, as an admin: a tool whose schema requires a field refuses the
// call, and one whose schema requires nothing takes it. The exceptions are
// named, so a change to either side shows here: workspace_commit needs a
// proposal_id or raw content (one of two, which required cannot say), and
// workspace_changes_since reads an absent version as 0 (from the first
// version) although its schema has always asked for it (plain HTTP
// refuses the absent version; MCP kept the original's leniency).
func TestToolRequiredFieldsAreRequired(t *testing.T) {
	h := apitest.New(t, roomtest.Options{Content: "# Doc\n\n## A\n\ntext\n"}, nil)
	g := h.Join("admin", "*")
	c := h.MCP(g.SessionToken, false)
	refused := map[string]bool{"workspace_commit": true, "workspace_changes_since": false}
	var last []mcp.Tool // workspace_leave ends the session: call it last
	for _, tl := range mcp.Tools() {
		if tl.Name == "workspace_leave" {
			last = append(last, tl)
			continue
		}
		callEmpty(t, c, tl, refused)
	}
	for _, tl := range last {
		callEmpty(t, c, tl, refused)
	}
}

func callEmpty(t *testing.T, c *roomtest.MCP, tl mcp.Tool, exceptions map[string]bool) {
	t.Run(tl.Name, func(t *testing.T) {
		required := roomtest.StringsOf(tl.Input["required"])
		want, named := exceptions[tl.Name]
		if !named {
			want = len(required) > 0
		}
		res := c.Tool(t, tl.Name, map[string]any{})
		if isErr, _ := res["isError"].(bool); isErr != want {
			t.Errorf("required %v: {} refused = %v, want %v: %v", required, isErr, want, res["structuredContent"])
		}
	})
}
