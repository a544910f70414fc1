package mcp

import (
	"bytes"
	"encoding/json"
	"sync"
)

// A client sends the same params._meta (protocol version, client
// capabilities) with every request, and taking it apart (three nested
// objects) was about a third of the envelope's cost. metaCache keeps what a
// well-formed _meta decoded to, by its exact bytes, so a repeated _meta is
// one lookup. A _meta with a progressToken or a valid traceparent (per
// request by nature) or one that fails validation is decoded every time. The cache is bounded: past
// metaCacheMax distinct _meta it starts over, so a client varying its _meta
// costs what it always did.

// metaCacheMax bounds the distinct _meta objects a metaCache holds.
const metaCacheMax = 256

type metaCache struct {
	mu sync.RWMutex
	m  map[string]requestMeta
}

func (c *metaCache) get(raw json.RawMessage) (requestMeta, bool) {
	if c == nil {
		return requestMeta{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.m[string(raw)]
	return m, ok
}

// put keeps meta, decoded from raw; meta must not alias the request body.
func (c *metaCache) put(raw json.RawMessage, meta requestMeta) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= metaCacheMax {
		c.m = make(map[string]requestMeta, 16)
	}
	c.m[string(raw)] = meta
}

// cacheable is meta as the cache keeps it: no progress token or trace id
// (per request by nature: those are not kept), and its capabilities copied
// out of the request body.
func (m requestMeta) cacheable() (requestMeta, bool) {
	if m.ProgressToken != nil || m.TraceID != "" {
		return requestMeta{}, false
	}
	m.ClientCaps = bytes.Clone(m.ClientCaps)
	return m, true
}
