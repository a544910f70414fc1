package room

import (
	"errors"
	"fmt"
)

// Kind is the stable, machine-readable code of a domain failure. Clients branch
// on it (never on the message), and each front door maps it once to its own
// vocabulary: an HTTP status, an MCP error body or a CLI exit code.
type Kind string

// The codes an error body carries, the one list of them (ARCHITECTURE.md D37).
const (
	KindUnauthorized         Kind = "unauthorized"
	KindPermissionDenied     Kind = "permission_denied"
	KindInvitationExpired    Kind = "invitation_expired"
	KindInvitationRevoked    Kind = "invitation_revoked"
	KindInvitationRedeemed   Kind = "invitation_redeemed"
	KindUnsupportedVersion   Kind = "unsupported_version"
	KindSessionExpired       Kind = "session_expired"
	KindLeaseConflict        Kind = "lease_conflict"
	KindStaleVersion         Kind = "stale_version"
	KindProposalNotFound     Kind = "proposal_not_found"
	KindProposalConflict     Kind = "proposal_conflict"
	KindInvalidRegion        Kind = "invalid_region"
	KindVersionNotFound      Kind = "version_not_found"
	KindTransportUnavailable Kind = "transport_unavailable"
	KindLimitExceeded        Kind = "limit_exceeded"
	KindInvalidRequest       Kind = "invalid_request"
	KindHandoffNotFound      Kind = "handoff_not_found"
	KindHandoffConflict      Kind = "handoff_conflict"
	KindTaskNotFound         Kind = "task_not_found"
	KindNotFound             Kind = "not_found"
	KindBodyTooLarge         Kind = "body_too_large" // over Limits.MaxBodyBytes: unlike limit_exceeded, no retry of it can fit; sent as limit_exceeded
	KindOverloaded           Kind = "overloaded"
	KindUnavailable          Kind = "unavailable" // the room is stopping or stopped
	KindRoomBusy             Kind = "room_busy"   // another process is the writer
	KindInternal             Kind = "internal"
)

// Error is the one error type of the domain. Fields carries the recovery values
// a client needs (current_version, diff, lease_id, …); they are copied to the
// top level of every error body so agents can act without parsing prose.
type Error struct {
	Kind    Kind
	Message string
	Fields  map[string]any
	cause   error
}

// Error makes a domain error an ordinary Go error, so it travels through
// plain error returns and errors.As; it reads "kind: message[: cause]".
func (e *Error) Error() string {
	if e.cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Kind, e.Message, e.cause)
	}
	return fmt.Sprintf("%s: %s", e.Kind, e.Message)
}

// Unwrap exposes the cause for errors.Is; the cause is never shown to clients.
func (e *Error) Unwrap() error { return e.cause }

// With returns the error with one more recovery field; it keeps construction
// sites to one expression.
func (e *Error) With(key string, value any) *Error {
	if e.Fields == nil {
		e.Fields = map[string]any{}
	}
	e.Fields[key] = value
	return e
}

// Errorf builds a domain error with a human message.
func Errorf(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: fmt.Sprintf(format, args...)}
}

// Internal wraps an unexpected failure. Its message is generic on purpose: the
// cause may name paths or SQL and is only logged, never sent.
func Internal(cause error) *Error {
	return &Error{Kind: KindInternal, Message: "internal error", cause: cause}
}

// ErrorKind returns the Kind of err, or KindInternal for anything that is not
// a domain error (and for nil, which callers should not ask about).
func ErrorKind(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindInternal
}

// AsError returns err as a domain error, turning anything unknown into an
// internal one so no front door ever leaks a raw error string.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return Internal(err)
}
