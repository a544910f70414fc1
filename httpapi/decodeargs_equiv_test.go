package httpapi

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/commonroom/ce/httpapi/internal/wirejson"
)

// TestDecodeValidArgsIsDecodeArgs: for every argument type of the tools
// and routes (toolArgTypes) and every valid JSON input (the fuzz seeds that
// are valid JSON, and each top-level field given a value of every JSON
// kind, including numbers no integer holds), the MCP door's short way
// (DecodeValidArgs) decodes to the same value and fails with the same error
// as DecodeArgs.
func TestDecodeValidArgsIsDecodeArgs(t *testing.T) {
	inputs := []string{``, `null`, ` {} `, `[]`, `"x"`, `1`, `true`,
		`{"unknown":{"deep":[1,2,{"x":null}]}}`, `{"a":1,"a":2}`,
		`{"handoff_id":"h\u0000\ud800\"x","HANDOFF_ID":"y"}`, "{\"summary\":\"\xff\xfe invalid\"}"}
	seeds, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeToolArguments", "*"))
	if err != nil || len(seeds) == 0 {
		t.Fatalf("no fuzz seeds (%v)", err)
	}
	for _, path := range seeds {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, lit, ok := strings.Cut(strings.TrimSpace(string(b)), "[]byte(")
		if !ok {
			continue
		}
		s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			t.Fatalf("seed %s: %v", path, err)
		}
		inputs = append(inputs, s)
	}
	kinds := []string{`null`, `true`, `0`, `-1`, `1.5`, `1e400`, `18446744073709551616`, `"s"`, `"\u00e9\n"`, `[]`, `[1,"x",null]`, `{}`, `{"text":"t","artifacts":[{"kind":"uri","ref":"x"}],"is_error":true}`}
	for _, newArg := range toolArgTypes {
		typ := reflect.TypeOf(newArg()).Elem()
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			for _, k := range kinds {
				inputs = append(inputs, `{`+strconv.Quote(tag)+`:`+k+`}`)
			}
		}
	}
	for name, newArg := range toolArgTypes {
		free := wirejson.NumberFree(reflect.TypeOf(newArg()).Elem())
		for _, in := range inputs {
			if strings.TrimSpace(in) != "" && !json.Valid([]byte(in)) {
				continue // the short way is only taken for valid JSON
			}
			want, got := newArg(), newArg()
			wantErr := wirejson.DecodeArgs([]byte(in), want)
			gotErr := wirejson.DecodeValidArgs([]byte(in), got, free)
			if !reflect.DeepEqual(gotErr, wantErr) {
				t.Fatalf("%s (number free %v): %q: error %#v, DecodeArgs %#v", name, free, in, gotErr, wantErr)
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				w, _ := json.Marshal(want)
				t.Fatalf("%s (number free %v): %q decodes to %s, DecodeArgs to %s", name, free, in, g, w)
			}
		}
	}
	// The types with an interface somewhere keep DecodeArgs' numbers.
	v := map[string]any{}
	if err := wirejson.DecodeValidArgs([]byte(`{"n":12345678901234567890}`), &v, wirejson.NumberFree(reflect.TypeOf(v))); err != nil || !bytes.Equal([]byte(v["n"].(json.Number)), []byte("12345678901234567890")) {
		t.Fatalf("a map of any decoded %#v (%v), want a json.Number", v, err)
	}
}
