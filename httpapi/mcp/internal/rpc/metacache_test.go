package rpc

import (
	"fmt"
	"testing"
)

// TestMetaCache_Rules: a repeated _meta is answered from the cache with
// capabilities that do not alias the body they were first read from (a
// reused body buffer cannot change them); a _meta with a progress token or
// one that fails is never kept; the cache starts over past its bound.
func TestMetaCache_Rules(t *testing.T) {
	const caps = `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}`
	t.Run("a repeated _meta is served with its own copy of the capabilities", func(t *testing.T) {
		var metas MetaCache
		body := []byte(rpc("1", "tools/list", meta))
		if _, _, e := Decode(std("tools/list", ""), body, testMethods, &metas); e != nil {
			t.Fatal(e)
		}
		for i := range body { // the first request's buffer is reused for something else
			body[i] = ' '
		}
		req, _, e := Decode(std("tools/list", ""), []byte(rpc("2", "tools/list", meta)), testMethods, &metas)
		if e != nil || string(req.Meta.ClientCaps) != caps || !req.Meta.Tasks {
			t.Fatalf("%+v %v", req, e)
		}
		if len(metas.m) != 1 {
			t.Fatalf("%d kept", len(metas.m))
		}
	})
	t.Run("a progress token or a failing _meta is not kept", func(t *testing.T) {
		var metas MetaCache
		withToken := `"_meta":{"progressToken":"p1","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
		bad := `"_meta":{"io.modelcontextprotocol/protocolVersion":7,"io.modelcontextprotocol/clientCapabilities":{}}`
		req, _, e := Decode(std("tools/list", ""), []byte(rpc("1", "tools/list", withToken)), testMethods, &metas)
		if e != nil || string(req.Meta.ProgressToken) != `"p1"` {
			t.Fatalf("%+v %v", req, e)
		}
		if _, _, e := Decode(std("tools/list", ""), []byte(rpc("1", "tools/list", bad)), testMethods, &metas); e == nil {
			t.Fatal("a bad _meta passed")
		}
		if len(metas.m) != 0 {
			t.Fatalf("%d kept", len(metas.m))
		}
	})
	t.Run("past its bound the cache starts over", func(t *testing.T) {
		var metas MetaCache
		for i := range metaCacheMax + 1 {
			m := fmt.Sprintf(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"x%d":{}}}`, i)
			if _, _, e := Decode(std("tools/list", ""), []byte(rpc("1", "tools/list", m)), testMethods, &metas); e != nil {
				t.Fatal(e)
			}
		}
		if len(metas.m) != 1 {
			t.Fatalf("%d kept after overflowing, want 1", len(metas.m))
		}
	})
}
