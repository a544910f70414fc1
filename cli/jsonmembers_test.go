package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
)

// decodedMembers is objectMembers' answer computed with encoding/json:
// each key (decoded) and its value (compacted), in order.
func decodedMembers(obj []byte) ([]string, bool) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var out []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		var c bytes.Buffer
		json.Compact(&c, v)
		out = append(out, fmt.Sprintf("%s=%s", k, c.String()))
	}
	if _, err := dec.Token(); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return out, true
}

// scannedMembers is objectMembers' answer in the same form.
func scannedMembers(obj []byte) ([]string, bool) {
	ms, ok := objectMembers(obj)
	if !ok {
		return nil, false
	}
	var out []string
	for _, m := range ms {
		var k string
		if json.Unmarshal(m.key, &k) != nil {
			return nil, false
		}
		var c bytes.Buffer
		json.Compact(&c, obj[m.start:m.end])
		out = append(out, fmt.Sprintf("%s=%s", k, c.String()))
	}
	return out, true
}

func TestObjectMembers(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		ok       bool
	}{
		{"empty object", `{}`, true},
		{"spaced empty object", " { \n } ", true},
		{"every kind of value", `{"s":"a\"}{,","n":-1.5e3,"t":true,"f":false,"z":null,"o":{"a":[1,{"b":"]"}]},"a":[]}`, true},
		{"escaped key", `{"a\u0022b":1,"c\\":2}`, true},
		{"spaces everywhere", ` {"a" : 1 , "b":[ 1 , 2 ] } `, true},
		{"an array", `[1,2]`, false},
		{"a string", `"x"`, false},
		{"a number", `12`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := scannedMembers([]byte(tc.in))
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			want, _ := decodedMembers([]byte(tc.in))
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("members\n got %q\nwant %q", got, want)
			}
		})
	}
}

func TestMemberLookupAndStringValue(t *testing.T) {
	obj := []byte(`{"name":"a\u00e9b","uri":"plain","n":3}`)
	ms, _ := objectMembers(obj)
	if v, ok := member(ms, obj, "name"); !ok || string(v) != `"a\u00e9b"` {
		t.Errorf("member name: %s %v", v, ok)
	}
	if s, ok := stringValue([]byte(`"a\u00e9b"`)); !ok || s != "aéb" {
		t.Errorf("stringValue escaped: %q %v", s, ok)
	}
	if s, ok := stringValue([]byte(`"plain"`)); !ok || s != "plain" {
		t.Errorf("stringValue plain: %q %v", s, ok)
	}
	if _, ok := stringValue([]byte(`3`)); ok {
		t.Error("a number is a string")
	}
	if _, ok := member(ms, obj, "missing"); ok {
		t.Error("found a missing member")
	}
}

// FuzzObjectMembers holds the scanner to encoding/json on every valid
// object, and to never reading out of bounds on anything.
func FuzzObjectMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"x\"y"]},"c":null}`, `[1]`, `{"a":"\\"}`, ` {"k" : "v" } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, ok := scannedMembers(in) // must not panic on anything
		if !json.Valid(in) {
			return
		}
		want, wantOK := decodedMembers(in)
		if ok != wantOK || strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("%q:\n got %v %q\nwant %v %q", in, ok, got, wantOK, want)
		}
	})
}
