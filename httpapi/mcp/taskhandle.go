package mcp

import (
	"bytes"
	"slices"
	"strconv"

	"github.com/commonroom/ce/room"
)

// The task handle a task-augmented handoff_create answers with was a map
// (createTaskResult) that writeRPCResult encoded by reflection, sorting its
// keys and those of its _meta: in a profile of the bench's lifecycle that
// encoding was about a tenth of the MCP door's CPU per create. The handle
// is now written as bytes in the map's key order; the bytes are exactly
// what encoding the map sent (TestTaskHandleBytesAreTheMapEncoding).

// serverInfoKey is serverInfo's one key.
const serverInfoKey = "io.modelcontextprotocol/serverInfo"

// createTaskRaw is createTaskResult(t) encoded. Where a _meta value cannot
// be encoded it returns the map, which writeRPCResult answers as before.
func (s *Handler) createTaskRaw(t room.DetailedTask) any {
	info, ok := s.serverInfoJSON()
	if !ok {
		return s.createTaskResult(t)
	}
	res := make([]byte, 0, 320+len(info))
	res = append(res, `{"_meta":{`...)
	keys := make([]string, 0, len(t.Meta)+1)
	for k := range t.Meta {
		if k != serverInfoKey {
			keys = append(keys, k)
		}
	}
	keys = append(keys, serverInfoKey)
	slices.Sort(keys) // encoding/json writes a map's keys in byte order
	var err error
	for i, k := range keys {
		if i > 0 {
			res = append(res, ',')
		}
		res = appendJSONString(res, k)
		res = append(res, ':')
		if k == serverInfoKey {
			res = append(res, info...)
		} else if res, err = encodeNoHTML(res, t.Meta[k]); err != nil {
			return s.createTaskResult(t)
		}
	}
	res = append(res, `},"createdAt":`...)
	res = appendJSONString(res, t.CreatedAt)
	res = append(res, `,"lastUpdatedAt":`...)
	res = appendJSONString(res, t.LastUpdatedAt)
	res = append(res, `,"pollIntervalMs":`...)
	res = strconv.AppendInt(res, t.PollIntervalMs, 10)
	res = append(res, `,"resultType":"task","status":`...)
	res = appendJSONString(res, t.Status)
	if t.StatusMessage != "" {
		res = append(res, `,"statusMessage":`...)
		res = appendJSONString(res, t.StatusMessage)
	}
	res = append(res, `,"taskId":`...)
	res = appendJSONString(res, t.TaskID)
	res = append(res, `,"ttlMs":`...)
	res = strconv.AppendInt(res, t.TTLMs, 10)
	return rawResult(append(res, '}'))
}

// serverInfoJSON is serverInfo()'s one value as s.metaJSON holds it.
func (s *Handler) serverInfoJSON() ([]byte, bool) {
	prefix := `{"` + serverInfoKey + `":`
	m := s.metaJSON
	if !bytes.HasPrefix(m, []byte(prefix)) || len(m) < len(prefix)+2 || m[len(m)-1] != '}' {
		return nil, false
	}
	return m[len(prefix) : len(m)-1], true
}

// appendJSONString appends s as encoding/json writes a string without HTML
// escaping. Printable ASCII needs only '"' and '\\' escaped; anything else
// (control bytes, UTF-8, which may hold U+2028/U+2029 or invalid bytes)
// goes through the encoder itself.
func appendJSONString[T string | []byte](dst []byte, s T) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 {
			out, err := encodeNoHTML(dst, string(s))
			if err != nil { // a string always encodes
				panic(err)
			}
			return out
		}
	}
	dst = slices.Grow(dst, len(s)+2+len(s)/8)
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '"' || c == '\\' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', c)
			start = i + 1
		}
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
