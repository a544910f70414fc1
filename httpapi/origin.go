package httpapi

import (
	"net/http"
	"strings"
)

// LoopbackOnly returns a chi-compatible middleware that guards a server bound to
// loopback against DNS rebinding and cross-site browser requests (spec §1.2).
//
// A request is rejected when its Host is not a loopback name (see IsLoopbackHost),
// or when it carries an Origin header that is not a loopback origin (see
// IsLoopbackOrigin). "Origin: null", an empty Origin and more than one Origin
// header are rejected too. A request with no Origin header at all is allowed:
// non-browser clients do not send one.
//
// A rejected request is answered with HTTP 403. onReject writes the headers and
// body of that answer; whatever status it asks for, 403 is sent, and if it writes
// nothing the answer is a bare 403. A nil onReject sends a plain-text 403.
func LoopbackOnly(onReject func(w http.ResponseWriter, r *http.Request)) func(http.Handler) http.Handler {
	if onReject == nil {
		onReject = func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "forbidden: request is not from a loopback host or origin", http.StatusForbidden)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if loopbackRequest(r) {
				next.ServeHTTP(w, r)
				return
			}
			fw := &forbiddenWriter{ResponseWriter: w}
			onReject(fw, r)
			fw.WriteHeader(http.StatusForbidden) // no-op when onReject already wrote
		})
	}
}

// loopbackRequest reports whether r passes the Host and Origin checks.
func loopbackRequest(r *http.Request) bool {
	if !IsLoopbackHost(r.Host) {
		return false
	}
	origins, present := r.Header["Origin"]
	if !present {
		return true
	}
	return len(origins) == 1 && IsLoopbackOrigin(origins[0])
}

// IsLoopbackHost reports whether host, a Host header value, names the local
// machine: "localhost", "127.0.0.1", "[::1]" or the bare "::1", compared without
// regard to case, optionally followed by ":port" (1–5 digits; the bare "::1"
// takes no port). Anything else, including "localhost.", "127.0.0.2", other
// spellings of ::1 and names that merely start with a loopback name, is false.
func IsLoopbackHost(host string) bool {
	return loopbackAuthority(host, true)
}

// IsLoopbackOrigin reports whether origin, an Origin header value, is "http://"
// or "https://" (scheme in any case) followed by a loopback host as accepted by
// IsLoopbackHost, except that IPv6 must be bracketed. "null", paths, trailing
// slashes, user info and other schemes are false.
func IsLoopbackOrigin(origin string) bool {
	var rest string
	switch {
	case hasPrefixFold(origin, "http://"):
		rest = origin[len("http://"):]
	case hasPrefixFold(origin, "https://"):
		rest = origin[len("https://"):]
	default:
		return false
	}
	return loopbackAuthority(rest, false)
}

// loopbackAuthority checks "name[:port]" against the loopback names.
func loopbackAuthority(s string, allowBareIPv6 bool) bool {
	if allowBareIPv6 && s == "::1" {
		return true
	}
	var name, port string
	hasPort := false
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return false
		}
		name, port = s[:end+1], s[end+1:]
		if port != "" {
			if port[0] != ':' {
				return false
			}
			port, hasPort = port[1:], true
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 {
		name, port, hasPort = s[:i], s[i+1:], true
	} else {
		name = s
	}
	if hasPort && !validPort(port) {
		return false
	}
	switch strings.ToLower(name) {
	case "localhost", "127.0.0.1", "[::1]":
		return true
	}
	return false
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
	}
	return true
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// forbiddenWriter pins the status of a rejection to 403.
type forbiddenWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *forbiddenWriter) WriteHeader(int) {
	if w.wrote {
		return
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(http.StatusForbidden)
}

func (w *forbiddenWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusForbidden)
	return w.ResponseWriter.Write(b)
}
