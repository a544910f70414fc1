package wirejson

import (
	"context"
	"errors"
	"log/slog"
	"unicode/utf8"

	"github.com/commonroom/ce/room"
)

// Kind is the error code a client sees. A body over the limit is the
// original's limit_exceeded, sent with 413.
func Kind(k room.Kind) string {
	if k == room.KindBodyTooLarge {
		return string(room.KindLimitExceeded)
	}
	return string(k)
}

// ErrorBody is the Commonroom error object: {error, message, …recovery
// fields at the top level}. Agents branch on error, never on message.
// Every string in it is bounded (BoundStrings): an id, selector or URI the
// client sent comes back cut, never whole.
func ErrorBody(err error) map[string]any {
	e := room.AsError(err)
	body := map[string]any{}
	for k, v := range e.Fields {
		body[k] = v
	}
	body = BoundStrings(body).(map[string]any)
	body["error"] = Kind(e.Kind)
	body["message"] = Clip(e.Message, MaxErrorString)
	return body
}

// MaxErrorString is the most bytes of one string an error answer carries
// (then "…"). Messages are far shorter; what is longer is an echo of input.
const MaxErrorString = 256

// BoundStrings returns v with every string in it (in maps and slices, at any
// depth) cut to MaxErrorString bytes. It is applied to every error body,
// HTTP and MCP alike, so no error can send a client's huge input back to
// it. Structs are the server's own records and are left as they are; so is
// "diff", the stale_version diff, which is bounded where it is made.
func BoundStrings(v any) any {
	switch x := v.(type) {
	case string:
		return Clip(x, MaxErrorString)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if k == "diff" {
				out[k] = e
				continue
			}
			out[Clip(k, MaxErrorString)] = BoundStrings(e)
		}
		return out
	case map[string]string:
		out := make(map[string]string, len(x))
		for k, e := range x {
			out[Clip(k, MaxErrorString)] = Clip(e, MaxErrorString)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = BoundStrings(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = Clip(e, MaxErrorString)
		}
		return out
	}
	return v
}

// Clip shortens s to at most n bytes on a rune boundary, marking the cut.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// LogFailure logs an internal failure at Error, except a request whose
// client went away mid-way: nothing failed but the wait, and an operator
// scanning for errors should not see every closed browser tab.
func LogFailure(log *slog.Logger, msg string, err error, attrs ...any) {
	if errors.Is(err, context.Canceled) {
		log.Debug(msg+": the client went away", attrs...)
		return
	}
	log.Error(msg, append(attrs, "err", err)...)
}
