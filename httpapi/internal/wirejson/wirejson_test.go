package wirejson

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestErrorBodyIsBounded: the error object both doors send carries the wire
// code (a body over the limit is limit_exceeded), and no string in it —
// message, field, key, nested value — is longer than MaxErrorString plus the
// cut mark, except the stale_version diff.
func TestErrorBodyIsBounded(t *testing.T) {
	long := strings.Repeat("é", MaxErrorString) // two bytes a rune: the cut falls mid-rune
	err := room.Errorf(room.KindBodyTooLarge, "%s", long).
		With("selector", long).With(long, "k").With("ids", []string{long}).
		With("nested", map[string]any{"x": []any{long}}).With("diff", long)
	body := ErrorBody(err)
	if body["error"] != "limit_exceeded" {
		t.Errorf("error = %v, want limit_exceeded", body["error"])
	}
	want := strings.Repeat("é", MaxErrorString/2) + "…"
	for k, v := range map[string]any{"message": body["message"], "selector": body["selector"],
		"ids[0]": body["ids"].([]string)[0], "nested.x[0]": body["nested"].(map[string]any)["x"].([]any)[0]} {
		if v != want {
			t.Errorf("%s = %.40q… (%d bytes), want it cut to %d bytes on a rune boundary", k, v, len(v.(string)), len(want))
		}
	}
	if _, ok := body[want]; !ok {
		t.Errorf("the long key was not cut: %v", body)
	}
	if body["diff"] != long {
		t.Errorf("diff was cut; it is bounded where it is made")
	}
}

// TestStatusOnWrite: nothing is sent until the first byte, so a caller that
// fails before writing can still choose the status.
func TestStatusOnWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	w := &StatusOnWrite{W: rec, Status: http.StatusTeapot}
	if w.Wrote || rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Fatalf("sent before the first write: wrote=%v code=%d", w.Wrote, rec.Code)
	}
	if _, err := w.Write([]byte("x")); err != nil || !w.Wrote || rec.Code != http.StatusTeapot || rec.Body.String() != "x" {
		t.Fatalf("after one write: err=%v wrote=%v code=%d body=%q", err, w.Wrote, rec.Code, rec.Body)
	}
}

// TestDecodeArgs: empty and null are an empty object; wrong types name the
// field; a non-object or trailing data is invalid_request.
func TestDecodeArgs(t *testing.T) {
	var v struct {
		N int `json:"n"`
	}
	for _, ok := range []string{"", " null ", "{}", `{"n":1,"other":true}`} {
		if err := DecodeArgs([]byte(ok), &v); err != nil {
			t.Errorf("DecodeArgs(%q) = %v, want nil", ok, err)
		}
	}
	for in, want := range map[string]string{
		`{"n":"x"}`: `field "n"`, `[1]`: "must be a JSON object", `{"n":1} {}`: "data after the object", `{"n":`: "unexpected end of input",
	} {
		err := DecodeArgs([]byte(in), &v)
		if room.ErrorKind(err) != room.KindInvalidRequest || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeArgs(%q) = %v, want invalid_request containing %q", in, err, want)
		}
	}
}

// TestNumberFree: a type is number free exactly when no interface value can
// be reached from it, through fields, pointers, slices, arrays and map keys
// and values, recursive types included.
func TestNumberFree(t *testing.T) {
	type leaf struct {
		S string
		N *int64
		R json.RawMessage
	}
	type withAny struct{ X any }
	type deep struct{ L []map[string]*withAny }
	type tree struct {
		Kids []tree
		V    leaf
	}
	type anyTree struct {
		Kids []*anyTree
		V    any
	}
	cases := []struct {
		name string
		v    any
		want bool
	}{
		{"plain fields are free", leaf{}, true},
		{"a recursive type of plain fields is free", tree{}, true},
		{"maps and arrays of plain values are free", map[string][2]leaf{}, true},
		{"an any field is not", withAny{}, false},
		{"an any deep inside is not", deep{}, false},
		{"an any in a recursive type is not", anyTree{}, false},
		{"a map of any is not", map[string]any{}, false},
		{"a slice of any is not", []any{}, false},
		{"an error field is not", struct{ E error }{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := NumberFree(reflect.TypeOf(c.v)); got != c.want {
				t.Fatalf("NumberFree(%T) = %v, want %v", c.v, got, c.want)
			}
		})
	}
}
