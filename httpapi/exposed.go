package httpapi

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/commonroom/ce/room"
)

// ExposedOnly is the ingress listener's Host/Origin guard: LoopbackOnly,
// plus exactly the names and addresses a transport exposed — each hint's
// Address and IPs, with the hint's port or no port. hints is read per
// request (ce serve sets them once the transport is up). Everything else is
// answered 403 through onReject as LoopbackOnly does, so DNS rebinding stays
// refused for any other name.
func ExposedOnly(hints func() []room.Hint, onReject func(w http.ResponseWriter, r *http.Request)) func(http.Handler) http.Handler {
	loop := LoopbackOnly(onReject)
	return func(next http.Handler) http.Handler {
		guarded := loop(next)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Noted where bound keeps the request's notes (no copy of r),
			// or in notes of its own when nothing in front of it keeps any.
			info := requestInfoOf(r)
			if info == nil {
				info = &requestInfo{}
				r = r.WithContext(context.WithValue(r.Context(), requestInfoKey, info))
			}
			info.ingress = true
			if loopbackRequest(r) {
				next.ServeHTTP(w, r)
				return
			}
			hs := hints()
			if (IsLoopbackHost(r.Host) || exposedHint(hs, r.Host, true) >= 0) && exposedOrigin(hs, r) {
				next.ServeHTTP(w, r)
				return
			}
			guarded.ServeHTTP(w, r) // refuses it, exactly as on the owner listener
		})
	}
}

// exposedOrigin reports whether r has no Origin, or one loopback or exposed
// origin.
func exposedOrigin(hints []room.Hint, r *http.Request) bool {
	origins, present := r.Header["Origin"]
	if !present {
		return true
	}
	if len(origins) != 1 {
		return false
	}
	o := origins[0]
	if IsLoopbackOrigin(o) {
		return true
	}
	var rest string
	switch {
	case hasPrefixFold(o, "http://"):
		rest = o[len("http://"):]
	case hasPrefixFold(o, "https://"):
		rest = o[len("https://"):]
	default:
		return false
	}
	return exposedHint(hints, rest, false) >= 0
}

// exposedHint returns the index of the first hint whose Address or one of
// whose IPs authority ("name", "name:port", "[v6]:port"; a bare v6 address
// only when bareIPv6) names, with that hint's port or none; -1 if none does.
// Names compare without regard to case, IP addresses by value.
func exposedHint(hints []room.Hint, authority string, bareIPv6 bool) int {
	name, port, ok := splitAuthority(authority, bareIPv6)
	if !ok || name == "" {
		return -1
	}
	ip := net.ParseIP(name)
	for i, h := range hints {
		if port >= 0 && port != h.Port {
			continue
		}
		for j := -1; j < len(h.IPs); j++ {
			cand := h.Address
			if j >= 0 {
				cand = h.IPs[j]
			}
			if cand == "" {
				continue
			}
			if ip != nil {
				if cip := net.ParseIP(cand); cip != nil && cip.Equal(ip) {
					return i
				}
				continue
			}
			if strings.EqualFold(cand, name) {
				return i
			}
		}
	}
	return -1
}

// splitAuthority splits "name[:port]" or "[v6][:port]" (or a bare v6 address
// when allowed); port is -1 when absent. A malformed port or bracket is not
// ok.
func splitAuthority(s string, bareIPv6 bool) (name string, port int, ok bool) {
	port = -1
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, false
		}
		name, rest := s[1:end], s[end+1:]
		if net.ParseIP(name) == nil || !strings.Contains(name, ":") {
			return "", 0, false
		}
		if rest == "" {
			return name, -1, true
		}
		if rest[0] != ':' || !validPort(rest[1:]) {
			return "", 0, false
		}
		p, _ := strconv.Atoi(rest[1:])
		return name, p, true
	}
	if strings.Count(s, ":") > 1 {
		if bareIPv6 && net.ParseIP(s) != nil {
			return s, -1, true
		}
		return "", 0, false
	}
	name = s
	if i := strings.IndexByte(s, ':'); i >= 0 {
		if !validPort(s[i+1:]) {
			return "", 0, false
		}
		name = s[:i]
		port, _ = strconv.Atoi(s[i+1:])
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return "", 0, false
		}
	}
	return name, port, true
}

// transportOf is the transport a request came through, as the room decides
// it, never as the client claims: on the ingress, the type of the exposed
// hint its Host names; "loopback" otherwise (the owner listener, or a Host
// that is a loopback name and no hint's).
func (s *Server) transportOf(r *http.Request) string {
	if info := requestInfoOf(r); info != nil && info.ingress {
		hs := s.eng.Hints()
		if i := exposedHint(hs, r.Host, true); i >= 0 && hs[i].Type != "" {
			return hs[i].Type
		}
	}
	return "loopback"
}

// hostGuard is each listener's Host/Origin guard: the owner listener takes
// loopback names only; the ingress also the names its transport exposed.
func (s *Server) hostGuard(l listener) func(http.Handler) http.Handler {
	if l == ownerListener {
		return LoopbackOnly(s.rejectHost)
	}
	return ExposedOnly(s.eng.Hints, s.rejectIngressHost)
}

func (s *Server) rejectIngressHost(w http.ResponseWriter, r *http.Request) {
	noteError(r, string(room.KindPermissionDenied))
	sendJSON(w, http.StatusForbidden, map[string]any{"error": string(room.KindPermissionDenied),
		"message": "requests must name this room (Host and Origin must be loopback names or a name its transport exposed)"})
}
