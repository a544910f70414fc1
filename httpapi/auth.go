package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/httpapi/page"
	"github.com/commonroom/ce/room"
)

// ActAsHeader lets the operator credential act as one participant.
const ActAsHeader = "X-Commonroom-Act-As"

type ctxKey int

const (
	principalKey ctxKey = iota
	requestInfoKey
)

// principalOf returns who the request acts for (set by authenticate).
func principalOf(r *http.Request) room.Principal {
	p, _ := r.Context().Value(principalKey).(room.Principal)
	return p
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// authenticate resolves the bearer session. On the owner listener the
// operator token is also accepted; on the ingress listener only sessions.
func (s *Server) authenticate(l listener) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p, err := s.principal(r, l)
			if err != nil {
				s.sendError(w, r, err)
				return
			}
			credentialShown(r.Context())
			noteParticipant(r, p.ParticipantID)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey, p)))
		})
	}
}

// fromThePage is what a request carrying a page's cookie (the owner's or a
// participant's) must show besides it: a write names the page's own
// origin (D23), and no browser says it came from another origin of the
// site (page.FromPage).
func fromThePage(r *http.Request, which string) error {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
		return room.Errorf(room.KindPermissionDenied, "writes from %s must come from the page itself (Origin)", which)
	}
	return page.FromPage(r)
}

func (s *Server) principal(r *http.Request, l listener) (room.Principal, error) {
	token := bearer(r)
	if l == ownerListener && token == "" && s.pages.Valid(r) {
		// The owner page. Its cookie is SameSite=Strict; a write must also
		// name the page's own origin (D23), so no other site can drive it.
		if err := fromThePage(r, "the owner page"); err != nil {
			return room.Principal{}, err
		}
		return room.Operator(s.eng.HostID), nil
	}
	if l == ingressListener && token == "" && cookieRoute(r.URL.Path) {
		// A participant's page (issue 28): its cookie stands for one
		// session, by the hash of its token, and only on the ingress, the
		// page and the /workspace routes. Writes must name the page's own
		// origin, as the owner page's do.
		if p, present, err := s.participantPrincipal(r); present {
			if err != nil {
				return room.Principal{}, err
			}
			if err := fromThePage(r, "a participant's page"); err != nil {
				return room.Principal{}, err
			}
			return p, nil
		}
	}
	if l == ownerListener && s.isOperator(token) {
		if pid := r.Header.Get(ActAsHeader); pid != "" {
			// The local operator acting as one participant (ce task-cancel
			// --participant): that participant's own rights, nothing more.
			return actor.Read(r.Context(), s.room, func(q room.Querier) (room.Principal, error) {
				return s.eng.PrincipalFor(r.Context(), q, pid)
			})
		}
		return room.Operator(s.eng.HostID), nil
	}
	return s.sessionPrincipal(r.Context(), token)
}

func (s *Server) sessionPrincipal(ctx context.Context, token string) (room.Principal, error) {
	var hash []byte // none for no token: AuthenticateHash refuses it as Authenticate does
	if token != "" {
		hash = room.HashSecret(token)
	}
	return s.sessionPrincipalHash(ctx, hash)
}

// sessionPrincipalHash authenticates a session by its token's hash: the
// bearer token's path, and a participant page cookie's (grantPrincipal).
func (s *Server) sessionPrincipalHash(ctx context.Context, hash []byte) (room.Principal, error) {
	if p, ok, err := s.eng.CachedPrincipalHash(hash); ok {
		return p, err
	}
	return actor.Read(ctx, s.room, func(q room.Querier) (room.Principal, error) {
		return s.eng.AuthenticateHash(ctx, q, hash)
	})
}

// sameOrigin reports whether a request's Origin is this listener's own
// (scheme http, the Host the request was sent to).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o != "" && o == "http://"+r.Host
}
