package ops

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/commonroom/ce/room"
)

type schemaInner struct {
	Key string `json:"key" jsonschema:"the key" schema:"required"`
}

type schemaProbe struct {
	Name    string            `json:"name" jsonschema:"a name" schema:"required"`
	Count   *int              `json:"count,omitempty" jsonschema:"how many" schema:"minimum=1"`
	Legacy  string            `json:"legacy,omitempty" schema:"hidden"`
	Tags    []string          `json:"tags,omitempty" jsonschema:"labels" schemaitems:"one label"`
	Items   []schemaInner     `json:"items,omitempty"`
	Form    json.RawMessage   `json:"form,omitempty" jsonschema:"any object"`
	Skipped int               `json:"-"`
	Inner   schemaInner       `json:"inner"`
	Extra   map[string]string `json:"extra,omitempty"`
	Mode    string            `json:"mode,omitempty" schema:"enum=fast|slow"`
	Modes   []string          `json:"modes,omitempty" schema:"enum=a|b"`
}

// TestInputSchemaTags pins what each schema tag does: required replaces
// jsonschema-go's omitempty rule (Inner has no omitempty and is still
// optional), minimum bounds an integer, hidden drops a property, pointers
// and slices are not nullable, json.RawMessage is an object, and nested
// structs refuse additional properties too, and enum closes a string or
// the items of an array of strings.
func TestInputSchemaTags(t *testing.T) {
	s, err := InputSchema(reflect.TypeFor[schemaProbe]())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s)
	var got map[string]any
	json.Unmarshal(b, &got)
	want := `{"additionalProperties":false,"properties":{` +
		`"count":{"description":"how many","minimum":1,"type":"integer"},` +
		`"extra":{"additionalProperties":{"type":"string"},"type":"object"},` +
		`"form":{"description":"any object","type":"object"},` +
		`"inner":{"additionalProperties":false,"properties":{"key":{"description":"the key","type":"string"}},"required":["key"],"type":"object"},` +
		`"items":{"items":{"additionalProperties":false,"properties":{"key":{"description":"the key","type":"string"}},"required":["key"],"type":"object"},"type":"array"},` +
		`"mode":{"enum":["fast","slow"],"type":"string"},` +
		`"modes":{"items":{"enum":["a","b"],"type":"string"},"type":"array"},` +
		`"name":{"description":"a name","type":"string"},` +
		`"tags":{"description":"labels","items":{"description":"one label","type":"string"},"type":"array"}},` +
		`"required":["name"],"type":"object"}`
	if g, _ := json.Marshal(got); string(g) != want {
		t.Errorf("schema =\n%s\nwant\n%s", g, want)
	}
}

func TestInputSchemaRefusesUnknownOptions(t *testing.T) {
	type bad struct {
		N int `json:"n" schema:"requird"`
	}
	if _, err := InputSchema(reflect.TypeFor[bad]()); err == nil || !strings.Contains(err.Error(), "requird") {
		t.Errorf("err = %v, want the unknown option named", err)
	}
}

// TestInputSchemaRefusesBadEnums: an enum can close only strings, and must
// name distinct, non-empty values.
func TestInputSchemaRefusesBadEnums(t *testing.T) {
	type onInt struct {
		N int `json:"n" schema:"enum=1|2"`
	}
	type onInts struct {
		N []int `json:"n" schema:"enum=1|2"`
	}
	type empty struct {
		S string `json:"s" schema:"enum="`
	}
	type repeated struct {
		S string `json:"s" schema:"enum=a|b|a"`
	}
	type hole struct {
		S string `json:"s" schema:"enum=a||b"`
	}
	for _, c := range []struct {
		name string
		t    reflect.Type
		want string
	}{
		{"on an integer", reflect.TypeFor[onInt](), "enum on a integer"},
		{"on an array of integers", reflect.TypeFor[onInts](), "enum on a integer"},
		{"without values", reflect.TypeFor[empty](), "without values"},
		{"with a repeated value", reflect.TypeFor[repeated](), "repeated"},
		{"with an empty value", reflect.TypeFor[hole](), "empty"},
	} {
		t.Run("refused "+c.name, func(t *testing.T) {
			if _, err := InputSchema(c.t); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one saying %q", err, c.want)
			}
		})
	}
}

// enumsOf collects every enum of a schema by its path: properties by
// name, array items as [], map values as {}.
func enumsOf(s *jsonschema.Schema, path string, out map[string][]string) {
	if s == nil {
		return
	}
	if len(s.Enum) > 0 {
		var vals []string
		for _, v := range s.Enum {
			vals = append(vals, v.(string))
		}
		out[path] = vals
	}
	for name, p := range s.Properties {
		enumsOf(p, path+"."+name, out)
	}
	enumsOf(s.Items, path+"[]", out)
	enumsOf(s.AdditionalProperties, path+"{}", out)
}

// TestSchemaEnumsAreTheEngines: every enum in a tool's input schema is
// exactly the closed set the engine checks the field against (the lists it
// validates with), and every field the engine checks against a closed set
// has its enum. The tags restate the lists, so this is what keeps them
// equal. An answer's action is the MCP ElicitResult's set: the engine, like
// tasks/update, takes any object there.
func TestSchemaEnumsAreTheEngines(t *testing.T) {
	want := map[string][]string{
		"workspace_invite.capabilities[]":         room.CapabilityNames(),
		"workspace_proposals.status":              room.ProposalStatuses(),
		"handoff_list.role":                       room.HandoffRoles(),
		"handoff_list.status":                     room.HandoffStatuses(),
		"handoff_answer.input_responses{}.action": room.ElicitActions(),
	}
	got := map[string][]string{}
	for _, op := range Tools() {
		s, err := InputSchema(op.Call.Input())
		if err != nil {
			t.Fatal(err)
		}
		enumsOf(s, op.Tool, got)
	}
	for path, w := range want {
		t.Run(path+" is the engine's set", func(t *testing.T) {
			if g := got[path]; !slices.Equal(g, w) {
				t.Errorf("enum %q, the engine's set %q", g, w)
			}
		})
	}
	for path := range got {
		if _, ok := want[path]; !ok {
			t.Errorf("%s has an enum no engine set stands behind: name it here", path)
		}
	}
}

// TestTableRowsAreWellFormed: names and routes are unique, every tool has
// a title and a description, and every input type has a schema.
func TestTableRowsAreWellFormed(t *testing.T) {
	names, routes, tools := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, op := range Table {
		if names[op.Name] || routes[op.HTTP] || op.Tool != "" && tools[op.Tool] {
			t.Errorf("%s repeats a name, route or tool", op.Name)
		}
		names[op.Name], routes[op.HTTP], tools[op.Tool] = true, true, true
		if op.Method() != "GET" && op.Method() != "POST" || !strings.HasPrefix(op.Path(), "/") {
			t.Errorf("%s: route %q", op.Name, op.HTTP)
		}
		if op.Call.Routed() && op.Call.Writes() != (op.Method() == "POST") {
			t.Errorf("%s: a %s route that writes=%v", op.Name, op.Method(), op.Call.Writes())
		}
		if op.Tool != "" && (op.Title == "" || op.Description == "") {
			t.Errorf("tool %s lacks a title or description", op.Tool)
		}
		if op.Call.Routed() {
			if _, err := InputSchema(op.Call.Input()); err != nil {
				t.Errorf("%s: %v", op.Name, err)
			}
		}
	}
}

// TestRequiredPaths: a call names a required field, or the required fields
// inside a required object (inner.key) or list of objects (items[].key);
// an optional field with required fields of its own is not required.
func TestRequiredPaths(t *testing.T) {
	type withLists struct {
		Name  string        `json:"name" schema:"required"`
		Inner schemaInner   `json:"inner" schema:"required"`
		Items []schemaInner `json:"items" schema:"required"`
		Maybe schemaInner   `json:"maybe"`
		Tags  []string      `json:"tags" schema:"required"`
	}
	s, err := InputSchema(reflect.TypeFor[withLists]())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := RequiredPaths(s), []string{"name", "inner.key", "items[].key", "tags"}; !slices.Equal(got, want) {
		t.Errorf("RequiredPaths = %q, want %q", got, want)
	}
}
