package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/httpapi"
	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/transport"
)

type serveFlags struct {
	addr        string
	ingressAddr string
	name        string
	json        bool
	ephemeral   bool
	log         logFlags // --log-level, --log-format
	queueLen    int
	maxLag      time.Duration
	streams     int
	rateLimit   int
	maxSessions int
	maxBatch    int

	maxTasksPerParticipant         int
	maxPerInvite                   int // live sessions one invitation's joiners may hold
	pendingProposals               int
	pendingProposalsPerParticipant int
	maxConns                       int
	ownerMaxConns                  int
	maxConnsPerPeer                int
	writeTimeout                   time.Duration
	bodyTimeout                    time.Duration
	taskTTL                        time.Duration
	sessionIdle                    time.Duration // a session's default idle window (room.Limits.SessionDefault)
	sessionMaxLifetime             time.Duration // the hard end of a session, however much it is used
	walCkpt                        int

	metricsAddr string // --metrics-addr: the credential-less metrics listener ("" none)

	transport        string        // --transport NAME: how other machines reach the room
	transportTimeout time.Duration // how long the transport may take to be up

	retain retainFlags // retention, archive and the storage share (serve_retain.go)
}

func serveCommand(env Env) *ffcli.Command {
	fs, f, ts := newServeFlagSet(env)
	return &ffcli.Command{
		Name:       "serve",
		ShortUsage: "ce serve FILE [--addr 127.0.0.1:0] [--ingress-addr 127.0.0.1:0] [--transport NAME] [--json] [--ephemeral]",
		ShortHelp:  "open a room around a Markdown file and serve it until interrupted",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: errors.New("serve takes exactly one FILE")}
			}
			return runServe(ctx, env, *f, args[0], ts)
		},
	}
}

// defaultWALAutocheckpoint is how many WAL pages ce lets wait before its
// checkpointer copies them into the sidecar's database file (16 MiB at
// SQLite's 4 KiB pages). SQLite's own default is 1,000. A room rewrites
// the same few pages (the newest rows, the live indexes, the event ring's
// tail) in every batch, and a checkpoint copies each page once however
// often it was rewritten, so a longer interval copies fewer pages per
// command: under the bench's lifecycle load the checkpointer's share of
// the process fell from 5.3% to 3.1% (about a tenth of the writer's CPU to
// about a twentieth). The cost is a WAL file of up to ~16 MiB beside the
// sidecar and a longer recovery scan after a crash, both small.
const defaultWALAutocheckpoint = 4000

// newServeFlagSet is ce serve's flags with their defaults, the transports'
// own among them (the tests open a serveApp from it, too).
func newServeFlagSet(env Env) (*flag.FlagSet, *serveFlags, *transports) {
	f := new(serveFlags)
	fs := flag.NewFlagSet("ce serve", flag.ContinueOnError)
	addRetainFlags(fs, &f.retain)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:0", "owner listener (loopback only): the page and the local operator")
	fs.StringVar(&f.ingressAddr, "ingress-addr", "127.0.0.1:0", "session-only ingress listener (loopback only): what invitations point at")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "also serve GET /metrics, /healthz and /readyz with no credential here, for a Prometheus scraper: loopback or a transport's private address only (default: none; /metrics on the owner listener needs the operator token)")
	fs.StringVar(&f.name, "name", "", "the host's display name (default $USER)")
	fs.BoolVar(&f.json, "json", false, "print one JSON line when ready instead of the banner")
	fs.BoolVar(&f.ephemeral, "ephemeral", false, "keep the sidecar in a temporary directory and delete it on exit")
	f.log.add(fs, "info")
	fs.IntVar(&f.queueLen, "listen-queue", 256, "frames buffered per live subscriber before it is dropped")
	fs.DurationVar(&f.maxLag, "listen-max-lag", 10*time.Second, "drop a live subscriber whose oldest unsent frame is older than this")
	fs.IntVar(&f.streams, "streams-per-session", 4, "live streams one session may hold at once")
	fs.IntVar(&f.rateLimit, "rate-limit", 600, "requests per minute per session (0 = no limit)")
	fs.IntVar(&f.maxSessions, "max-sessions", 32, "live sessions the room admits")
	fs.IntVar(&f.maxBatch, "max-batch", 64, "commands per write transaction (1 turns group commit off)")
	fs.IntVar(&f.maxTasksPerParticipant, "max-tasks-per-participant", room.Defaults().MaxTasksPerParticipant,
		fmt.Sprintf("active tasks one participant's handoffs may hold, 1..%d (the room's cap); the host has no share", room.Defaults().MaxActiveTasks))
	fs.IntVar(&f.maxPerInvite, "max-sessions-per-invite", room.Defaults().MaxSessionsPerInvite, "live sessions one invitation's joiners may hold at once (an invitation may set its own)")
	fs.IntVar(&f.pendingProposals, "pending-proposals", room.Defaults().MaxPendingProposals, "pending proposals the whole room may hold")
	fs.IntVar(&f.pendingProposalsPerParticipant, "pending-proposals-per-participant", room.Defaults().MaxPendingProposalsPerParticipant, "pending proposals one participant may hold")
	fs.IntVar(&f.maxConns, "max-conns", httpapi.DefaultMaxConns, "connections the ingress listener holds at once; beyond, 503 at once (lowered to fit the open-file limit)")
	fs.IntVar(&f.ownerMaxConns, "owner-max-conns", httpapi.DefaultOwnerMaxConns, "connections the owner listener holds at once")
	fs.IntVar(&f.maxConnsPerPeer, "max-conns-per-peer", 0, "ingress connections one peer (a transport's node, a remote address) may hold at once; 0: an eighth of --max-conns (loopback clients share the rest and are not capped by it)")
	fs.DurationVar(&f.writeTimeout, "write-timeout", httpapi.DefaultWriteTimeout, "drop a response (other than a live stream) not written within this")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", httpapi.DefaultBodyReadTimeout, "drop a request whose body has not arrived within this")
	fs.IntVar(&f.walCkpt, "wal-autocheckpoint", defaultWALAutocheckpoint, "checkpoint the sidecar's WAL after this many pages; 0 leaves checkpoints to Litestream, which must then be replicating")
	fs.DurationVar(&f.taskTTL, "task-ttl", room.Defaults().TaskTTL, "a task's time to live, 1s to 24h (shorter only for soak and expiry tests)")
	fs.DurationVar(&f.sessionIdle, "session-idle", room.Defaults().SessionDefault, "a session ends this long after its last use unless its joiner asked for less (1m to 24h)")
	fs.DurationVar(&f.sessionMaxLifetime, "session-max-lifetime", room.Defaults().SessionMaxLifetime, "a session ends this long after it was issued, however much it is used (at least --session-idle)")
	ts := addTransportFlags(env, fs)
	fs.StringVar(&f.transport, "transport", transport.LoopbackName, "how other machines reach the room's ingress: "+strings.Join(ts.reg.Names(), ", "))
	fs.DurationVar(&f.transportTimeout, "transport-timeout", DefaultTransportTimeout, "how long the transport may take to be up (a login included) before serve gives up")
	return fs, f, ts
}

// checkLoopback refuses a bind address another machine could reach: remote
// participants come in through a transport plugin, never a public socket.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return room.Errorf(room.KindInvalidRequest, "bad address %q: %v", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return room.Errorf(room.KindInvalidRequest,
		"ce serves on loopback only (got %q); to let another machine in, expose the ingress listener with a transport plugin", addr)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

// runServe checks the flags, opens the room as a serveApp, says it is ready
// and serves until a signal, the context's end or a failed listener; then
// it closes the app. A second signal forces the exit.
func runServe(ctx context.Context, env Env, f serveFlags, file string, ts *transports) error {
	prov, log, err := checkServeFlags(env, f, ts)
	if err != nil {
		return err
	}
	app := &serveApp{env: env, f: f, file: file, prov: prov, log: log}
	if err := app.Open(ctx); err != nil {
		return err
	}
	l := app.local
	ingressURL := app.ingressURL()
	pageURL := app.ownerURL() + "/?key=" + app.api.NewPageKey()
	if f.json {
		ready := map[string]any{
			"workspace_id": l.eng.WorkspaceID, "name": l.eng.Name, "version": version(),
			"owner_url": pageURL, "ingress_url": ingressURL, "mcp_url": ingressURL + "/mcp",
			"invite": app.inv.URI, "invite_expires_at": app.inv.ExpiresAt, "pid": os.Getpid(), "transport": showHint(app.hints[0]),
		}
		if u := app.metricsURL(); u != "" {
			ready["metrics_url"] = u + "/metrics"
		}
		line, _ := json.Marshal(ready)
		fmt.Fprintln(env.Stdout, string(line))
	} else {
		printBanner(env, l, pageURL, ingressURL, app.metricsURL(), app.hints[0], app.inv, app.notes)
	}
	log.Info("serving", "workspace_id", l.eng.WorkspaceID, "pid", os.Getpid())

	select {
	case <-ctx.Done():
	case <-env.Signals:
	case <-app.Done():
	}
	// A second signal forces the exit; the first one is a graceful stop.
	go func() {
		<-env.Signals
		fmt.Fprintln(env.Stderr, "ce: second interrupt, exiting now")
		env.Exit(1)
	}()
	log.Info("stopping")
	return app.Close()
}

// checkServeFlags refuses flags that could not work before anything is
// opened, and returns the --transport provider and the logger.
func checkServeFlags(env Env, f serveFlags, ts *transports) (transport.Provider, *slog.Logger, error) {
	usage := func(format string, a ...any) (transport.Provider, *slog.Logger, error) {
		return nil, nil, &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
	}
	if err := checkLoopback(f.addr); err != nil {
		return nil, nil, err
	}
	prov, err := ts.provider(f.transport)
	if err != nil {
		return usage("--transport: %v", err)
	}
	if f.transportTimeout <= 0 {
		return usage("--transport-timeout must be positive (got %s)", f.transportTimeout)
	}
	if err := checkLoopback(f.ingressAddr); err != nil {
		return nil, nil, err
	}
	if err := checkMetricsAddr(f.metricsAddr); err != nil {
		return usage("%v", err)
	}
	if err := checkConnFlags(f); err != nil {
		return nil, nil, err
	}
	log, err := f.log.logger(env.Stderr)
	if err != nil {
		return nil, nil, err
	}
	share := room.Defaults()
	share.MaxTasksPerParticipant = f.maxTasksPerParticipant
	if err := share.ValidateTaskShare(); err != nil {
		return usage("--max-tasks-per-participant: %s", room.AsError(err).Message)
	}
	if f.walCkpt < 0 {
		return usage("--wal-autocheckpoint is a number of pages, 0 or more (got %d)", f.walCkpt)
	}
	if f.taskTTL < time.Second || f.taskTTL > room.Defaults().TaskTTL {
		return usage("--task-ttl must be between 1s and 24h (got %s)", f.taskTTL)
	}
	if f.queueLen < 1 || f.streams < 1 || f.rateLimit < 0 || f.maxSessions < 1 || f.maxBatch < 1 || f.maxLag <= 0 {
		return usage("--listen-queue, --streams-per-session, --max-sessions and --max-batch must be at least 1, --listen-max-lag positive, --rate-limit 0 or more")
	}
	if f.maxPerInvite < 1 {
		return usage("--max-sessions-per-invite must be at least 1")
	}
	if f.pendingProposals < 1 || f.pendingProposalsPerParticipant < 1 {
		return usage("--pending-proposals and --pending-proposals-per-participant must be at least 1")
	}
	if f.sessionIdle < time.Minute || f.sessionIdle > room.Defaults().SessionMax {
		return usage("--session-idle must be between 1m and %s (got %s)", room.Defaults().SessionMax, f.sessionIdle)
	}
	if err := f.retain.check(); err != nil {
		return usage("%v", err)
	}
	if f.sessionMaxLifetime < f.sessionIdle {
		return usage("--session-max-lifetime must be at least --session-idle (got %s < %s)", f.sessionMaxLifetime, f.sessionIdle)
	}
	return prov, log, nil
}

// limits are the room's limits with the flags' values in them.
func (f serveFlags) limits() room.Limits {
	limits := room.Defaults()
	limits.MaxTasksPerParticipant = f.maxTasksPerParticipant
	limits.RateLimitPerMinute = f.rateLimit
	limits.MaxLiveSessions = f.maxSessions
	limits.MaxSessionsPerInvite = f.maxPerInvite
	limits.MaxPendingProposals = f.pendingProposals
	limits.MaxPendingProposalsPerParticipant = f.pendingProposalsPerParticipant
	limits.TaskTTL = f.taskTTL
	limits.SessionDefault = f.sessionIdle
	limits.SessionMaxLifetime = f.sessionMaxLifetime
	limits.MaxStoredBytesPerDay, _ = f.retain.storageShare() // checked by checkServeFlags
	return limits
}

// raiseFileLimit lifts the soft open-file limit to the hard one: every live
// stream is a socket, and the default soft limit (often 1,024) would refuse
// connections long before memory runs out. It returns the limit in effect
// (0 when unknown), which the connection caps must fit under.
func raiseFileLimit(log *slog.Logger) uint64 {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	if rl.Cur >= rl.Max {
		return rl.Cur
	}
	cur := rl.Cur
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		log.Warn("cannot raise the open-file limit", "err", err)
		return cur
	}
	return rl.Cur
}

// shutdown stops accepting, ends live streams gracefully (each gets its
// final result), then waits for in-flight requests.
func shutdown(servers []*http.Server, hub *listen.Hub, log *slog.Logger) {
	for _, s := range servers {
		s.SetKeepAlivesEnabled(false)
	}
	hub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(ctx); err != nil {
			log.Warn("forcing connections closed", "err", err)
			s.Close()
		}
	}
}

func printBanner(env Env, l *localRoom, pageURL, ingressURL, metricsURL string, exposed room.Hint, inv room.InviteGrant, notes []string) {
	w := env.Stdout
	fmt.Fprintf(w, "Commonroom %s\n", version())
	fmt.Fprintf(w, "Room:        %s (%s)\n", l.eng.Name, l.eng.WorkspaceID)
	fmt.Fprintf(w, "File:        %s\n", l.eng.DocPath)
	for _, n := range notes {
		fmt.Fprintf(w, "Warning:     %s\n", indentNote(n))
	}
	fmt.Fprintf(w, "Owner page:  %s\n", pageURL)
	fmt.Fprintf(w, "Agents:      %s/mcp (MCP 2026-07-28, bearer session)\n", ingressURL)
	fmt.Fprintf(w, "Transport:   %s\n", showHint(exposed))
	if metricsURL != "" {
		fmt.Fprintf(w, "Metrics:     %s/metrics (Prometheus, no credential; /readyz beside it)\n", metricsURL)
	}
	fmt.Fprintf(w, "Invitation (one use, lasts %s: expires %s):\n  %s\n", inviteLifetime(l.eng.Now(), inv.ExpiresAt), inv.ExpiresAt, inv.URI)
	fmt.Fprintf(w, "Join from another terminal:\n  ce join '%s' --name agent\n", inv.URI)
	fmt.Fprintf(w, "More invitations (longer, more uses):\n  ce invite --workspace %s --expires MINUTES --max-uses N\n", shellQuote(l.eng.DocPath))
	fmt.Fprintf(w, "Status: READY. Press Ctrl-C to stop.\n")
}

// inviteLifetime says how long an invitation lasts from now, rounded to the
// minute, so the banner need not be read against a clock.
func inviteLifetime(now time.Time, expiresAt string) string {
	t, err := time.Parse(time.RFC3339Nano, expiresAt)
	if err != nil {
		return "until " + expiresAt
	}
	d := t.Sub(now).Round(time.Minute)
	switch {
	case d < time.Minute:
		return "under a minute"
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d < time.Hour:
		return fmt.Sprintf("%d min", d/time.Minute)
	default:
		return fmt.Sprintf("%d h %d min", d/time.Hour, (d%time.Hour)/time.Minute)
	}
}

// shellQuote quotes p for a POSIX shell when it holds anything but the
// characters a path usually has.
func shellQuote(p string) string {
	for _, c := range p {
		if !(c == '/' || c == '.' || c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'"
		}
	}
	return p
}
