package ops

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
}

// TestInputSchemaTags pins what each schema tag does: required replaces
// jsonschema-go's omitempty rule (Inner has no omitempty and is still
// optional), minimum bounds an integer, hidden drops a property, pointers
// and slices are not nullable, json.RawMessage is an object, and nested
// structs refuse additional properties too.
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
