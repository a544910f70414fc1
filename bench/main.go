// Command bench is the end-to-end load generator for ce: it builds ce, runs
// `ce serve` on loopback (or targets a running room with --target-file),
// drives it over plain HTTP the way agents do — MCP on POST /mcp, listen
// streams, the owner's /debug/metrics — and prints each figure next to a
// baseline measured in the same run on the same machine. Speed is reported,
// never enforced; the run fails only when an invariant breaks (the active
// task cap, a lost frame, an error that should not happen).
//
//	go run ./bench [--scenarios lifecycle,poll,fanout,baselines,preload,watch,versions,hostile_conns] [--duration 20s] [--json] [--smoke]
//	go run ./bench --scenarios preload --preload 1000000 [--preload-mode bulk|mcp]
//	go run ./bench --scenarios soak [--soak-duration 30m] [--soak-sample 10s] [--json]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commonroom/ce/internal/cetest"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1 // an invariant broke, an unexpected error, or a scenario could not run
	exitUsage       = 2
	exitInterrupted = 130
)

var allScenarios = []string{"baselines", "lifecycle", "poll", "fanout", "preload", "watch", "versions", "hostile_conns", "soak"}

type config struct {
	scenarios         []string
	agents            int
	duration          time.Duration
	pollClients       int
	fanoutSizes       []int
	fanoutRate        float64
	fanoutDuration    time.Duration
	streamsPerSession int
	stallMaxLag       time.Duration
	stallRate         float64
	stallTimeout      time.Duration
	preload           int
	preloadMode       string // "bulk" or "mcp", resolved from --preload when not given
	probeDuration     time.Duration
	sqliteDuration    time.Duration
	fanLoopDuration   time.Duration
	targetFile        string
	smoke             bool
	json              bool
	keep              bool
	waitQuiet         time.Duration
	hostileBin        string
	hostileWait       time.Duration
	soakDuration      time.Duration
	soakSample        time.Duration
	soakWarmup        time.Duration
	soakTaskTTL       time.Duration
	soakRate          float64
	receiver          string // how the fan-out reads its streams: epoll or goroutines
	versionsCommits   int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == bareSSEFlag {
		os.Exit(bareSSEMain(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == trivialHTTPFlag {
		os.Exit(trivialHTTPMain(os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scen := fs.String("scenarios", "", "comma-separated: "+strings.Join(allScenarios, ",")+" (default: all; preload only with --preload)")
	fs.IntVar(&c.agents, "agents", 64, "concurrent lifecycle agents (and HTTP-ceiling clients, SQLite producers)")
	fs.DurationVar(&c.duration, "duration", 20*time.Second, "length of each lifecycle run and of each poll phase and the HTTP ceiling")
	fs.IntVar(&c.pollClients, "poll-clients", 64, "concurrent tasks/get clients")
	sizes := fs.String("fanout-sizes", "100,1000,10000", "listen stream counts to measure")
	fs.Float64Var(&c.fanoutRate, "fanout-rate", 10, "changes per second in the steady fan-out phase")
	fs.DurationVar(&c.fanoutDuration, "fanout-duration", 10*time.Second, "length of each fan-out phase")
	fs.StringVar(&c.receiver, "receiver", defaultReceiver, "how the fan-out and its bare SSE baseline read their streams: epoll (a few goroutines over all sockets; Linux) or goroutines (one per stream)")
	fs.IntVar(&c.versionsCommits, "versions-commits", 100, "one-line commits to the 1 MiB document in the versions scenario (5 in --smoke)")
	fs.IntVar(&c.streamsPerSession, "streams-per-session", 1000, "listen streams per listener session (passed to ce --streams-per-session)")
	fs.DurationVar(&c.stallMaxLag, "stall-max-lag", 2*time.Second, "ce --listen-max-lag for the stalled-reader test")
	fs.Float64Var(&c.stallRate, "stall-rate", 200, "changes per second while a reader is stalled")
	fs.DurationVar(&c.stallTimeout, "stall-timeout", 5*time.Minute, "how long to wait for the room to drop the stalled reader")
	fs.IntVar(&c.preload, "preload", 0, "handoffs to put in the sidecar before comparing tasks/get and handoff_create p99 with 1,000 (0 skips)")
	fs.StringVar(&c.preloadMode, "preload-mode", "", fmt.Sprintf("how the preload fills the sidecar beyond 1,000: mcp (every handoff through /mcp) or bulk (the room stopped, rows written straight into its sidecar; the default above %d)", bulkAbove))
	fs.DurationVar(&c.probeDuration, "probe-duration", 10*time.Second, "length of each preload probe")
	fs.DurationVar(&c.sqliteDuration, "sqlite-duration", 5*time.Second, "length of each SQLite baseline")
	fs.DurationVar(&c.fanLoopDuration, "fanloop-duration", 2*time.Second, "length of each bare fan-out loop")
	fs.StringVar(&c.targetFile, "target-file", "", "run against the room serving FILE (reads FILE.commonroom.owner) instead of starting one")
	fs.BoolVar(&c.smoke, "smoke", false, "a short CI run: seconds per scenario, at most 100 streams; fails only on broken invariants")
	fs.BoolVar(&c.json, "json", false, "write one JSON document on stdout (the table goes to stderr)")
	fs.DurationVar(&c.waitQuiet, "wait-quiet", 0, "before each measured run, wait up to this long for other processes to use < 30% of a core (for shared machines)")
	fs.BoolVar(&c.keep, "keep", false, "keep the work directory (rooms, ce logs) after the run")
	fs.StringVar(&c.hostileBin, "hostile-bin", "", "the ce binary hostile_conns runs against (default: the one built), to measure another build the same way; it then gets ce's default deadlines")
	fs.DurationVar(&c.hostileWait, "hostile-wait", 40*time.Second, "how long hostile_conns waits for the server's deadlines (ce's defaults are 30 s) before it counts what is still held")
	fs.DurationVar(&c.soakDuration, "soak-duration", 30*time.Minute, "length of the soak (only with --scenarios soak, or in --smoke, where it is 25s)")
	fs.DurationVar(&c.soakSample, "soak-sample", 10*time.Second, "how often the soak samples RSS, goroutines, descriptors and the sidecar")
	fs.DurationVar(&c.soakWarmup, "soak-warmup", 0, "samples before this are left out of the soak's slopes (0: a tenth of the run, 5s to 2m)")
	fs.DurationVar(&c.soakTaskTTL, "soak-task-ttl", time.Minute, "ce --task-ttl in the soak, so tasks expire and are purged during the run")
	fs.Float64Var(&c.soakRate, "soak-rate", 10, "handoff lifecycles per second in the soak, all lanes together")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return c, fmt.Errorf("--fanout-sizes: bad size %q", s)
		}
		c.fanoutSizes = append(c.fanoutSizes, n)
	}
	if *scen == "" || *scen == "all" {
		for _, s := range allScenarios {
			// The preload needs a size, and the soak is half an hour unless
			// it is the smoke's short form: both only when asked for.
			if (s != "preload" || c.preload > 0) && (s != "soak" || c.smoke) {
				c.scenarios = append(c.scenarios, s)
			}
		}
	} else {
		for _, s := range strings.Split(*scen, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(allScenarios, s) {
				return c, fmt.Errorf("--scenarios: unknown scenario %q", s)
			}
			c.scenarios = append(c.scenarios, s)
		}
	}
	if slices.Contains(c.scenarios, "preload") && c.preload < 1 {
		return c, errors.New("the preload scenario needs --preload N")
	}
	switch c.preloadMode {
	case "":
		c.preloadMode = "mcp"
		if c.preload > bulkAbove {
			c.preloadMode = "bulk"
		}
	case "bulk", "mcp":
	default:
		return c, fmt.Errorf("--preload-mode: %q is neither bulk nor mcp", c.preloadMode)
	}
	if c.receiver != receiverEpoll && c.receiver != receiverGoroutines {
		return c, fmt.Errorf("--receiver: %q is neither %s nor %s", c.receiver, receiverEpoll, receiverGoroutines)
	}
	if c.versionsCommits < 1 {
		return c, errors.New("--versions-commits must be positive")
	}
	if c.agents < 1 || c.pollClients < 1 || c.streamsPerSession < 1 || c.fanoutRate <= 0 {
		return c, errors.New("--agents, --poll-clients, --streams-per-session and --fanout-rate must be positive")
	}
	if c.soakSample <= 0 || c.soakRate <= 0 || c.soakWarmup < 0 || c.soakTaskTTL < 4*time.Second || c.soakTaskTTL > 24*time.Hour {
		return c, errors.New("--soak-sample and --soak-rate must be positive, --soak-warmup 0 or more, --soak-task-ttl 4s to 24h")
	}
	if c.smoke {
		c.duration = min(c.duration, 2*time.Second)
		c.agents = min(c.agents, 16)
		c.pollClients = min(c.pollClients, 16)
		c.fanoutDuration = min(c.fanoutDuration, 2*time.Second)
		c.probeDuration = min(c.probeDuration, time.Second)
		c.sqliteDuration = min(c.sqliteDuration, time.Second)
		c.fanLoopDuration = min(c.fanLoopDuration, 500*time.Millisecond)
		c.soakDuration = min(c.soakDuration, 25*time.Second)
		c.versionsCommits = min(c.versionsCommits, 5)
		c.soakSample = min(c.soakSample, time.Second)
		c.soakTaskTTL = min(c.soakTaskTTL, 8*time.Second)
		// Long enough to judge the stall drop against its finding bound
		// (3 × max-lag after the receive window fills, which takes
		// milliseconds), short enough that an old build costs seconds.
		c.stallTimeout = min(c.stallTimeout, stallBoundFactor*c.stallMaxLag+2*time.Second)
		c.fanoutSizes = slices.DeleteFunc(c.fanoutSizes, func(n int) bool { return n > 100 })
		if len(c.fanoutSizes) == 0 {
			c.fanoutSizes = []int{100}
		}
	}
	if slices.Contains(c.scenarios, "soak") && c.soakDuration < c.soakTaskTTL+15*time.Second {
		return c, fmt.Errorf("--soak-duration %s is too short to see a task expire: give it at least --soak-task-ttl + 15s", c.soakDuration)
	}
	return c, nil
}

// raiseNoFile lifts the bench's own open-file limit: 10,000 streams are
// 10,000 sockets on this side too.
func raiseNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0, err
		}
	}
	return rl.Cur, nil
}

// run is the whole bench as a function, so the smoke test can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintln(stderr, "bench:", err)
		return exitUsage
	}
	tableOut := stdout
	if cfg.json {
		tableOut = stderr
	}
	rep := &report{Command: strings.TrimSpace("go run ./bench " + strings.Join(args, " ")), out: tableOut,
		Violations: []string{}, Findings: []string{}}
	e := &env{cfg: cfg, faults: newFaults(), rep: rep, progress: stderr}
	nofile, err := raiseNoFile()
	if err != nil {
		e.logf("cannot raise the open-file limit: %v", err)
	}
	if need := uint64(slices.Max(cfg.fanoutSizes)) + 1024; slices.Contains(cfg.scenarios, "fanout") && nofile < need {
		fmt.Fprintf(stderr, "bench: the open-file limit is %d; %d streams need about %d\n", nofile, slices.Max(cfg.fanoutSizes), need)
		return exitUsage
	}
	rep.Config = map[string]any{"scenarios": cfg.scenarios, "agents": cfg.agents, "duration": cfg.duration.String(),
		"poll_clients": cfg.pollClients, "fanout_sizes": cfg.fanoutSizes, "fanout_rate": cfg.fanoutRate,
		"fanout_duration": cfg.fanoutDuration.String(), "streams_per_session": cfg.streamsPerSession,
		"stall_max_lag": cfg.stallMaxLag.String(), "stall_rate": cfg.stallRate, "stall_timeout": cfg.stallTimeout.String(), "preload": cfg.preload, "preload_mode": cfg.preloadMode, "probe_duration": cfg.probeDuration.String(),
		"smoke": cfg.smoke, "target_file": cfg.targetFile, "wait_quiet": cfg.waitQuiet.String(),
		"hostile_bin": cfg.hostileBin, "hostile_wait": cfg.hostileWait.String(),
		"soak_duration": cfg.soakDuration.String(), "soak_sample": cfg.soakSample.String(), "soak_warmup": cfg.soakWarmup.String(),
		"soak_task_ttl": cfg.soakTaskTTL.String(), "soak_rate": cfg.soakRate, "receiver": cfg.receiver, "versions_commits": cfg.versionsCommits}
	var uts syscall.Utsname
	syscall.Uname(&uts)
	rep.Machine = map[string]any{"cpus": runtime.NumCPU(), "gomaxprocs": runtime.GOMAXPROCS(0), "go": runtime.Version(),
		"kernel": utsString(uts.Release[:]), "nofile": nofile}

	e.workDir, err = os.MkdirTemp("", "ce-bench-*")
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFailed
	}
	defer func() {
		if cfg.keep || !rep.OK {
			e.logf("work directory kept: %s", e.workDir)
			return
		}
		os.RemoveAll(e.workDir)
	}()
	defer e.stopAll() // deferred last, so every child is stopped before the directory goes
	if cfg.targetFile != "" {
		if e.target, err = attachCE(cfg.targetFile); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return exitUsage
		}
	}
	e.logf("building ce")
	if e.bin, err = cetest.BuildCE(ctx, e.workDir); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return exitFailed
	}

	// The machine may be shared: note how busy it was before the bench
	// started, so figures can be read against it.
	b0, t0 := machineJiffies()
	time.Sleep(time.Second)
	if b1, t1 := machineJiffies(); t1 > t0 {
		bg := 100 * float64(runtime.NumCPU()) * float64(b1-b0) / float64(t1-t0)
		rep.Machine["background_cpu_pct_before_run"] = bg
		e.logf("machine: %d CPUs, %.0f%% of one core busy before the run", runtime.NumCPU(), bg)
	}
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		rep.Machine["loadavg_before_run"] = strings.TrimSpace(string(la))
	}

	runners := map[string]func(context.Context, *env) error{
		"baselines": scenarioBaselines, "lifecycle": scenarioLifecycle, "poll": scenarioPoll,
		"fanout": scenarioFanout, "preload": scenarioPreload,
		"watch":         scenarioWatch,
		"versions":      scenarioVersions,
		"hostile_conns": scenarioHostileConns,
		"soak":          scenarioSoak,
	}
	for _, name := range allScenarios { // fixed order: baselines first, so ratios print as rows arrive
		if !slices.Contains(cfg.scenarios, name) || ctx.Err() != nil {
			continue
		}
		t0 := time.Now()
		if err := runners[name](ctx, e); err != nil && ctx.Err() == nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", name, err))
			fmt.Fprintf(tableOut, "SCENARIO FAILED: %s: %v\n", name, err)
		}
		e.logf("%s done in %s", name, time.Since(t0).Round(time.Second))
	}
	e.stopAll()

	rep.Faults, rep.FaultSamples = e.faults.snapshot()
	rep.judge()
	rep.OK = len(rep.Violations) == 0 && len(rep.Faults) == 0 && len(rep.Errors) == 0 && ctx.Err() == nil
	rep.printTargets()
	rep.printVerdict()
	if cfg.json {
		if err := rep.writeJSON(stdout); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return exitFailed
		}
	}
	switch {
	case ctx.Err() != nil:
		return exitInterrupted
	case !rep.OK:
		return exitFailed
	}
	return exitOK
}

func utsString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
