package room

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

func runes(s string) int { return utf8.RuneCountInString(s) }

func tooLong(field string, max int) *Error {
	return Errorf(KindLimitExceeded, "%s is longer than %d characters", field, max).With("field", field).With("limit", max)
}

func invalid(field, format string, args ...any) *Error {
	return Errorf(KindInvalidRequest, format, args...).With("field", field)
}

// checkText validates an optional free-text field: UTF-8 and at most max code points.
func checkText(field, s string, max int) error {
	if !utf8.ValidString(s) {
		return invalid(field, "%s is not valid UTF-8", field)
	}
	if runes(s) > max {
		return tooLong(field, max)
	}
	return nil
}

// encodeJSON is json.Marshal without HTML escaping, so a '<' in a result
// costs one byte against the size limit, not six.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
