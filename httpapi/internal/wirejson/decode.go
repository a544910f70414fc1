package wirejson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/commonroom/ce/room"
)

// DecodeArgs decodes one JSON object (the HTTP body or MCP tool arguments).
// An empty body or null is an empty object. Wrong types name the field;
// trailing data is refused. Unknown fields are ignored so newer clients
// keep working against this server.
func DecodeArgs(b []byte, v any) error { return decodeArgs(b, v, false) }

// decodeArgs is DecodeArgs; valid says b is already known to be one valid
// JSON value and v's type to be NumberFree (DecodeValidArgs).
func decodeArgs(b []byte, v any, valid bool) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" {
		b = []byte("{}")
	}
	if b[0] != '{' {
		return room.Errorf(room.KindInvalidRequest, "the body must be a JSON object")
	}
	if valid {
		if err := json.Unmarshal(b, v); err != nil {
			return argsError(err)
		}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return argsError(err)
	}
	if dec.More() {
		return room.Errorf(room.KindInvalidRequest, "malformed JSON: data after the object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return room.Errorf(room.KindInvalidRequest, "malformed JSON: data after the object")
	}
	return nil
}

// argsError is the error DecodeArgs answers for a failed decode.
func argsError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		return room.Errorf(room.KindInvalidRequest, "field %q must be of type %s", field, typeErr.Type.String()).With("field", field)
	}
	return room.Errorf(room.KindInvalidRequest, "malformed JSON: %s", JSONProblem(err))
}

// DecodeValidArgs is DecodeArgs for arguments already known to be one
// valid JSON value (MCP tool arguments: a member of a body json.Valid
// accepted) decoded into a type for which NumberFree holds. For such input
// DecodeArgs' stream decoder, its reader, its copy of the bytes and its
// check for trailing data do nothing json.Unmarshal does not: the same
// decoding runs on the same bytes, and UseNumber only changes what an
// interface value receives, which such a type has none of. The result and
// every error are DecodeArgs' (TestDecodeValidArgsIsDecodeArgs); any other
// type goes through DecodeArgs.
func DecodeValidArgs(b []byte, v any, numberFree bool) error { return decodeArgs(b, v, numberFree) }

// NumberFree reports whether decoding JSON into a value of type t can never
// store into an interface (an any field, a map or slice of any, at any
// depth): then UseNumber cannot change the result. A type that decodes
// itself (json.Unmarshaler) is judged by its fields all the same, which
// only errs towards false.
func NumberFree(t reflect.Type) bool { return numberFree(t, map[reflect.Type]bool{}) }

func numberFree(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return true // a cycle: judged where it started
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Interface:
		return false
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return numberFree(t.Elem(), seen)
	case reflect.Map:
		return numberFree(t.Key(), seen) && numberFree(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if !numberFree(t.Field(i).Type, seen) {
				return false
			}
		}
	}
	return true
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
