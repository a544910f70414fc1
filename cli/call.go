package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

// DefaultCallTimeout bounds one `ce call` request, from the dial to the
// last byte of the answer: every room operation answers well within it.
const DefaultCallTimeout = 30 * time.Second

// DefaultCallMaxResponse caps the answer `ce call` reads: far above any
// room answer (a read is at most 1 MiB), low enough that a wrong address
// cannot fill the caller's memory.
const DefaultCallMaxResponse = 16 << 20

// maxCallBody caps the request body `ce call` reads from --body or stdin;
// the room refuses far smaller bodies itself, this only bounds the reading.
const maxCallBody = 16 << 20

// maxCallPath bounds the request target, query string included.
const maxCallPath = 8192

// callMethods are the methods `ce call` sends; the room's routes use GET
// and POST, the others are accepted so the room gives its own answer.
var callMethods = map[string]bool{"GET": true, "POST": true, "PUT": true, "DELETE": true, "PATCH": true}

type callFlags struct {
	session, invite, state, url string
	body                        *string // nil: no --body
	timeout, transportTimeout   time.Duration
	maxResponse                 int64
	log                         logFlags // --log-level, --log-format
}

func callCommand(env Env) *ffcli.Command {
	var f callFlags
	fs := flag.NewFlagSet("ce call", flag.ContinueOnError)
	fs.StringVar(&f.session, "session", "", "the session token (env CE_SESSION); a bearer secret, never printed")
	fs.StringVar(&f.invite, "invite", "", "reach the room over this invitation's transport hints (it is not redeemed)")
	fs.StringVar(&f.state, "state", "", "a session state file (mode 0600) as `ce mcp` writes it: the token, and where the room is")
	fs.StringVar(&f.url, "url", "", "reach the room at this loopback URL (the Local: URL of `ce join --hold`, or a loopback ingress)")
	fs.Func("body", "the request body: a JSON object, or - to read it from stdin", func(s string) error {
		f.body = &s
		return nil
	})
	fs.DurationVar(&f.timeout, "timeout", DefaultCallTimeout, "how long the request may take, from the dial to the answer's last byte")
	fs.DurationVar(&f.transportTimeout, "transport-timeout", DefaultJoinTimeout, "how long each of the invitation's hints may take to open its transport")
	fs.Int64Var(&f.maxResponse, "max-response", DefaultCallMaxResponse, "the largest answer read, in bytes")
	f.log.add(fs, "warn")
	ts := addTransportFlags(env, fs)
	return &ffcli.Command{
		Name:       "call",
		ShortUsage: "ce call METHOD PATH [--body JSON|-] (--session TOKEN | --state FILE) [--invite URI | --url URL]",
		ShortHelp:  "send one request to a room with a session you already hold (never joins); prints {status, body}",
		LongHelp: "Where the room is: --url, else the hints of --invite (or an invitation given before METHOD),\n" +
			"else the state file's hints, then its url. The token: --session (or CE_SESSION), else the state file's.\n" +
			"Exit 0 on a 2xx answer, else the exit code of the error kind the room answered.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) == 3 { // the original form: ce call INVITE METHOD PATH
				if f.invite != "" {
					return usageError("an invitation before METHOD and --invite: give one")
				}
				f.invite, args = args[0], args[1:]
			}
			if len(args) != 2 {
				return usageError("call takes METHOD and PATH (e.g. ce call GET /workspace/status)")
			}
			log, err := f.log.logger(env.Stderr)
			if err != nil {
				return err
			}
			req, err := prepareCall(env, f, args[0], args[1])
			if err != nil {
				return err
			}
			return runCall(ctx, env, log, f, ts, req)
		},
	}
}

// usageError is bad input on the command line: exit 2, the message as is.
func usageError(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// callRequest is a checked `ce call`: what to send, with which token, and
// where the room is (exactly one of base and hints is set).
type callRequest struct {
	method, path string
	body         []byte // nil: no body
	token        string
	base         string      // a loopback http://host:port
	hints        []room.Hint // walked in order, as ce join does
	// workspaceID is the room the hints lead to (the invitation's or the
	// state file's), for the loopback machine rule.
	workspaceID string
	// key, from --invite, makes what each hint leads to prove it is the
	// room before the session is sent to it (challengeRoom).
	key *joinKey
}

// prepareCall checks everything that can be checked before any dial, so
// bad input never reaches the network.
func prepareCall(env Env, f callFlags, method, path string) (callRequest, error) {
	r := callRequest{method: strings.ToUpper(method), path: path}
	if !callMethods[r.method] {
		return r, usageError("method %q: use GET, POST, PUT, DELETE or PATCH", method)
	}
	if err := checkCallPath(path); err != nil {
		return r, err
	}
	if f.timeout <= 0 || f.transportTimeout <= 0 {
		return r, usageError("--timeout and --transport-timeout must be positive (got %s, %s)", f.timeout, f.transportTimeout)
	}
	if f.maxResponse <= 0 {
		return r, usageError("--max-response must be positive (got %d)", f.maxResponse)
	}
	if f.body != nil {
		if r.method == "GET" {
			return r, usageError("GET takes no body: put its arguments in PATH's query string (e.g. /workspace/handoff?handoff_id=ID)")
		}
		b, err := callBody(env, *f.body)
		if err != nil {
			return r, err
		}
		r.body = b
	}
	if f.url != "" && f.invite != "" {
		return r, usageError("--url and --invite both say where the room is: give one")
	}
	var st *sessionState
	if f.state != "" {
		s, err := readSessionState(f.state)
		if err != nil {
			return r, err
		}
		st = &s
	}
	r.token = f.session
	if r.token == "" && st != nil {
		r.token = st.SessionToken
	}
	if r.token == "" {
		return r, usageError("no session: give --session TOKEN (or CE_SESSION), or --state FILE; `ce join` gives a session, ce call never joins")
	}
	if !bearerSafe(r.token) {
		return r, usageError("the session token holds characters a bearer token cannot carry")
	}
	switch {
	case f.url != "":
		base, err := loopbackBase(f.url)
		if err != nil {
			return r, usageError("--url: %v", err)
		}
		r.base = base
	case f.invite != "":
		inv, err := room.DecodeInvitation(f.invite, room.Defaults().MaxInvitePayload)
		if err != nil {
			return r, err
		}
		if st != nil && st.WorkspaceID != "" && st.WorkspaceID != inv.WorkspaceID {
			return r, usageError("the state file is for room %s, the invitation for room %s: the session would be sent to a room it does not belong to", st.WorkspaceID, inv.WorkspaceID)
		}
		key, err := keyOf(inv)
		if err != nil {
			return r, usageError("the invitation names no invite_id (it was made by an older ce): ce call has the room prove itself " +
				"with it before the session is sent; give --url or --state instead, or a newer invitation")
		}
		r.key, r.workspaceID = &key, inv.WorkspaceID
		r.hints = inv.Transports
		if len(r.hints) == 0 && inv.Transport.Type != "" {
			r.hints = []room.Hint{inv.Transport}
		}
	case st != nil && len(st.hints()) > 0:
		r.hints, r.workspaceID = st.hints(), st.WorkspaceID
	case st != nil && st.URL != "":
		base, err := loopbackBase(st.URL)
		if err != nil {
			return r, usageError("the state file names no hints, and its url: %v", err)
		}
		r.base = base
	default:
		return r, usageError("where is the room? give --invite URI, --url URL (from ce join --hold) or --state FILE")
	}
	return r, nil
}

// checkCallPath accepts an origin-form request target: one leading '/', an
// optional query, no scheme, authority, fragment, backslash, blank or
// control character. "//host/x" and "http://…" would send the session to
// a host the path chose.
func checkCallPath(p string) error {
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return usageError("path %q must start with exactly one / (e.g. /workspace/status)", p)
	}
	if len(p) > maxCallPath {
		return usageError("the path is longer than %d bytes", maxCallPath)
	}
	for _, c := range []byte(p) {
		if c <= ' ' || c == 0x7f || c == '\\' || c == '#' {
			return usageError("path %q holds a blank, control character, backslash or #: percent-encode it", p)
		}
	}
	u, err := url.ParseRequestURI(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return usageError("path %q is not a request path", p)
	}
	return nil
}

// callBody is --body's JSON object, read from stdin for "-". Nothing else
// is a body the room's routes take, so anything else is refused here.
func callBody(env Env, arg string) ([]byte, error) {
	b := []byte(arg)
	from := "--body"
	if arg == "-" {
		from = "the body on stdin"
		var err error
		if b, err = io.ReadAll(io.LimitReader(env.Stdin, maxCallBody+1)); err != nil {
			return nil, usageError("reading the body from stdin: %v", err)
		}
	}
	if len(b) > maxCallBody {
		return nil, usageError("%s is larger than %d bytes", from, maxCallBody)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, usageError("%s is empty: give a JSON object, or leave --body out", from)
	}
	if !json.Valid(b) {
		return nil, usageError("%s is not valid JSON", from)
	}
	if b[0] != '{' {
		return nil, usageError("%s must be a JSON object ({…}), not %s", from, jsonKind(b[0]))
	}
	return b, nil
}

// jsonKind names the JSON value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// bearerSafe reports whether tok can travel as a bearer token: visible
// ASCII only (a newline would be a header injection, and Go's own refusal
// would not say why).
func bearerSafe(tok string) bool {
	for _, c := range []byte(tok) {
		if c <= ' ' || c >= 0x7f {
			return false
		}
	}
	return true
}

// loopbackBase checks a room URL given directly and returns it as
// http://host:port. Only loopback is accepted: the session would otherwise
// cross a network in clear text, and a room elsewhere is reached over its
// invitation's hints, through the transport.
func loopbackBase(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("%q is not a room URL of the form http://127.0.0.1:PORT", raw)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		return "", fmt.Errorf("%q names no port", raw)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("%q is not a loopback address: reach a room elsewhere with --invite (its transport hints)", host)
	}
	return "http://" + u.Host, nil
}

// readSessionState reads --state (see readStateFile).
func readSessionState(path string) (sessionState, error) {
	s, err := readStateFile(path)
	if err != nil {
		return s, usageError("--state: %v", err)
	}
	return s, nil
}

// settled is an error of a request that reached the room: walkHints must
// not try the next hint with it (the room may have acted on it), even when
// its kind is transport_unavailable.
type settled struct{ err error }

func (s settled) Error() string { return s.err.Error() }

// callAnswer is what the room answered.
type callAnswer struct {
	status int
	body   []byte
}

// runCall sends the request over the way in the request names, prints the
// answer as one JSON line, and turns a non-2xx answer into the exit code of
// its error kind.
func runCall(ctx context.Context, env Env, log *slog.Logger, f callFlags, ts *transports, r callRequest) error {
	var ans callAnswer
	var err error
	if r.base != "" {
		var d net.Dialer
		ans, err = sendCall(ctx, r, r.base, d.DialContext, f)
		var s settled
		if errors.As(err, &s) {
			err = s.err
		}
	} else {
		var w wayIn
		var tried []string
		w, tried, err = walkHints(ctx, env, log, ts, r.workspaceID, r.hints, f.transportTimeout, func(w wayIn) error {
			dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return w.plug.Dial(ctx, w.th) }
			if r.key != nil {
				if err := proveCallRoom(ctx, w.url(), dial, *r.key, f.timeout); err != nil {
					return err
				}
			}
			var err error
			ans, err = sendCall(ctx, r, w.url(), dial, f)
			return err
		})
		var s settled
		if errors.As(err, &s) {
			err = s.err
		}
		if err == nil && w.plug == nil {
			err = room.Errorf(room.KindTransportUnavailable, "none of the room's transport hints reached it; tried: %s", strings.Join(tried, "; ")).
				With("tried", tried)
		}
		if w.plug != nil {
			log.Debug("ce call went through", "transport", w.hint.Type)
			w.plug.Close()
		}
	}
	if err != nil {
		return err
	}
	out := struct {
		Status int `json:"status"`
		Body   any `json:"body"`
	}{Status: ans.status, Body: string(ans.body)}
	if t := bytes.TrimSpace(ans.body); len(t) > 0 && json.Valid(t) {
		out.Body = json.RawMessage(t)
	}
	enc := json.NewEncoder(env.Stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return err
	}
	if ans.status/100 == 2 {
		return nil
	}
	return remoteError(ans.status, ans.body)
}

// sendCall sends the request to base through dial, bounded by --timeout.
// A failure before any connection was made is transport_unavailable (the
// walk may try the next hint: nothing was sent); any later failure is
// settled, because the room may have acted on the request.
func sendCall(ctx context.Context, r callRequest, base string, dial func(context.Context, string, string) (net.Conn, error), f callFlags) (callAnswer, error) {
	var dialErr atomic.Pointer[error]
	var connected atomic.Bool
	hc := &http.Client{
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					dialErr.Store(&err)
					return nil, err
				}
				connected.Store(true)
				return c, nil
			},
			DisableKeepAlives:  true,
			DisableCompression: true,
		},
		// A redirect is printed, never followed: it would carry the
		// session to wherever the answer pointed.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	ctx, cancel := context.WithTimeoutCause(ctx, f.timeout, fmt.Errorf("no answer within --timeout (%s)", f.timeout))
	defer cancel()
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.path, body)
	if err != nil {
		return callAnswer{}, settled{usageError("path %q: %v", r.path, err)}
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("Accept", "application/json")
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		if !connected.Load() {
			why := err
			if de := dialErr.Load(); de != nil {
				why = *de
			} else if c := context.Cause(ctx); c != nil {
				why = c
			}
			return callAnswer{}, room.Errorf(room.KindTransportUnavailable, "cannot reach the room: %s",
				transport.Redact(strings.TrimPrefix(why.Error(), transport.ErrUnavailable.Error()+": ")))
		}
		return callAnswer{}, settled{room.Errorf(room.KindTransportUnavailable,
			"the room was reached but did not answer: %s; the request may have been applied", callCause(ctx, err))}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, f.maxResponse+1))
	if err != nil {
		return callAnswer{}, settled{room.Errorf(room.KindTransportUnavailable,
			"reading the room's answer (HTTP %d): %s", resp.StatusCode, callCause(ctx, err))}
	}
	if int64(len(b)) > f.maxResponse {
		return callAnswer{}, settled{room.Errorf(room.KindLimitExceeded,
			"the room's answer (HTTP %d) is larger than --max-response (%d bytes); nothing was printed", resp.StatusCode, f.maxResponse)}
	}
	return callAnswer{status: resp.StatusCode, body: b}, nil
}

// callCause is why a request failed: the timeout when it was the timeout.
func callCause(ctx context.Context, err error) string {
	if c := context.Cause(ctx); c != nil {
		return c.Error()
	}
	return err.Error()
}

// proveCallRoom has what base leads to prove it is the invitation's room
// (the proven join's first step, which spends nothing) before `ce call`
// sends it the session. A proof that fails, or a dial that does, is
// transport_unavailable: the walk tries the next hint, nothing was sent.
func proveCallRoom(ctx context.Context, base string, dial func(context.Context, string, string) (net.Conn, error), key joinKey, timeout time.Duration) error {
	hc, dialFailure := dialClient(dial, timeout)
	_, err := challengeRoom(ctx, hc, base, key)
	if de := dialFailure(); de != nil && room.ErrorKind(err) == room.KindTransportUnavailable {
		return room.Errorf(room.KindTransportUnavailable, "cannot reach the room: %s",
			transport.Redact(strings.TrimPrefix(de.Error(), transport.ErrUnavailable.Error()+": ")))
	}
	return err
}
