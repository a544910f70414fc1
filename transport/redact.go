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

// Redact strips from one line of a plugin's output (or an error that may
// quote one) whatever looks like a secret, so the line can be logged: the
// value after a secret's name (password=…, "token": "…", {'pw': '…'},
// api_key: …, Authorization: Token …), a password written in prose after
// its word (password hunter2, passphrase …), curl's -u user:password,
// credentials in a URL, invitations, well-known key prefixes and long
// key-like runs. The line is also cut to MaxLogLine bytes and its control
// characters replaced.
//
// It errs on the side of hiding, and its misses are known (the tests pin
// both lists, transport/redact_test.go):
//
//   - A name is a secret's when, ignoring case and the separators _ - .,
//     it contains token, secret, password, passwd, passphrase, apikey,
//     authkey, privatekey, accesskey, credential, signature, session,
//     cookie or authorization, or its last part is key, pass, pw, pwd,
//     pin, auth, sig, jwt or otp (db_pass, apiKey, X-Api-Key; not
//     keyboard, passed, bypass, key_id, pass_count). After such a name
//     and ':', '=', ':=' or '=>' the value is always hidden: a quoted
//     one to its closing quote, an unquoted one to the next space, ',',
//     ';', '&' or '"'. So tokens_used=42, PWD=/home/me and
//     public_key=ssh-ed25519 are hidden too (false positives accepted).
//   - In prose, only password, passwd, passphrase, secret, token and the
//     schemes bearer and basic hide the word after them — unless that word
//     is one of a fixed list of ordinary ones (plainWords: "token
//     bucket", "password policy updated", "token expired", "basic auth"
//     keep their meaning). A secret that is itself such a word, or that
//     comes after one ("password is hunter2"), stays in clear.
//   - An unquoted value ends at a space (a passphrase's runs to the end of
//     the line: it is words), so the later words of another unquoted
//     multi-word secret stay in clear; a value under a secret's name that
//     is a nested object or list is not followed.
func Redact(line string) string {
	if len(line) > MaxLogLine {
		line = line[:MaxLogLine] + "…"
	}
	line = redactCurlUser(printable(line))
	line = redactPairs(line)
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

// printable replaces the control characters of a line (all but tab) with
// '?', so a logged line cannot forge another line or move the terminal.
func printable(line string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' || r == 0x7f {
			return '?'
		}
		return r
	}, line)
}

var redactions = []struct {
	re   *regexp.Regexp
	repl string
}{
	// Invitations are bearer secrets whatever they are wrapped in.
	{regexp.MustCompile(`commonroom://join/[A-Za-z0-9_\-=]*`), "commonroom://join/" + Redacted},
	// Credentials inside a URL: scheme://user:password@host.
	{regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@]+@`), "${1}" + Redacted + "@"},
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

// secretWords name a secret anywhere in a name (compared without case and
// without _ - .).
var secretWords = []string{"token", "secret", "password", "passwd", "passphrase", "apikey", "authkey",
	"privatekey", "accesskey", "credential", "signature", "session", "cookie", "authorization"}

// secretParts name a secret as the last part of a name: short words that
// inside another word mean something else (keyboard, bypass, spin).
var secretParts = []string{"key", "pass", "pw", "pwd", "pin", "auth", "sig", "jwt", "otp"}

// proseKeys hide the word written after them (and a space): the words
// people put before a password in a sentence, and the Authorization
// schemes (Authorization: Bearer …, Basic …, Token …).
var proseKeys = []string{"password", "passwd", "passphrase", "secret", "token", "bearer", "basic"}

// plainWords follow a prose key in ordinary log lines and are kept there
// ("token bucket", "password policy updated"): the price is that a secret
// that is one of them is not hidden after a prose key (after ':' or '='
// everything is).
var plainWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		a an the this that these those it its is are was were be been being has have had
		do does did will would can cannot could should may might must shall not no nor
		and or but if then else for of to in on at by with without from into onto over
		under via per as than about after before when while until since so too also
		ok okay yes true false none null nil empty unset set missing required optional
		valid invalid expired expires expiry expiring expire revoked rotated rotation
		refresh refreshed refreshing renew renewed issued created deleted removed saved
		stored loaded found accepted rejected denied refused failed failure error errors
		changed change reset updated update mismatch incorrect wrong matched match
		policy policies manager store storage cache bucket buckets file files field
		prompt prompted hash hashed strength length len size count limit type format
		auth authentication authorization authenticated login logout based protected
		request requested response endpoint exchange provider used usage budget
		complexity check checked verification verified enabled disabled configured
		provided given supplied specified here there now again yet still only
		mode setup config info example`) {
		m[w] = true
	}
	return m
}()

// isSecretName says whether name (an identifier, case ignored) names a
// secret: see secretWords and secretParts.
func isSecretName(name string) bool {
	if len(name) < 2 {
		return false // the shortest is pw
	}
	flat := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '_' || c == '-' || c == '.':
		case isUpper(c):
			flat = append(flat, c+'a'-'A')
		default:
			flat = append(flat, c)
		}
	}
	for _, w := range secretWords {
		if strings.Contains(string(flat), w) {
			return true
		}
	}
	last := strings.ToLower(lastPart(name))
	for _, p := range secretParts {
		if last == p {
			return true
		}
	}
	return false
}

// lastPart is the last part of a name split at _ - . and at a change
// from a lower-case letter or digit to an upper-case one (apiKey → Key).
func lastPart(name string) string {
	start := 0
	for i := 1; i < len(name); i++ {
		c, prev := name[i], name[i-1]
		switch {
		case c == '_' || c == '-' || c == '.':
			start = i + 1
		case isUpper(c) && (isLower(prev) || isDigit(prev)):
			start = i
		}
	}
	return name[start:]
}

func isProseKey(name string) bool {
	l := strings.ToLower(name)
	for _, k := range proseKeys {
		if l == k {
			return true
		}
	}
	return false
}

func isUpper(c byte) bool { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool { return c >= 'a' && c <= 'z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isNameByte is a byte of a name: letters, digits, _ - .
func isNameByte(c byte) bool {
	return isUpper(c) || isLower(c) || isDigit(c) || c == '_' || c == '-' || c == '.'
}

func isQuote(c byte) bool { return c == '"' || c == '\'' }

// endsUnquoted says where an unquoted value stops.
func endsUnquoted(c byte) bool {
	return c == ' ' || c == '\t' || c == ',' || c == ';' || c == '&' || c == '"'
}

// redactPairs hides the value after each secret's name followed by a
// separator, and the word after each prose key (see Redact).
func redactPairs(s string) string {
	var b strings.Builder
	last := 0 // s[:last] is in b
	hide := func(from, to int) {
		b.WriteString(s[last:from])
		b.WriteString(Redacted)
		last = to
	}
	for i := 0; i < len(s); {
		if !isNameByte(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isNameByte(s[j]) {
			j++
		}
		name := strings.Trim(s[i:j], "-.")
		if name == "" {
			i = j
			continue
		}
		k := j
		if k < len(s) && isQuote(s[k]) { // the closing quote of a quoted name
			k++
		}
		if vs, ok := afterSeparator(s, k); ok && isSecretName(name) {
			from, to, next := valueAt(s, vs, isPassphrase(name))
			switch {
			case to == from: // no value
			case strings.HasPrefix(s[from:], Redacted):
			case isProseKey(s[from:to]) && to < len(s) && (s[to] == ' ' || s[to] == '\t'):
				// Authorization: Bearer …: keep the scheme, hide what follows it.
				i = from
				continue
			default:
				hide(from, to)
			}
			i = next
			continue
		}
		if isProseKey(name) && j < len(s) && (s[j] == ' ' || s[j] == '\t') {
			vs := j
			for vs < len(s) && (s[vs] == ' ' || s[vs] == '\t') {
				vs++
			}
			from, to, next := valueAt(s, vs, false)
			word := strings.ToLower(strings.TrimRight(s[from:to], ".,:;!?)]}"))
			switch {
			case to == from, strings.HasPrefix(s[from:], Redacted):
				i = next
			case plainWords[word] || word == "" || isProseKey(word):
				i = from // an ordinary word: look at it as a name in turn
			case isPassphrase(name) && to == next:
				hide(from, len(s)) // a passphrase is words: all of them
				i = len(s)
			default:
				hide(from, to)
				i = next
			}
			continue
		}
		i = j
	}
	b.WriteString(s[last:])
	return b.String()
}

// afterSeparator returns where a value starts when s[k:] is a separator
// (spaces, then ':', '=', ':=' or '=>', then spaces). A value that itself
// starts with ':' or '=' is hidden with it (token == nil hides "= nil").
func afterSeparator(s string, k int) (int, bool) {
	for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
		k++
	}
	if k >= len(s) {
		return 0, false
	}
	switch {
	case strings.HasPrefix(s[k:], ":="), strings.HasPrefix(s[k:], "=>"):
		k += 2
	case s[k] == ':' || s[k] == '=':
		k++
	default:
		return 0, false
	}
	for k < len(s) && (s[k] == ' ' || s[k] == '\t') {
		k++
	}
	return k, true
}

// isPassphrase says whether name names a passphrase: its value is words,
// so an unquoted one runs to the end of the line.
func isPassphrase(name string) bool { return strings.Contains(strings.ToLower(name), "passphrase") }

// valueAt finds the value starting at v: from and to bound what to hide,
// next is where scanning goes on. A quoted value (also Python's b'…') is
// hidden inside its quotes, backslash escapes honoured, to the end of the
// line when it never closes; an unquoted one runs to endsUnquoted, or to
// the end of the line when toEnd.
func valueAt(s string, v int, toEnd bool) (from, to, next int) {
	if v < len(s)-1 && s[v] == 'b' && isQuote(s[v+1]) {
		v++
	}
	if v < len(s) && isQuote(s[v]) {
		q := s[v]
		for i := v + 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case q:
				return v + 1, i, i + 1
			}
		}
		return v + 1, len(s), len(s)
	}
	if toEnd {
		return v, len(s), len(s)
	}
	e := v
	for e < len(s) && !endsUnquoted(s[e]) {
		e++
	}
	return v, e, e
}

// curlUser finds curl's -u/--user (and -U/--proxy-user) and its argument.
var curlUser = regexp.MustCompile(`(?:^|\s)(?:--user|--proxy-user|-u|-U)(?:=|\s+)?("[^"]*"?|'[^']*'?|[^\s"']+)`)

// redactCurlUser hides the password of curl -u user:password (the part
// after the first ':'); a user name alone is kept.
func redactCurlUser(s string) string {
	ms := curlUser.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		from, to := m[2], m[3]
		arg := s[from:to]
		if isQuote(arg[0]) {
			from++
			if to > from && s[to-1] == arg[0] {
				to--
			}
		}
		c := strings.IndexByte(s[from:to], ':')
		if c < 0 || from+c+1 == to {
			continue
		}
		b.WriteString(s[last : from+c+1])
		b.WriteString(Redacted)
		last = to
	}
	b.WriteString(s[last:])
	return b.String()
}
