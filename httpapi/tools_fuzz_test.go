package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
	"github.com/commonroom/ce/httpapi/ops"
	"github.com/commonroom/ce/room"
)

// toolArgTypes names the argument type every operation of the table
// decodes into (keyed by tool name, or "op:" and the operation's name for
// the routes without a tool), plus the HTTP bodies outside the table that go
// through the same decodeArgs ("http:" entries).
var toolArgTypes = func() map[string]func() any {
	m := map[string]func() any{
		"http:join": func() any { return new(joinRequest) },
	}
	for _, op := range ops.Table {
		if !op.Call.Routed() {
			continue
		}
		key := "op:" + op.Name
		if op.Tool != "" {
			key = op.Tool
		}
		typ := op.Call.Input()
		m[key] = func() any { return reflect.New(typ).Interface() }
	}
	return m
}()

// FuzzDecodeToolArguments decodes arbitrary bytes with decodeArgs into every
// argument type the tools (and the HTTP bodies) use.
//
// Properties: no panic; an error is always a *room.Error of kind
// invalid_request; a success means the input was empty, null or one valid
// JSON object (nothing after it); a decoded value re-encodes to JSON, and that
// encoding decodes again to the same encoding (a fixed point).
//
// Before fuzzing it checks the types above against toolCatalog: every tool
// has an entry, and for every top-level field of the entry's type, the
// tool's own operation refuses a wrongly typed value for that field with
// invalid_request naming it (so the types cannot drift from the catalog).
// Seeds live in testdata/fuzz/FuzzDecodeToolArguments (one per argument
// shape, plus malformed and boundary inputs).
func FuzzDecodeToolArguments(f *testing.F) {
	checkToolArgTypes(f)
	f.Add([]byte(`{"summary":"do it","idempotency_key":"k"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		trimmed := bytes.TrimSpace(b)
		for name, newArg := range toolArgTypes {
			v := newArg()
			err := wirejson.DecodeArgs(b, v)
			if err != nil {
				var re *room.Error
				if !errors.As(err, &re) || room.ErrorKind(err) != room.KindInvalidRequest {
					t.Fatalf("%s: decoding %q: %T %v, want a *room.Error of kind invalid_request", name, b, err, err)
				}
				continue
			}
			if len(trimmed) != 0 && string(trimmed) != "null" && (trimmed[0] != '{' || !json.Valid(trimmed)) {
				t.Fatalf("%s: decoded %q, which is not one JSON object", name, b)
			}
			out, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s: decoded %q but cannot re-encode %#v: %v", name, b, v, err)
			}
			w := newArg()
			if err := wirejson.DecodeArgs(out, w); err != nil {
				t.Fatalf("%s: the re-encoding %s of %q does not decode: %v", name, out, b, err)
			}
			again, err := json.Marshal(w)
			if err != nil || !bytes.Equal(again, out) {
				t.Fatalf("%s: %q decodes to %s, which decodes to %s (%v)", name, b, out, again, err)
			}
		}
	})
}

// checkToolArgTypes fails unless toolArgTypes covers toolCatalog and each
// tool really decodes into the listed type (see FuzzDecodeToolArguments).
func checkToolArgTypes(f *testing.F) {
	f.Helper()
	for _, tl := range toolCatalog() {
		newArg, ok := toolArgTypes[tl.Name]
		if !ok {
			f.Fatalf("tool %s has no entry in toolArgTypes: add its argument type so it is fuzzed", tl.Name)
		}
		typ := reflect.TypeOf(newArg()).Elem()
		for i := 0; i < typ.NumField(); i++ {
			field := typ.Field(i)
			tag := strings.Split(field.Tag.Get("json"), ",")[0]
			wrong, ok := wrongJSON(field.Type)
			if tag == "" || tag == "-" || !ok {
				continue
			}
			args := json.RawMessage(fmt.Sprintf(`{%q:%s}`, tag, wrong))
			err := runDecodeOnly(tl, args)
			if room.ErrorKind(err) != room.KindInvalidRequest || !strings.Contains(err.Error(), tag) {
				f.Fatalf("tool %s: arguments %s: got %v, want invalid_request naming %q (is %s its argument type?)",
					tl.Name, args, err, tag, typ)
			}
		}
	}
}

// runDecodeOnly runs a tool with arguments that must fail to decode. The
// operation decodes before it touches the room, so an empty environment is
// never used; if decoding unexpectedly succeeds, the nil room panics and
// that is reported as an error.
func runDecodeOnly(tl tool, args json.RawMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the arguments decoded (the tool went on and panicked: %v)", p)
		}
	}()
	_, err = tl.Op.Run(context.Background(), ops.Env{}, room.Principal{}, func(v any) error { return wirejson.DecodeArgs(args, v) })
	return err
}

// wrongJSON returns a JSON value that cannot decode into t.
func wrongJSON(t reflect.Type) (string, bool) {
	if t == reflect.TypeOf(json.RawMessage(nil)) {
		return "", false
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return `7`, true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64, reflect.Bool, reflect.Slice, reflect.Struct, reflect.Map:
		return `"wrong"`, true
	}
	return "", false
}
