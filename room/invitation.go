package room

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// InvitePrefix starts every invitation a person copies to an agent. It is a
// capability, not an address: the transport hints inside are only hints.
const InvitePrefix = "commonroom://join/"

// Hint says how a joiner may reach the room. Hints are opaque to the engine;
// the loopback one is {type loopback, address 127.0.0.1, port, mode local}.
// It mirrors transport.Hint field for field (the cli converts between them),
// so an invitation carries everything a plugin needs to dial and the room
// needs no import of the transport layer.
type Hint struct {
	Type    string `json:"type"`
	Address string `json:"address,omitempty"`
	// IPs are further addresses of the same endpoint; the ingress accepts
	// them in Host like Address.
	IPs       []string `json:"ips,omitempty"`
	Port      int      `json:"port,omitempty"`
	Encrypted bool     `json:"encrypted"`
	Mode      string   `json:"mode"`
	// Params is what else the plugin needs to dial (never a secret).
	Params map[string]string `json:"params,omitempty"`
}

// Describe is the hint as a person reads it, the same line as
// transport.Hint.Describe: "tailnet-plugin (private, encrypted) name:443".
func (h Hint) Describe() string {
	enc := "not encrypted"
	if h.Encrypted {
		enc = "encrypted"
	}
	where := ""
	if h.Address != "" || h.Port != 0 {
		where = " " + net.JoinHostPort(h.Address, strconv.Itoa(h.Port))
	}
	return fmt.Sprintf("%s (%s, %s)%s", h.Type, h.Mode, enc, where)
}

// LocalHint is used when no listener is attached (in-process rooms).
var localHint = Hint{Type: "local", Mode: "local"}

// Invitation is the decoded payload of a commonroom://join/… URI.
type Invitation struct {
	Protocol    string `json:"protocol"`
	Version     string `json:"version"`
	Transport   Hint   `json:"transport"`
	Transports  []Hint `json:"transports"`
	WorkspaceID string `json:"workspace_id"`
	// InviteID is the invitation's handle (not a secret): the proven join
	// names the invitation by it, so the secret never has to travel.
	// Invitations made before it was added lack it.
	InviteID     string   `json:"invite_id,omitempty"`
	Secret       string   `json:"secret"`
	ExpiresAt    string   `json:"expires_at"`
	Capabilities []string `json:"capabilities"`
	// ParticipantID names the participant a re-admission invitation brings
	// back (not a secret: ids are handles), so a client holding that
	// participant's ended session knows this invitation restores it rather
	// than making a new participant.
	ParticipantID string `json:"participant_id,omitempty"`
}

// EncodeInvitation renders the URI: unpadded base64url of compact JSON with
// sorted keys (the original's wire form, so both can read each other's).
func EncodeInvitation(inv Invitation) string {
	// Round-trip through a map so the keys come out sorted; numbers stay
	// exactly as written (json.Number), never through float64.
	b, _ := json.Marshal(inv)
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	_ = dec.Decode(&m)
	b, _ = json.Marshal(m)
	return InvitePrefix + base64.RawURLEncoding.EncodeToString(b)
}

// DecodeInvitation accepts a commonroom://join/… URI or the raw JSON object.
// It checks shape only; whether the secret is good is the room's question.
func DecodeInvitation(s string, maxPayload int) (Invitation, error) {
	s = strings.TrimSpace(s)
	var raw []byte
	switch {
	case strings.HasPrefix(s, InvitePrefix):
		enc := strings.TrimRight(s[len(InvitePrefix):], "=")
		if len(enc) > maxPayload {
			return Invitation{}, Errorf(KindInvalidRequest, "invitation is larger than %d bytes", maxPayload)
		}
		b, err := base64.RawURLEncoding.DecodeString(enc)
		if err != nil {
			return Invitation{}, Errorf(KindInvalidRequest, "invitation is not valid base64url")
		}
		raw = b
	case strings.HasPrefix(s, "{"):
		if len(s) > maxPayload {
			return Invitation{}, Errorf(KindInvalidRequest, "invitation is larger than %d bytes", maxPayload)
		}
		raw = []byte(s)
	default:
		return Invitation{}, Errorf(KindInvalidRequest, "not an invitation: expected %s… or a JSON object", InvitePrefix)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return Invitation{}, Errorf(KindInvalidRequest, "invitation payload is not a JSON object")
	}
	for _, k := range []string{"protocol", "version", "workspace_id", "secret"} {
		if _, ok := fields[k]; !ok {
			return Invitation{}, Errorf(KindInvalidRequest, "invitation is missing %q", k)
		}
	}
	var inv Invitation
	if err := json.Unmarshal(raw, &inv); err != nil {
		return Invitation{}, Errorf(KindInvalidRequest, "invitation has a field of the wrong type")
	}
	if inv.Protocol != "commonroom" {
		return Invitation{}, Errorf(KindInvalidRequest, "invitation is for protocol %q, not commonroom", inv.Protocol)
	}
	if inv.Version != "1" {
		return Invitation{}, Errorf(KindUnsupportedVersion, "invitation version %q is not supported (this ce reads version 1)", inv.Version)
	}
	if inv.Secret == "" || inv.WorkspaceID == "" {
		return Invitation{}, Errorf(KindInvalidRequest, "invitation has an empty secret or workspace_id")
	}
	for _, h := range append([]Hint{inv.Transport}, inv.Transports...) {
		if h.Port < 0 || h.Port > 65535 {
			return Invitation{}, Errorf(KindInvalidRequest, "invitation names port %d, which does not exist", h.Port)
		}
	}
	if len(inv.Transports) == 0 && inv.Transport.Type != "" {
		inv.Transports = []Hint{inv.Transport}
	}
	return inv, nil
}

// SecretFrom extracts the secret from whatever a joiner pasted: a URI, the
// JSON payload, or the bare secret itself.
func SecretFrom(s string, maxPayload int) (string, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, InvitePrefix) || strings.HasPrefix(s, "{") {
		inv, err := DecodeInvitation(s, maxPayload)
		if err != nil {
			return "", err
		}
		return inv.Secret, nil
	}
	if s == "" || len(s) > 256 {
		return "", Errorf(KindInvalidRequest, "invite is empty or too long").With("field", "invite")
	}
	return s, nil
}
