package wirejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/commonroom/ce/room"
)

// DecodeArgs decodes one JSON object (the HTTP body or MCP tool arguments).
// An empty body or null is an empty object. Wrong types name the field;
// trailing data is refused. Unknown fields are ignored so newer clients
// keep working against this server.
func DecodeArgs(b []byte, v any) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		b = []byte("{}")
	}
	if b[0] != '{' {
		return room.Errorf(room.KindInvalidRequest, "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			field := typeErr.Field
			return room.Errorf(room.KindInvalidRequest, "field %q must be of type %s", field, typeErr.Type.String()).With("field", field)
		}
		return room.Errorf(room.KindInvalidRequest, "malformed JSON: %s", JSONProblem(err))
	}
	if dec.More() {
		return room.Errorf(room.KindInvalidRequest, "malformed JSON: data after the object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return room.Errorf(room.KindInvalidRequest, "malformed JSON: data after the object")
	}
	return nil
}

// JSONProblem keeps the decoder's explanation but never echoes input bytes.
func JSONProblem(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return "syntax error at offset " + strconv.FormatInt(syn.Offset, 10)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	msg := err.Error()
	if i := strings.Index(msg, ":"); i > 0 && strings.HasPrefix(msg, "json") {
		return strings.TrimSpace(msg[i+1:])
	}
	return "invalid JSON"
}
