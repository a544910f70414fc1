package rpc

import (
	"bytes"
	"encoding/json"
	"sync"
)

// A client sends the same params._meta (protocol version, client
// capabilities) with every request, and taking it apart (three nested
// objects) was about a third of the envelope's cost. MetaCache keeps what a
// well-formed _meta decoded to, by its exact bytes, so a repeated _meta is
// one lookup. A _meta with a progressToken or a valid traceparent (per
// request by nature) or one that fails validation is decoded every time. The cache is bounded: past
// metaCacheMax distinct _meta it starts over, so a client varying its _meta
// costs what it always did.

// metaCacheMax bounds the distinct _meta objects a MetaCache holds.
const metaCacheMax = 256

type MetaCache struct {
	mu sync.RWMutex
	m  map[string]RequestMeta
}

func (c *MetaCache) get(raw json.RawMessage) (RequestMeta, bool) {
	if c == nil {
		return RequestMeta{}, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	m, ok := c.m[string(raw)]
	return m, ok
}

// put keeps meta, decoded from raw; meta must not alias the request body.
func (c *MetaCache) put(raw json.RawMessage, meta RequestMeta) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= metaCacheMax {
		c.m = make(map[string]RequestMeta, 16)
	}
	c.m[string(raw)] = meta
}

// cacheable is meta as the cache keeps it: no progress token or trace id
// (per request by nature: those are not kept), and its capabilities copied
// out of the request body.
func (m RequestMeta) cacheable() (RequestMeta, bool) {
	if m.ProgressToken != nil || m.TraceID != "" {
		return RequestMeta{}, false
	}
	m.ClientCaps = bytes.Clone(m.ClientCaps)
	return m, true
}
