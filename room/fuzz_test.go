package room

import (
	"errors"
	"strings"
	"testing"
)

// invitationLimit is the payload bound the fuzz targets decode with (the
// room's default MaxInvitePayload).
const invitationLimit = 8192

// checkInvitationError fails unless err is a *Error of one of the two kinds
// an invitation can be refused with.
func checkInvitationError(t *testing.T, what string, err error) {
	t.Helper()
	var re *Error
	if !errors.As(err, &re) {
		t.Fatalf("%s: %T %v, want a *room.Error", what, err, err)
	}
	if k := ErrorKind(err); k != KindInvalidRequest && k != KindUnsupportedVersion {
		t.Fatalf("%s: kind %s (%v), want invalid_request or unsupported_version", what, k, err)
	}
}

// FuzzDecodeInvitation feeds DecodeInvitation whatever a joiner might paste.
//
// Properties: no panic; an error is invalid_request or unsupported_version;
// a decoded invitation is protocol "commonroom", version "1", with a
// non-empty secret and workspace_id; and EncodeInvitation of it is a
// commonroom://join/ URI that decodes back to the same secret and
// workspace_id. (The re-encoding is decoded with a bound of its own length:
// escaping can make it longer than the input, and the bound is about what
// a joiner may send, not about what the room itself writes.)
// Seeds live in testdata/fuzz/FuzzDecodeInvitation.
func FuzzDecodeInvitation(f *testing.F) {
	f.Add(EncodeInvitation(Invitation{Protocol: "commonroom", Version: "1", Transport: localHint, Transports: []Hint{localHint},
		WorkspaceID: "workspace_0123456789abcdef", Secret: "s3cret", ExpiresAt: "2026-01-01T00:00:00.000Z", Capabilities: []string{"read"}}))
	f.Add(`{"protocol":"commonroom","version":"1","workspace_id":"w","secret":"s"}`)
	f.Fuzz(func(t *testing.T, s string) {
		inv, err := DecodeInvitation(s, invitationLimit)
		if err != nil {
			checkInvitationError(t, "DecodeInvitation", err)
			return
		}
		if inv.Protocol != "commonroom" || inv.Version != "1" || inv.Secret == "" || inv.WorkspaceID == "" {
			t.Fatalf("DecodeInvitation(%q) accepted %+v", s, inv)
		}
		uri := EncodeInvitation(inv)
		if !strings.HasPrefix(uri, InvitePrefix) {
			t.Fatalf("EncodeInvitation(%+v) = %q, not a %s URI", inv, uri, InvitePrefix)
		}
		back, err := DecodeInvitation(uri, len(uri))
		if err != nil {
			t.Fatalf("DecodeInvitation(%q) = %+v, but its re-encoding %q does not decode: %v", s, inv, uri, err)
		}
		if back.Secret != inv.Secret || back.WorkspaceID != inv.WorkspaceID {
			t.Fatalf("round trip changed secret/workspace_id: %q/%q -> %q/%q", inv.Secret, inv.WorkspaceID, back.Secret, back.WorkspaceID)
		}
	})
}

// FuzzSecretFrom feeds SecretFrom whatever a joiner might paste: a URI, the
// JSON payload, or a bare secret.
//
// Properties: no panic; an error is invalid_request or unsupported_version;
// a URI or JSON object yields exactly DecodeInvitation's secret; anything
// else yields the trimmed input itself, non-empty and at most 256 bytes.
// Seeds live in testdata/fuzz/FuzzSecretFrom.
func FuzzSecretFrom(f *testing.F) {
	f.Add("  bare-secret\n")
	f.Add(InvitePrefix + "e30")
	f.Fuzz(func(t *testing.T, s string) {
		secret, err := SecretFrom(s, invitationLimit)
		trimmed := strings.TrimSpace(s)
		structured := strings.HasPrefix(trimmed, InvitePrefix) || strings.HasPrefix(trimmed, "{")
		if err != nil {
			checkInvitationError(t, "SecretFrom", err)
			if structured {
				if _, derr := DecodeInvitation(s, invitationLimit); derr == nil {
					t.Fatalf("SecretFrom(%q) failed (%v) but DecodeInvitation accepts it", s, err)
				}
			} else if trimmed != "" && len(trimmed) <= 256 {
				t.Fatalf("SecretFrom(%q) refused a plausible bare secret: %v", s, err)
			}
			return
		}
		if secret == "" {
			t.Fatalf("SecretFrom(%q) returned an empty secret", s)
		}
		if structured {
			inv, derr := DecodeInvitation(s, invitationLimit)
			if derr != nil || inv.Secret != secret {
				t.Fatalf("SecretFrom(%q) = %q, DecodeInvitation = %+v, %v", s, secret, inv, derr)
			}
			return
		}
		if secret != trimmed || len(secret) > 256 {
			t.Fatalf("SecretFrom(%q) = %q, want the trimmed input (at most 256 bytes)", s, secret)
		}
	})
}
