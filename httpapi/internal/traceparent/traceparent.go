// Package traceparent reads the trace id out of a W3C Trace Context
// traceparent value (https://www.w3.org/TR/trace-context/#traceparent-header),
// so that the room's request log can name the trace an agent's request
// belongs to. Only version 00 in its exact form is read; anything else is
// not a trace id and is ignored by the caller (the request goes on): the
// value comes from a client, and a log must not carry whatever a client
// chose to put there.
package traceparent

// MaxLen is the length of a version-00 traceparent, the only form read:
// "00-" + 32 hex digits + "-" + 16 hex digits + "-" + 2 hex digits.
const MaxLen = 55

// TraceID returns the trace id (32 lowercase hex digits) of v when v is a
// valid version-00 traceparent: exactly MaxLen bytes, lowercase hex fields,
// and neither the trace id nor the parent id all zeros. A []byte argument's
// id is a copy; a string's shares its bytes.
func TraceID[T string | []byte](v T) (string, bool) {
	if len(v) != MaxLen || v[0] != '0' || v[1] != '0' || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return "", false
	}
	if !hex(v[3:35]) || !hex(v[36:52]) || !hex(v[53:55]) || zeros(v[3:35]) || zeros(v[36:52]) {
		return "", false
	}
	return string(v[3:35]), true
}

// FromJSON is TraceID of a JSON string value as it appears in a request
// body (with its quotes). A valid traceparent needs no escapes, so a value
// with any is not one.
func FromJSON(raw []byte) (string, bool) {
	if len(raw) != MaxLen+2 || raw[0] != '"' || raw[MaxLen+1] != '"' {
		return "", false
	}
	return TraceID(raw[1 : MaxLen+1])
}

func hex[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func zeros[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if v[i] != '0' {
			return false
		}
	}
	return true
}
