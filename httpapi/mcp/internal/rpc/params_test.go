package rpc

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestPlainMembers_AgreeWithUnmarshal: where tools/call and tasks/get read
// their params from the members the envelope split, they get exactly what
// json.Unmarshal into their structs gives; every case where they might not
// (a member named in another case — the Kelvin sign folds to k —, a value
// that is not a string) goes to json.Unmarshal, and the common requests do
// take the plain path.
func TestPlainMembers_AgreeWithUnmarshal(t *testing.T) {
	type toolIn struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	type taskIn struct {
		TaskID string `json:"taskId"`
	}
	cases := []struct {
		name   string
		params string
		plain  bool // the plain path must be taken
	}{
		{"a tool call", `{"name":"handoff_get","arguments":{"handoff_id":"h"},"_meta":{"x":1}}`, true},
		{"spaces around values", `{ "name" : "handoff_get" , "arguments" :  { "a" : [1, 2] }  }`, true},
		{"no arguments", `{"name":"t"}`, true},
		{"null arguments", `{"name":"t","arguments":null}`, true},
		{"array arguments", `{"name":"t","arguments":[1,"x"]}`, true},
		{"escaped name", `{"name":"t\u00e9\n\"q\"","arguments":{}}`, true},
		{"repeated name keeps the last", `{"name":"a","name":"b"}`, true},
		{"name in capitals too", `{"name":"a","NAME":"b"}`, false},
		{"arguments in another case", `{"name":"a","Arguments":{"x":1}}`, false},
		{"number name", `{"name":7}`, false},
		{"null name", `{"name":null}`, false},
		{"invalid UTF-8 name", "{\"name\":\"a\xffb\"}", true},
	}
	for _, c := range cases {
		t.Run("tools/call "+c.name, func(t *testing.T) {
			members, err := objectMembers([]byte(c.params))
			if err != nil {
				t.Fatal(err)
			}
			name, args, plain := plainMembers(members, "name", "arguments")
			var got toolIn
			if plain {
				got.Name, plain = PlainString(name)
				got.Arguments = args
			}
			if plain != c.plain {
				t.Fatalf("plain %v, want %v", plain, c.plain)
			}
			if !plain {
				return
			}
			var want toolIn
			if err := json.Unmarshal([]byte(c.params), &want); err != nil {
				t.Fatalf("json.Unmarshal fails (%v) where the plain path did not", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("plain %+v (%s), json.Unmarshal %+v (%s)", got, got.Arguments, want, want.Arguments)
			}
		})
	}
	for _, c := range []struct {
		name, params string
		plain        bool
	}{
		{"tasks/get", `{"taskId":"task_1","_meta":{}}`, true},
		{"escaped id", `{"taskId":"task_\u0031"}`, true},
		{"Kelvin sign key", "{\"taskId\":\"a\",\"tas\u212aId\":\"b\"}", false},
		{"inputResponses present", `{"taskId":"a","inputResponses":{"k":{}}}`, false},
		{"number id", `{"taskId":1}`, false},
	} {
		t.Run("tasks "+c.name, func(t *testing.T) {
			members, err := objectMembers([]byte(c.params))
			if err != nil {
				t.Fatal(err)
			}
			id, responses, plain := plainMembers(members, "taskId", "inputResponses")
			var got taskIn
			if plain && responses == nil {
				got.TaskID, plain = PlainString(id)
			} else {
				plain = false
			}
			if plain != c.plain {
				t.Fatalf("plain %v, want %v", plain, c.plain)
			}
			if !plain {
				return
			}
			var want taskIn
			if err := json.Unmarshal([]byte(c.params), &want); err != nil || got != want {
				t.Fatalf("plain %+v, json.Unmarshal %+v (%v)", got, want, err)
			}
		})
	}
}
