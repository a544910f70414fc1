package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// Invitation is the answer to POST /workspace/invite.
type Invitation struct {
	InviteID     string   `json:"invite_id"`
	Token        string   `json:"token"`
	URI          string   `json:"uri"`
	WorkspaceID  string   `json:"workspace_id"`
	Capabilities []string `json:"capabilities"`
	Target       *string  `json:"target"`
	ExpiresAt    string   `json:"expires_at"`
	MaxUses      *int     `json:"max_uses"`
}

// Session is the answer to POST /session/join: a bearer session.
type Session struct {
	SessionToken  string   `json:"session_token"`
	SessionRef    string   `json:"session_ref"`
	ParticipantID string   `json:"participant_id"`
	WorkspaceID   string   `json:"workspace_id"`
	Kind          string   `json:"kind"`
	Name          string   `json:"name"`
	Capabilities  []string `json:"capabilities"`
	Transport     string   `json:"transport"`
	IssuedAt      string   `json:"issued_at"`
	ExpiresAt     string   `json:"expires_at"`
}

// Invite asks the owner listener (ownerURL), as the operator, for an
// invitation; body is the request (nil: {}).
func Invite(ctx context.Context, hc *http.Client, ownerURL, operatorToken string, body map[string]any) (Invitation, error) {
	if body == nil {
		body = map[string]any{}
	}
	var g Invitation
	r, err := Do(ctx, hc, "POST", ownerURL+"/workspace/invite", operatorToken, body)
	if err != nil {
		return g, err
	}
	if r.Status != http.StatusOK {
		return g, fmt.Errorf("operator invite %v: HTTP %d: %s", body, r.Status, Clip(r.Raw))
	}
	if err := r.Into(&g); err != nil {
		return g, err
	}
	if g.Token == "" || g.URI == "" || g.InviteID == "" {
		return g, fmt.Errorf("invite grant lacks token, uri or invite_id: %s", Clip(r.Raw))
	}
	return g, nil
}

// Join redeems invite (URI, payload or secret) on the ingress listener
// under name: the way an agent enters a room. kind "" is left to the
// server's default.
func Join(ctx context.Context, hc *http.Client, ingressURL, invite, name, kind string) (Session, error) {
	body := map[string]any{"invite": invite, "name": name}
	if kind != "" {
		body["kind"] = kind
	}
	var s Session
	r, err := Do(ctx, hc, "POST", ingressURL+"/session/join", "", body)
	if err != nil {
		return s, err
	}
	if r.Status != http.StatusOK {
		return s, fmt.Errorf("join as %q: HTTP %d: %s", name, r.Status, Clip(r.Raw))
	}
	if err := r.Into(&s); err != nil || s.SessionToken == "" {
		return s, fmt.Errorf("join as %q: no session_token in %s", name, Clip(r.Raw))
	}
	return s, nil
}

// JoinMany joins n sessions on one invitation, eight at a time; session i
// is named fmt.Sprintf(nameFormat, i).
func JoinMany(ctx context.Context, hc *http.Client, ingressURL, invite, nameFormat, kind string, n int) ([]Session, error) {
	out := make([]Session, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i], errs[i] = Join(ctx, hc, ingressURL, invite, fmt.Sprintf(nameFormat, i), kind)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
