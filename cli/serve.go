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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/actor"
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
	logLevel    string
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
	writeTimeout                   time.Duration
	bodyTimeout                    time.Duration
	taskTTL                        time.Duration
	walCkpt                        int

	transport        string        // --transport NAME: how other machines reach the room
	transportTimeout time.Duration // how long the transport may take to be up
}

func serveCommand(env Env) *ffcli.Command {
	var f serveFlags
	fs := flag.NewFlagSet("ce serve", flag.ContinueOnError)
	fs.StringVar(&f.addr, "addr", "127.0.0.1:0", "owner listener (loopback only): the page and the local operator")
	fs.StringVar(&f.ingressAddr, "ingress-addr", "127.0.0.1:0", "session-only ingress listener (loopback only): what invitations point at")
	fs.StringVar(&f.name, "name", "", "the host's display name (default $USER)")
	fs.BoolVar(&f.json, "json", false, "print one JSON line when ready instead of the banner")
	fs.BoolVar(&f.ephemeral, "ephemeral", false, "keep the sidecar in a temporary directory and delete it on exit")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error (logs go to stderr)")
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
	fs.DurationVar(&f.writeTimeout, "write-timeout", httpapi.DefaultWriteTimeout, "drop a response (other than a live stream) not written within this")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", httpapi.DefaultBodyReadTimeout, "drop a request whose body has not arrived within this")
	fs.IntVar(&f.walCkpt, "wal-autocheckpoint", 1000, "checkpoint the sidecar's WAL after this many pages; 0 leaves checkpoints to Litestream, which must then be replicating")
	fs.DurationVar(&f.taskTTL, "task-ttl", room.Defaults().TaskTTL, "a task's time to live, 1s to 24h (shorter only for soak and expiry tests)")
	ts := addTransportFlags(env, fs)
	fs.StringVar(&f.transport, "transport", transport.LoopbackName, "how other machines reach the room's ingress: "+strings.Join(ts.reg.Names(), ", "))
	fs.DurationVar(&f.transportTimeout, "transport-timeout", DefaultTransportTimeout, "how long the transport may take to be up (a login included) before serve gives up")
	return &ffcli.Command{
		Name:       "serve",
		ShortUsage: "ce serve FILE [--addr 127.0.0.1:0] [--ingress-addr 127.0.0.1:0] [--transport NAME] [--json] [--ephemeral]",
		ShortHelp:  "open a room around a Markdown file and serve it until interrupted",
		FlagSet:    fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: errors.New("serve takes exactly one FILE")}
			}
			return serve(ctx, env, f, args[0], ts)
		},
	}
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

func serve(ctx context.Context, env Env, f serveFlags, file string, ts *transports) error {
	if err := checkLoopback(f.addr); err != nil {
		return err
	}
	prov, err := ts.provider(f.transport)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--transport: %v", err)}
	}
	if f.transportTimeout <= 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--transport-timeout must be positive (got %s)", f.transportTimeout)}
	}
	if err := checkLoopback(f.ingressAddr); err != nil {
		return err
	}
	if err := checkConnFlags(f); err != nil {
		return err
	}
	level, err := parseLevel(f.logLevel)
	if err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--log-level: %v", err)}
	}
	share := room.Defaults()
	share.MaxTasksPerParticipant = f.maxTasksPerParticipant
	if err := share.ValidateTaskShare(); err != nil {
		return &exitError{code: exitUsage, err: fmt.Errorf("--max-tasks-per-participant: %s", room.AsError(err).Message)}
	}
	log := slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	if f.walCkpt < 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("--wal-autocheckpoint is a number of pages, 0 or more (got %d)", f.walCkpt)}
	}
	if f.taskTTL < time.Second || f.taskTTL > room.Defaults().TaskTTL {
		return &exitError{code: exitUsage, err: fmt.Errorf("--task-ttl must be between 1s and 24h (got %s)", f.taskTTL)}
	}

	if !f.ephemeral {
		if err := restoreMissingDocument(ctx, env, file); err != nil {
			return err
		}
	}
	docPath, err := room.ResolveDocPath(file)
	if err != nil {
		return err
	}
	// Decide at open whether a commit could keep the file's owner and group.
	if err := room.CheckDocOwner(docPath); err != nil {
		return err
	}
	var notes []string
	if n := room.DocLinks(docPath); n > 1 {
		notes = append(notes, fmt.Sprintf("%s has %d hard links; a commit replaces the file, so the other names keep the old text", file, n))
		log.Warn("the document has other hard links; a commit replaces the file, so the other names keep the old text", "links", n)
	}
	lock, err := room.AcquireWriterLock(docPath)
	if err != nil {
		if errors.Is(err, room.ErrLocked) {
			msg := err.Error()
			if of, ferr := readOwnerFile(docPath); ferr == nil {
				msg = describeServing(of)
			}
			return room.Errorf(room.KindRoomBusy, "%s is already being served: %s", file, msg)
		}
		return err
	}
	defer lock.Release()
	// A credential left by a killed process is never trusted: we hold the
	// lock, so whatever is there is stale.
	os.Remove(ownerPath(docPath))

	dbPath, tmpDir := "", ""
	if f.ephemeral {
		dir, err := os.MkdirTemp("", "commonroom-*")
		if err != nil {
			return room.Internal(err)
		}
		defer os.RemoveAll(dir)
		tmpDir = dir
		dbPath = filepath.Join(dir, filepath.Base(docPath)+".commonroom.db")
	}

	if f.queueLen < 1 || f.streams < 1 || f.rateLimit < 0 || f.maxSessions < 1 || f.maxBatch < 1 || f.maxLag <= 0 {
		return &exitError{code: exitUsage, err: errors.New("--listen-queue, --streams-per-session, --max-sessions and --max-batch must be at least 1, --listen-max-lag positive, --rate-limit 0 or more")}
	}
	if f.maxPerInvite < 1 {
		return &exitError{code: exitUsage, err: errors.New("--max-sessions-per-invite must be at least 1")}
	}
	if f.pendingProposals < 1 || f.pendingProposalsPerParticipant < 1 {
		return &exitError{code: exitUsage, err: errors.New("--pending-proposals and --pending-proposals-per-participant must be at least 1")}
	}
	fileLimit := raiseFileLimit(log)

	// The listeners and the transport come up before the sidecar is
	// opened: a transport that fails leaves the room's files untouched.
	ownerLn, err := net.Listen("tcp", f.addr)
	if err != nil {
		return room.Errorf(room.KindInvalidRequest, "cannot listen on %s: %v", f.addr, err)
	}
	defer ownerLn.Close()
	ingressLn, err := net.Listen("tcp", f.ingressAddr)
	if err != nil {
		return room.Errorf(room.KindInvalidRequest, "cannot listen on %s: %v", f.ingressAddr, err)
	}
	defer ingressLn.Close()
	hints, closeTransport, err := startTransport(ctx, env, log, f, prov, docPath, tmpDir, ingressLn.Addr().(*net.TCPAddr))
	if err != nil {
		return err
	}
	defer closeTransport()

	hub := listen.NewHub(listen.Config{QueueLen: f.queueLen, MaxLag: f.maxLag, MaxStreamsPerSession: f.streams, Logger: log, Encode: httpapi.EncodeChange})
	host := f.name
	if host == "" {
		host = hostName(env)
	}
	limits := room.Defaults()
	limits.MaxTasksPerParticipant = f.maxTasksPerParticipant
	limits.RateLimitPerMinute = f.rateLimit
	limits.MaxLiveSessions = f.maxSessions
	limits.MaxSessionsPerInvite = f.maxPerInvite
	limits.MaxPendingProposals = f.pendingProposals
	limits.MaxPendingProposalsPerParticipant = f.pendingProposalsPerParticipant
	limits.TaskTTL = f.taskTTL
	l, err := openLocalWith(ctx, docPath, dbPath, host, hub, log, limits, f.maxBatch, actor.WatchConfig{Enabled: true}, withWALAutocheckpoint(f.walCkpt))
	if err != nil {
		hub.Close()
		return err
	}
	stopRoom := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		actor.Do(cctx, l.room, "stopped", func(tx *room.Tx) (struct{}, error) { return struct{}{}, l.eng.MarkStopped(tx) })
		if err := l.Close(cctx); err != nil {
			log.Error("closing the room", "err", err)
		}
	}

	l.eng.SetHints(hints)

	opToken := newOperatorToken()
	maxConns, ownerMaxConns := connCaps(log, fileLimit, f)
	api := httpapi.New(httpapi.Config{Room: l.room, Hub: hub, Logger: log, OperatorToken: opToken, Version: version(),
		BodyReadTimeout: f.bodyTimeout, WriteTimeout: f.writeTimeout, MaxConns: maxConns, OwnerMaxConns: ownerMaxConns})
	ownerURL := "http://" + ownerLn.Addr().String()
	ingressURL := "http://" + ingressLn.Addr().String()

	if _, err := actor.Do(ctx, l.room, "started", func(tx *room.Tx) (struct{}, error) {
		return struct{}{}, l.eng.MarkStarted(tx)
	}); err != nil {
		ownerLn.Close()
		ingressLn.Close()
		hub.Close()
		stopRoom()
		return err
	}
	inv, err := actor.Do(ctx, l.room, "invite", func(tx *room.Tx) (room.InviteGrant, error) {
		return l.eng.CreateInvite(tx, room.Operator(l.eng.HostID), room.InviteInput{})
	})
	if err != nil {
		ownerLn.Close()
		ingressLn.Close()
		hub.Close()
		stopRoom()
		return err
	}
	if err := writeOwnerFile(docPath, ownerFile{PID: os.Getpid(), WorkspaceID: l.eng.WorkspaceID,
		OwnerURL: ownerURL, IngressURL: ingressURL, OperatorToken: opToken, Transport: newOwnerTransport(hints[0])}); err != nil {
		ownerLn.Close()
		ingressLn.Close()
		hub.Close()
		stopRoom()
		return room.Errorf(room.KindInternal, "cannot write the operator credential %s: %v", ownerPath(docPath), err)
	}
	defer os.Remove(ownerPath(docPath))

	servers := []*http.Server{httpapi.NewHTTPServer(api.OwnerHandler(), log), httpapi.NewHTTPServer(api.IngressHandler(), log)}
	errc := make(chan error, 2)
	go func() { errc <- servers[0].Serve(api.OwnerListener(ownerLn)) }()
	go func() { errc <- servers[1].Serve(api.IngressListener(ingressLn)) }()

	pageURL := ownerURL + "/?key=" + api.NewPageKey()
	if f.json {
		line, _ := json.Marshal(map[string]any{
			"workspace_id": l.eng.WorkspaceID, "name": l.eng.Name, "version": version(),
			"owner_url": pageURL, "ingress_url": ingressURL, "mcp_url": ingressURL + "/mcp",
			"invite": inv.URI, "pid": os.Getpid(), "transport": showHint(hints[0]),
		})
		fmt.Fprintln(env.Stdout, string(line))
	} else {
		printBanner(env, l, pageURL, ingressURL, hints[0], inv, notes)
	}
	log.Info("serving", "workspace_id", l.eng.WorkspaceID, "pid", os.Getpid())

	var serveErr error
	select {
	case <-ctx.Done():
	case <-env.Signals:
	case err := <-errc:
		serveErr = room.Errorf(room.KindInternal, "a listener failed: %v", err)
	}
	// A second signal forces the exit; the first one is a graceful stop.
	go func() {
		<-env.Signals
		fmt.Fprintln(env.Stderr, "ce: second interrupt, exiting now")
		env.Exit(1)
	}()
	log.Info("stopping")
	shutdown(servers, hub, log)
	closeTransport()
	stopRoom()
	return serveErr
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

func printBanner(env Env, l *localRoom, pageURL, ingressURL string, exposed room.Hint, inv room.InviteGrant, notes []string) {
	w := env.Stdout
	fmt.Fprintf(w, "Commonroom %s\n", version())
	fmt.Fprintf(w, "Room:        %s (%s)\n", l.eng.Name, l.eng.WorkspaceID)
	fmt.Fprintf(w, "File:        %s\n", l.eng.DocPath)
	for _, n := range notes {
		fmt.Fprintf(w, "Warning:     %s\n", n)
	}
	fmt.Fprintf(w, "Owner page:  %s\n", pageURL)
	fmt.Fprintf(w, "Agents:      %s/mcp (MCP 2026-07-28, bearer session)\n", ingressURL)
	fmt.Fprintf(w, "Transport:   %s\n", showHint(exposed))
	fmt.Fprintf(w, "Invitation (one use, expires %s):\n  %s\n", inv.ExpiresAt, inv.URI)
	fmt.Fprintf(w, "Join from another terminal:\n  ce join '%s' --name agent\n", inv.URI)
	fmt.Fprintf(w, "Status: READY. Press Ctrl-C to stop.\n")
}
