package rpc

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// objectMembers must agree with encoding/json on every valid object, since
// the envelope layer relies on it instead of json.Unmarshal.
func checkMembersAgree(t *testing.T, in []byte) {
	t.Helper()
	var want map[string]json.RawMessage
	wantErr := json.Unmarshal(in, &want)
	got, err := objectMembers(in)
	if wantErr != nil {
		if err == nil && json.Valid(in) {
			t.Fatalf("objectMembers(%q) accepted what encoding/json refused: %v", in, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("objectMembers(%q): %v; encoding/json gives %v", in, err, want)
	}
	if got.len() != len(want) {
		t.Fatalf("objectMembers(%q) = %d members, encoding/json %d", in, got.len(), len(want))
	}
	for k, w := range want {
		g, ok := got.get(k)
		if !ok {
			t.Fatalf("objectMembers(%q) lacks key %q", in, k)
		}
		// encoding/json keeps a RawMessage's bytes as they were sent.
		if !reflect.DeepEqual([]byte(g), []byte(w)) {
			t.Fatalf("objectMembers(%q)[%q] = %s, encoding/json %s", in, k, g, w)
		}
	}
}

func TestObjectMembersAgreesWithEncodingJSON(t *testing.T) {
	cases := []struct{ name, in string }{
		{"empty object", `{}`},
		{"spaces everywhere", " \t\r\n{ \"a\" : 1 , \"b\":\"x\" }\n"},
		{"nested objects and arrays with brackets inside strings", `{"a":{"b":["}",{"c":"]"}]},"d":[1,[2,[3]]]}`},
		{"escaped quotes and backslashes in values", `{"a":"say \"hi\" \\","b":"\\\""}`},
		{"escaped key", `{"\u006dethod":"tasks/get"}`},
		{"key with an escaped quote", `{"a\"b":1}`},
		{"unicode keys", `{"héllo":1,"😀":2}`},
		{"repeated key keeps the last", `{"a":1,"a":2}`},
		{"literals", `{"t":true,"f":false,"n":null,"x":-1.5e+10}`},
		{"empty key", `{"":0}`},
		{"many members, repeated before and after they are indexed", manyMembers()},
		{"a real request's params", `{"taskId":"t_1","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { checkMembersAgree(t, []byte(c.in)) })
	}
	for _, notObject := range []string{`[]`, `"x"`, `1`, `null`} {
		if _, err := objectMembers([]byte(notObject)); err == nil {
			t.Errorf("objectMembers(%s) accepted a non-object", notObject)
		}
	}
}

func TestStringOfAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{`"plain"`, `"with \"escapes\" \u00e9"`, ` "padded" `, `""`, `"héllo"`, "\"\xff\""} {
		var want string
		_ = json.Unmarshal([]byte(in), &want)
		if got := stringOf(json.RawMessage(in)); got != want {
			t.Errorf("stringOf(%q) = %q, encoding/json %q", in, got, want)
		}
	}
}

func FuzzObjectMembers(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"]"]},"c":"\""}`, `{"\u0041":true,"A":false}`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return // the envelope layer only ever splits validated bodies
		}
		checkMembersAgree(t, in)
	})
}

// manyMembers is an object of more members than objectMembers searches in
// order, with keys repeated both while it searches and once it indexes.
func manyMembers() string {
	var b strings.Builder
	b.WriteString("{")
	for i := range 60 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%q:%d", fmt.Sprintf("k%d", i%23), i)
	}
	b.WriteString(`,"k\u0031":"escaped repeat","":1,"":2}`)
	return b.String()
}
