package room

import (
	"encoding/json"
	"slices"
	"strings"
)

// Capability names what a session may do. The set is closed: an unknown name
// is a client mistake, not a new permission.
type Capability string

// The capability names (ARCHITECTURE.md D35): there are no others.
const (
	CapRead     Capability = "read"
	CapObserve  Capability = "observe"
	CapPropose  Capability = "propose"
	CapCheckout Capability = "checkout"
	CapCommit   Capability = "commit"
	CapApprove  Capability = "approve"
	CapInvite   Capability = "invite"
	CapAdmin    Capability = "admin"
	CapAll      Capability = "*"
)

var knownCaps = []Capability{CapRead, CapObserve, CapPropose, CapCheckout, CapCommit, CapApprove, CapInvite, CapAdmin}

// CapabilityNames are the names ParseCaps accepts, the wildcard last: the
// closed set a tool schema offers a model (InviteInput.Capabilities).
func CapabilityNames() []string {
	out := make([]string, 0, len(knownCaps)+1)
	for _, c := range knownCaps {
		out = append(out, string(c))
	}
	return append(out, string(CapAll))
}

// DefaultAgentCaps is what an invitation grants unless told otherwise: enough
// to read, propose, take and deliver work, but not to decide or invite.
func DefaultAgentCaps() Caps {
	return Caps{CapRead, CapObserve, CapPropose, CapCheckout, CapCommit}
}

// Caps is a normalised capability list (sorted in catalogue order, no
// duplicates, or exactly ["*"]).
type Caps []Capability

// Has reports whether the set grants c: the wildcard and admin grant all.
func (cs Caps) Has(c Capability) bool {
	for _, x := range cs {
		if x == CapAll || x == CapAdmin || x == c {
			return true
		}
	}
	return false
}

// Strings returns the names, for JSON and display.
func (cs Caps) Strings() []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// ParseCaps normalises a list of names: blanks trimmed, duplicates dropped,
// unknown names refused, and any "*" collapses the set to ["*"].
func ParseCaps(names []string) (Caps, error) {
	seen := map[Capability]bool{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		c := Capability(n)
		if c == CapAll {
			return Caps{CapAll}, nil
		}
		if !slices.Contains(knownCaps, c) {
			return nil, Errorf(KindInvalidRequest, "unknown capability %q", n).With("field", "capabilities")
		}
		seen[c] = true
	}
	out := Caps{}
	for _, c := range knownCaps {
		if seen[c] {
			out = append(out, c)
		}
	}
	return out, nil
}

// ParseCapsList accepts the original's forms for invitation grants: a legacy
// permission word (read_write, read, admin, *) or a comma-separated list.
func ParseCapsList(s string) (Caps, error) {
	switch strings.TrimSpace(s) {
	case "read_write":
		return DefaultAgentCaps(), nil
	case "read":
		return Caps{CapRead, CapObserve}, nil
	case "admin", "*":
		return Caps{CapAll}, nil
	}
	return ParseCaps(strings.Split(s, ","))
}

// Require returns permission_denied unless the principal holds c.
func (p Principal) Require(c Capability) error {
	if p.Trusted || p.Caps.Has(c) {
		return nil
	}
	return Errorf(KindPermissionDenied, "session is missing the %s capability", c).With("required", string(c))
}

func capsJSON(c Caps) string {
	b, _ := json.Marshal(c.Strings())
	return string(b)
}

func capsFromJSON(s string) (Caps, error) {
	var names []string
	if err := json.Unmarshal([]byte(s), &names); err != nil {
		return nil, Internal(err)
	}
	return ParseCaps(names)
}
