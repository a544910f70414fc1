package ops

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/commonroom/ce/room"
)

// InputSchema is the JSON Schema of an MCP tool's arguments, generated from
// the operation's tagged input struct so it cannot drift from what the
// decoder reads. jsonschema-go gives the properties, types, nesting and
// additionalProperties:false; its "jsonschema" tag the hand-written
// descriptions. Three things it cannot say come from a "schema" tag:
//
//   - required: the engine refuses the call without the field. Not taken
//     from omitempty, because several input types are also stored or sent
//     (ResultInput, Artifact) and their omitempty is a wire decision.
//   - minimum=N: the smallest value the engine accepts.
//   - hidden: a field the decoder still reads for old clients but agents are
//     not shown (InviteInput.Permissions).
//   - enum=a|b|c: the closed set of values the engine accepts, so a model
//     picks one instead of guessing a spelling: on a string field its
//     values, on an array of strings its items' values. It is a hint to the
//     model; the engine still checks the value (TestSchemaEnumsAreTheEngines
//     holds each list against the engine's own).
//
// A "schemaitems" tag describes an array's items. Optional values are not
// nullable: the schema keeps the plain type even where Go uses a pointer
// to tell absent from zero.
func InputSchema(t reflect.Type) (*jsonschema.Schema, error) {
	elicit, err := schemaOf(reflect.TypeFor[room.ElicitResultFields](), nil)
	if err != nil {
		return nil, err
	}
	return schemaOf(t, map[reflect.Type]*jsonschema.Schema{
		// An elicitation form schema: any JSON object.
		reflect.TypeFor[json.RawMessage](): {Type: "object"},
		// An answer to one: the bytes the client sent, described as the
		// MCP ElicitResult they must be.
		reflect.TypeFor[room.ElicitResult](): elicit,
	})
}

// schemaOf is t's schema with its tags applied, rendering the types of
// types with the schemas given.
func schemaOf(t reflect.Type, types map[reflect.Type]*jsonschema.Schema) (*jsonschema.Schema, error) {
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: types})
	if err != nil {
		return nil, err
	}
	if err := refine(s, t); err != nil {
		return nil, fmt.Errorf("schema of %s: %w", t, err)
	}
	return s, nil
}

// refine applies the schema tags of t's fields to s, recursively.
func refine(s *jsonschema.Schema, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	notNull(s)
	if t == reflect.TypeFor[json.RawMessage]() {
		return nil
	}
	switch t.Kind() {
	case reflect.Slice:
		return refine(s.Items, t.Elem())
	case reflect.Struct:
	default:
		return nil
	}
	s.Required = nil
	for _, f := range reflect.VisibleFields(t) {
		name := jsonName(f)
		if name == "" {
			continue
		}
		p := s.Properties[name]
		if p == nil {
			return fmt.Errorf("field %s has no property %q", f.Name, name)
		}
		opts := strings.Split(f.Tag.Get("schema"), ",")
		if slices.Contains(opts, "hidden") {
			delete(s.Properties, name)
			s.PropertyOrder = slices.DeleteFunc(s.PropertyOrder, func(n string) bool { return n == name })
			continue
		}
		for _, opt := range opts {
			k, v, _ := strings.Cut(opt, "=")
			switch k {
			case "":
			case "required":
				s.Required = append(s.Required, name)
			case "minimum":
				n, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("field %s: minimum %q", f.Name, v)
				}
				p.Minimum = &n
			case "enum":
				if err := setEnum(p, v); err != nil {
					return fmt.Errorf("field %s: %w", f.Name, err)
				}
			default:
				return fmt.Errorf("field %s: unknown schema option %q", f.Name, opt)
			}
		}
		if d := f.Tag.Get("schemaitems"); d != "" {
			p.Items.Description = d
		}
		if err := refine(p, f.Type); err != nil {
			return err
		}
	}
	return nil
}

// setEnum puts the values of an enum= option (a|b|c) on a string
// property, or on the items of an array of strings.
func setEnum(p *jsonschema.Schema, values string) error {
	notNull(p) // a slice's type is still ["null", "array"] here
	target := p
	if p.Type == "array" && p.Items != nil {
		target = p.Items
	}
	if target.Type != "string" {
		return fmt.Errorf("enum on a %s, want a string or an array of strings", target.Type)
	}
	if values == "" {
		return fmt.Errorf("enum without values")
	}
	for v := range strings.SplitSeq(values, "|") {
		if v == "" || slices.Contains(target.Enum, any(v)) {
			return fmt.Errorf("enum %q names an empty or repeated value", values)
		}
		target.Enum = append(target.Enum, v)
	}
	return nil
}

// RequiredPaths lists the fields a call with schema s must carry, as the
// agent guide names them (its tools table, and the call forms its test
// checks): a required property, or, when that is an object or an array of
// objects with required fields of its own, those, as change.content or
// requests[].key.
func RequiredPaths(s *jsonschema.Schema) []string {
	var out []string
	for _, name := range s.Required {
		p := s.Properties[name]
		switch {
		case p.Type == "object" && len(p.Required) > 0:
			for _, sub := range RequiredPaths(p) {
				out = append(out, name+"."+sub)
			}
		case p.Type == "array" && p.Items != nil && len(p.Items.Required) > 0:
			for _, sub := range RequiredPaths(p.Items) {
				out = append(out, name+"[]."+sub)
			}
		default:
			out = append(out, name)
		}
	}
	return out
}

// notNull drops the "null" jsonschema-go allows for pointers and slices:
// the tools never documented null as a value.
func notNull(s *jsonschema.Schema) {
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
}

// jsonName is the wire name of an exported field, "" when it is not on the
// wire.
func jsonName(f reflect.StructField) string {
	if !f.IsExported() || f.Anonymous {
		return ""
	}
	tag := f.Tag.Get("json")
	if tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		return f.Name
	}
	return name
}
