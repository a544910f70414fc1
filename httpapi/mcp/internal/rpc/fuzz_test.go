package rpc

import (
	"github.com/commonroom/ce/httpapi/present"

	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// FuzzDecodeRPC feeds Decode arbitrary bodies and Mcp-Name values. The
// protocol version header is fixed and Mcp-Method follows the body's method
// (when there is one), so that inputs get past the early steps.
//
// Properties: no panic; exactly one outcome (a request, a notification or an
// error); errors are 400 or 404 and carry either no id or a string/integer id
// that WriteError echoes byte for byte; requests are fully validated.
func FuzzDecodeRPC(f *testing.F) {
	for _, s := range []struct{ body, name string }{
		{rpc("7", "tools/list", metaOK), ""},
		{rpc(`"a"`, "tools/call", `"name":"lookup","arguments":{},`+metaOK), "lookup"},
		{rpc("7", "tools/call", `"name":"Hello",`+metaOK), "=?base64?SGVsbG8=?="},
		{rpc("7", "tools/call", `"name":"Hello",`+metaOK), "=?base64?SGVsbG8?="},
		{rpc("7", "tasks/get", `"taskId":"t1",`+metaOK), "  t1\t"},
		{rpc("7", "tasks/result", `"taskId":"t1",`+metaOK), ""},
		{rpc("7", "tools/list", metaV999), ""},
		{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`, ""},
		{`{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}`, ""},
		{`{"jsonrpc":"2.0","id":null,"method":"tools/list"}`, ""},
		{`{"jsonrpc":"2.0","id":7,"result":{}}`, ""},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[]}`, ""},
		{`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"progressToken":"p"}}}`, ""},
		{`{"jsonrpc":"2.0","id":7,`, ""},
	} {
		f.Add([]byte(s.body), s.name)
	}
	f.Fuzz(func(t *testing.T, body []byte, mcpName string) {
		h := http.Header{}
		h.Set("MCP-Protocol-Version", present.ProtocolVersion)
		var top map[string]json.RawMessage
		if json.Unmarshal(body, &top) == nil {
			var m string
			if json.Unmarshal(top["method"], &m) == nil && m != "" {
				h["Mcp-Method"] = []string{m}
			}
		}
		h["Mcp-Name"] = []string{mcpName}

		req, notification, rerr := Decode(h, body, testMethods, nil)
		if req == nil {
			t.Fatalf("req is nil")
		}
		// A repeated _meta answered from the cache changes nothing: the
		// first decode fills it, the second is served from it.
		var metas MetaCache
		for i := range 2 {
			creq, cnote, cerr := Decode(h, body, testMethods, &metas)
			if !reflect.DeepEqual(creq, req) || cnote != notification || !reflect.DeepEqual(cerr, rerr) {
				t.Fatalf("decode %d with the _meta cache: %+v %v %+v; without: %+v %v %+v", i, creq, cnote, cerr, req, notification, rerr)
			}
		}
		switch {
		case rerr != nil:
			if notification {
				t.Fatalf("error and notification at once")
			}
			if rerr.Status != http.StatusBadRequest && rerr.Status != http.StatusNotFound {
				t.Fatalf("status %d", rerr.Status)
			}
			if req.Method != "" || req.Params != nil {
				t.Fatalf("req on error carries more than the id: %+v", req)
			}
			if req.ID != nil && !isStringOrIntegerJSON(req.ID) {
				t.Fatalf("echoed id %q is not a JSON string or integer", req.ID)
			}
			rec := httptest.NewRecorder()
			WriteError(rec, req.ID, rerr)
			var resp map[string]json.RawMessage
			if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
				t.Fatalf("error body is not JSON: %v: %s", err, rec.Body.Bytes())
			}
			gotID, hasID := resp["id"]
			if req.ID == nil && hasID {
				t.Fatalf("id %s written for an unreadable id", gotID)
			}
			if req.ID != nil && string(gotID) != string(req.ID) {
				t.Fatalf("id written as %s, read as %s", gotID, req.ID)
			}
		case notification:
			if req.ID != nil || !json.Valid(req.Params) || kindOf(req.Params) != '{' {
				t.Fatalf("bad notification %+v", req)
			}
		default:
			if !isStringOrIntegerJSON(req.ID) {
				t.Fatalf("request id %q", req.ID)
			}
			if _, ok := testMethods.Name(req.Method); !ok {
				t.Fatalf("unknown method %q accepted", req.Method)
			}
			if req.Meta.ProtocolVersion != present.ProtocolVersion {
				t.Fatalf("version %q accepted", req.Meta.ProtocolVersion)
			}
			if !json.Valid(req.Params) || kindOf(req.Params) != '{' || kindOf(req.Meta.ClientCaps) != '{' {
				t.Fatalf("params %q caps %q", req.Params, req.Meta.ClientCaps)
			}
			if req.Meta.ProgressToken != nil && !isStringOrIntegerJSON(req.Meta.ProgressToken) {
				t.Fatalf("progress token %q", req.Meta.ProgressToken)
			}
		}
	})
}

// isStringOrIntegerJSON is an independent check of validID: raw is a JSON
// string, or a JSON number that encoding/json reads as a whole number written
// without fraction or exponent.
func isStringOrIntegerJSON(raw json.RawMessage) bool {
	if !json.Valid(raw) {
		return false
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false
	}
	switch v.(type) {
	case string:
		return true
	case float64:
		for i, c := range raw {
			if !(c >= '0' && c <= '9' || c == '-' && i == 0) {
				return false
			}
		}
		return true
	}
	return false
}
