package transport

import (
	"regexp"
	"strings"
)

// Redacted replaces what Redact strips.
const Redacted = "[REDACTED]"

// MaxLogLine bounds one line of a plugin's output as it is logged; the
// rest is cut, so a child cannot fill the log with one line.
const MaxLogLine = 2048

var redactions = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Invitations are bearer secrets whatever they are wrapped in.
	{regexp.MustCompile(`commonroom://join/[A-Za-z0-9_\-=]*`), "commonroom://join/" + Redacted},
	// Credentials inside a URL: scheme://user:password@host.
	{regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@`), "${1}" + Redacted + "@"},
	// Authorization: Bearer xyz, Basic xyz.
	{regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9_\-.~+/=]+`), "${1} " + Redacted},
	// name=value and name: value where the name says secret, in a query
	// string, a header, an environment or a log line.
	{regexp.MustCompile(`(?i)([A-Za-z0-9_\-]*(?:token|secret|passw(?:or)?d|passwd|api[_\-]?key|auth[_\-]?key|authkey|private[_\-]?key|credential|signature|session|cookie)[A-Za-z0-9_\-]*"?\s*[:=]\s*"?)[^\s"&,;]+`), "${1}" + Redacted},
	// Well-known key prefixes: tskey-…, ghp_…, sk-…, xox?-…, AKIA…, and
	// ce's own ses_/op_ tokens.
	{regexp.MustCompile(`\b(?:tskey|ghp|gho|ghs|ghu|github_pat|glpat|sk|rk|pk|xox[abpors]|ses|op|inv|tc)[_\-][A-Za-z0-9_\-]{8,}`), Redacted},
	{regexp.MustCompile(`\bAKIA[0-9A-Z]{12,}\b`), Redacted},
	// PEM blocks' first line (the body is base64 and caught below).
	{regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`), Redacted},
}

// longToken finds runs that look like keys: 24 or more characters of a
// base64/hex alphabet with at least one digit and one letter.
var longToken = regexp.MustCompile(`[A-Za-z0-9_\-+/=]{24,}`)

// Redact strips from one line of a plugin's output whatever looks like a
// secret (tokens, keys, passwords, URLs with credentials, invitations), so
// the line can be logged. It errs on the side of hiding: a long identifier
// that merely looks like a key is hidden too. The line is also cut to
// MaxLogLine bytes and its control characters replaced.
func Redact(line string) string {
	if len(line) > MaxLogLine {
		line = line[:MaxLogLine] + "…"
	}
	line = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return '?'
		}
		return r
	}, line)
	for _, r := range redactions {
		line = r.re.ReplaceAllString(line, r.repl)
	}
	return longToken.ReplaceAllStringFunc(line, func(s string) string {
		if strings.HasPrefix(s, "/") || !strings.ContainsAny(s, "0123456789") ||
			!strings.ContainsAny(strings.ToLower(s), "abcdefghijklmnopqrstuvwxyz") {
			return s
		}
		return Redacted
	})
}
