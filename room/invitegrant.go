package room

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
)

// UnmarshalJSON keeps what encoding/json would lose: whether capabilities
// and permissions were present at all. A present null or [] becomes an
// empty non-nil list (refused by CreateInvite), an absent field stays nil
// (the default set). Every front door decodes InviteInput through here, so
// HTTP, MCP and the CLI's call to a running room agree.
func (in *InviteInput) UnmarshalJSON(b []byte) error {
	type plain InviteInput
	var raw struct {
		plain
		Capabilities json.RawMessage `json:"capabilities"`
		Permissions  json.RawMessage `json:"permissions"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// encoding/json names a promoted field by its path through
			// the embedded struct; the client knows only the field.
			te.Field = strings.TrimPrefix(te.Field, "plain.")
		}
		return err
	}
	*in = InviteInput(raw.plain)
	if raw.Capabilities != nil {
		names := []string{}
		if string(raw.Capabilities) != "null" {
			if err := json.Unmarshal(raw.Capabilities, &names); err != nil {
				return fieldTypeError(err, "capabilities", reflect.TypeFor[[]string]())
			}
			if names == nil {
				names = []string{}
			}
		}
		in.Capabilities = names
	}
	if raw.Permissions != nil {
		var perms string
		if string(raw.Permissions) != "null" {
			if err := json.Unmarshal(raw.Permissions, &perms); err != nil {
				return fieldTypeError(err, "permissions", reflect.TypeFor[string]())
			}
		}
		in.Permissions = &perms
	}
	return nil
}

// fieldTypeError names the field in a type error from a nested decode, so
// the front door's "field X must be of type T" answer stays exact.
func fieldTypeError(err error, field string, t reflect.Type) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &json.UnmarshalTypeError{Value: te.Value, Type: t, Offset: te.Offset, Field: field}
	}
	return err
}

// grant is the capability set an invitation request asks for.
func (in InviteInput) grant() (Caps, error) {
	const hint = "; leave the field out for the default set (read, observe, propose, checkout, commit)"
	switch {
	case in.Capabilities != nil:
		caps, err := ParseCaps(in.Capabilities)
		if err != nil {
			return nil, err
		}
		if len(caps) == 0 {
			return nil, invalid("capabilities", "capabilities is empty: an invitation must grant at least one capability"+hint)
		}
		return caps, nil
	case in.Permissions != nil:
		caps, err := ParseCapsList(*in.Permissions)
		if err != nil {
			return nil, AsError(err).With("field", "permissions")
		}
		if len(caps) == 0 {
			return nil, invalid("permissions", "permissions is empty: an invitation must grant at least one capability"+hint)
		}
		return caps, nil
	}
	return DefaultAgentCaps(), nil
}

// inviteLiveCap validates a requested per-invitation session cap and returns
// the column value (nil: the room's default applies at join time). Anyone
// may lower the room's default; only an admin (the host included) may raise
// it, and never above the room's own session cap.
func (e *Engine) inviteLiveCap(p Principal, want *int) (any, error) {
	if want == nil {
		return nil, nil
	}
	top := e.Limits.MaxSessionsPerInvite
	if p.IsAdmin() || top <= 0 {
		top = e.Limits.MaxLiveSessions
	}
	if *want < 1 || *want > top {
		return nil, invalid("max_live_sessions", "max_live_sessions must be between 1 and %d", top).With("limit", top)
	}
	return *want, nil
}

// inviteSessionCap is the live-session cap an invitation holds its joiners
// to: its own value when it has one, else the room's default; 0 = none.
func (e *Engine) inviteSessionCap(own *int64) int {
	c := e.Limits.MaxSessionsPerInvite
	if own != nil {
		c = int(*own)
	}
	if c > 0 && e.Limits.MaxLiveSessions > 0 {
		c = min(c, e.Limits.MaxLiveSessions)
	}
	return c
}

// liveCapPtr turns inviteLiveCap's column value back into inviteSessionCap's argument.
func liveCapPtr(col any) *int64 {
	if v, ok := col.(int); ok {
		n := int64(v)
		return &n
	}
	return nil
}
