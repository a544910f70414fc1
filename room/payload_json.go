package room

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Every state change writes an event whose payload is a small flat map, and
// encoding/json spends most of an event's encoding on reflection and on
// sorting the map's keys. appendPayload writes the same bytes for the value
// types event payloads hold (string, bool, int, int64) without either; any
// other value falls back to encoding/json, so the stored JSON never differs.

// appendPayload appends the JSON object encoding/json would produce for
// payload (keys sorted, HTML-safe escaping), or reports false when a value
// is of a type it does not encode.
func appendPayload(dst []byte, payload map[string]any) ([]byte, bool) {
	var keyBuf [16]string
	keys := keyBuf[:0]
	for k, v := range payload {
		switch v.(type) {
		case string, bool, int, int64:
		default:
			return dst, false
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		switch v := payload[k].(type) {
		case string:
			dst = appendJSONString(dst, v)
		case bool:
			dst = strconv.AppendBool(dst, v)
		case int:
			dst = strconv.AppendInt(dst, int64(v), 10)
		case int64:
			dst = strconv.AppendInt(dst, v, 10)
		}
	}
	return append(dst, '}'), true
}

// encodePayload is the event payload's JSON, exactly as json.Marshal writes it.
func encodePayload(payload map[string]any) ([]byte, error) {
	if b, ok := appendPayload(make([]byte, 0, 160), payload); ok {
		return b, nil
	}
	return json.Marshal(payload)
}

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's string encoding with HTML escaping
// (its default): <, > and & as \u003c, \u003e, \u0026; control characters
// as \n, \r, \t, \b, \f or \u00XX; invalid UTF-8 as \ufffd; U+2028 and
// U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
