package room_test

// A full (or unwritable) disk under a running room (issue #8 item 4). The
// room runs in a child process — this test binary re-run as
// TestDiskHelperProcess, with the real engine, store and actor — so its
// file-size limit (RLIMIT_FSIZE) can be lowered without touching the test
// process: writes past the limit then fail with EFBIG, as on a full disk.
// That works as root too, where chmod 0555 would not stop a single write
// (and a read-only directory would not stop writes to files already open,
// which is what a serving room holds). The parent drives the child over
// stdin/stdout and reads the sidecar itself, read-only, all along.
//
// Two levels are tried. At limit 0 nothing can be written: the document's
// temporary file and the sidecar's WAL both fail. At a limit above the
// document's size and below the WAL's end, the document can be replaced but
// the sidecar cannot commit: the case where the file and the sidecar could
// part ways. Either way a write must fail with an error (not a panic, not a
// hang), reads must keep working, the sidecar must stay intact (PRAGMA
// integrity_check, the rows as they were), and once the disk is writable
// again writes must succeed and the file and the sidecar must agree.
//
// A sidecar written by another program is refused untouched by OpenStore:
// TestOpenStore_RefusesWhatIsNotOurs (store_test.go).

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

const dkChildEnv = "CE_DISK_TEST_DOC"

// dkReply is the child's answer to one command.
type dkReply struct {
	OK      bool   `json:"ok"`
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message,omitempty"` // what a client is told
	Cause   string `json:"cause,omitempty"`   // the whole error, as logged
	ID      string `json:"id,omitempty"`
	N       int64  `json:"n,omitempty"`
	MS      int64  `json:"ms"`
}

// TestDiskHelperProcess is the child: it does nothing unless the parent
// started it.
func TestDiskHelperProcess(t *testing.T) {
	doc := os.Getenv(dkChildEnv)
	if doc == "" {
		return
	}
	signal.Ignore(syscall.SIGXFSZ) // a write past the limit fails with EFBIG instead of killing us
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	eng, err := room.NewEngine(doc, room.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		t.Fatal(err)
	}
	r, err := actor.Open(ctx, actor.Config{Engine: eng, Store: st, Logger: log, HostName: "host", MaxSweepWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	op := room.Operator(eng.HostID)
	out := bufio.NewWriter(os.Stdout)
	answer := func(start time.Time, rep dkReply, err error) {
		if err != nil {
			e := room.AsError(err)
			rep.Kind, rep.Message, rep.Cause = string(e.Kind), e.Message, err.Error()
		} else {
			rep.OK = true
		}
		rep.MS = time.Since(start).Milliseconds()
		b, _ := json.Marshal(rep)
		fmt.Fprintf(out, "DK %s\n", b)
		out.Flush()
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		switch f[0] {
		case "limit", "unlimit":
			rl := syscall.Rlimit{Cur: ^uint64(0), Max: ^uint64(0)}
			if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &rl); err == nil && f[0] == "limit" {
				fmt.Sscan(f[1], &rl.Cur)
			} else if err == nil {
				rl.Cur = rl.Max
			}
			answer(start, dkReply{}, syscall.Setrlimit(syscall.RLIMIT_FSIZE, &rl))
		case "propose": // propose <text>: a proposal on Goals against the current version
			p, err := actor.Do(cctx, r, "propose", func(tx *room.Tx) (room.Proposal, error) {
				var v int64
				if err := tx.Querier().QueryRowContext(tx.Context(), `SELECT max(version) FROM versions`).Scan(&v); err != nil {
					return room.Proposal{}, err
				}
				c := "## Goals\n\n" + f[1] + "\n\n"
				return eng.Propose(tx, op, room.ProposeInput{Target: "Goals", BaseVersion: v, Summary: f[1],
					Change: room.ChangeInput{Content: &c, Section: "Goals"}})
			})
			answer(start, dkReply{ID: p.ProposalID}, err)
		case "approve":
			yes := true
			_, err := actor.Do(cctx, r, "review", func(tx *room.Tx) (room.ReviewResult, error) {
				return eng.Review(tx, op, room.ReviewInput{ProposalID: f[1], Approve: &yes})
			})
			answer(start, dkReply{}, err)
		case "commit":
			c, err := actor.Do(cctx, r, "commit", func(tx *room.Tx) (room.CommitResult, error) {
				return eng.Commit(tx, op, room.CommitInput{ProposalID: f[1]})
			})
			answer(start, dkReply{N: c.Version}, err)
		case "handoff":
			res, err := actor.Do(cctx, r, "handoff", func(tx *room.Tx) (room.CreateHandoffResult, error) {
				return eng.CreateHandoff(tx, op, room.CreateHandoffInput{Summary: f[1]})
			})
			answer(start, dkReply{ID: res.Handoff.TaskID}, err)
		case "read": // the reads a client makes: status, the document, proposals, a task
			n, err := actor.Read(cctx, r, func(q room.Querier) (int64, error) {
				s, err := eng.Status(cctx, q, op, room.Empty{})
				if err != nil {
					return 0, err
				}
				if _, err := eng.Read(cctx, q, op, room.ReadInput{}); err != nil {
					return 0, err
				}
				ps, err := eng.Proposals(cctx, q, op, room.ProposalsInput{})
				if err != nil {
					return 0, err
				}
				if len(f) > 1 {
					if _, err := eng.GetTask(cctx, q, op, room.TaskIDInput{TaskID: f[1]}); err != nil {
						return 0, err
					}
				}
				_ = s
				return int64(len(ps.Proposals)), nil
			})
			answer(start, dkReply{N: n}, err)
		case "close":
			err := r.Close(cctx)
			if cerr := st.Close(); err == nil {
				err = cerr
			}
			answer(start, dkReply{}, err)
			cancel()
			return
		default:
			answer(start, dkReply{}, fmt.Errorf("unknown command %q", f[0]))
		}
		cancel()
	}
}

// dkChild is the parent's handle on the child.
type dkChild struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	lines  chan string
	stderr *dkBuffer
}

type dkBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *dkBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *dkBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func dkStart(t *testing.T, doc string) *dkChild {
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskHelperProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), dkChildEnv+"="+doc)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &dkChild{t: t, cmd: cmd, in: in, lines: make(chan string, 16), stderr: &dkBuffer{}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "DK "); ok {
				c.lines <- line
			}
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// do sends one command and waits (bounded) for its answer: a hang fails.
func (c *dkChild) do(format string, args ...any) dkReply {
	c.t.Helper()
	line := fmt.Sprintf(format, args...)
	if _, err := fmt.Fprintln(c.in, line); err != nil {
		c.t.Fatalf("%s: the child is gone: %v\n%s", line, err, c.stderr)
	}
	select {
	case s, ok := <-c.lines:
		if !ok {
			c.t.Fatalf("%s: the child exited (a panic?):\n%s", line, c.stderr)
		}
		var r dkReply
		if err := json.Unmarshal([]byte(s), &r); err != nil {
			c.t.Fatal(err)
		}
		if r.MS > 10_000 {
			c.t.Errorf("%s took %d ms", line, r.MS)
		}
		return r
	case <-time.After(45 * time.Second):
		c.t.Fatalf("%s: no answer within 45 s (a hang)\n%s", line, c.stderr)
	}
	return dkReply{}
}

func (c *dkChild) ok(format string, args ...any) dkReply {
	c.t.Helper()
	r := c.do(format, args...)
	if !r.OK {
		c.t.Fatalf("%s: %s: %s", fmt.Sprintf(format, args...), r.Kind, r.Message)
	}
	return r
}

// dkSidecar is the parent's own read-only view of the sidecar.
func dkSidecar(t *testing.T, doc string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+room.SidecarPath(doc)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// dkState is every row of every table, and the integrity check's verdict.
func dkState(t *testing.T, db *sql.DB) (rows string, integrity string) {
	t.Helper()
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	names, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for names.Next() {
		var n string
		names.Scan(&n)
		tables = append(tables, n)
	}
	names.Close()
	var b strings.Builder
	for _, table := range tables {
		rs, err := db.Query(`SELECT * FROM "` + table + `" ORDER BY 1`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		for rs.Next() {
			rs.Scan(ptrs...)
			fmt.Fprintf(&b, "%s %x\n", table, fmt.Sprint(vals...))
		}
		rs.Close()
	}
	return b.String(), integrity
}

func dkCount(t *testing.T, db *sql.DB, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestDiskFullOrReadOnly(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte(testDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	c := dkStart(t, doc)

	// Some history first, so the WAL's end lies well past the second limit.
	var approved string
	for i := range 6 {
		p := c.ok("propose before-%d", i)
		c.ok("approve %s", p.ID)
		if i < 5 {
			c.ok("commit %s", p.ID)
		} else {
			approved = p.ID // approved, not yet committed
		}
	}
	task := c.ok("handoff before").ID
	db := dkSidecar(t, doc)
	wal, err := os.Stat(room.SidecarPath(doc) + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	fileBefore, _ := os.ReadFile(doc)
	if _, integrity := dkState(t, db); integrity != "ok" {
		t.Fatalf("integrity before: %s", integrity)
	}
	versions := dkCount(t, db, `SELECT count(*) FROM versions`)

	// limit is the file-size limit for one phase; docWrites says whether the
	// document itself can still be replaced at that limit.
	const small = 8 << 10
	if wal.Size() < 4*small {
		t.Fatalf("the WAL is only %d bytes; the second phase needs its end past %d", wal.Size(), small)
	}
	if int64(len(fileBefore)) >= small {
		t.Fatalf("the document is %d bytes; the second phase needs it under %d", len(fileBefore), small)
	}
	for _, phase := range []struct {
		name  string
		limit int64
	}{
		{"nothing can be written (limit 0)", 0},
		{"the document fits, the sidecar does not (limit 8 KiB)", small},
	} {
		t.Run(phase.name, func(t *testing.T) {
			c.t = t
			before, _ := dkState(t, db)
			c.ok("limit %d", phase.limit)
			unlimited := false
			defer func() {
				if !unlimited {
					c.do("unlimit")
				}
			}()
			t.Run("a write fails with an error, not a panic or a hang", func(t *testing.T) {
				c.t = t
				for _, cmd := range []string{"propose during", "handoff during", "commit " + approved} {
					r := c.do("%s", cmd)
					if r.OK {
						t.Errorf("%s succeeded on a full disk", cmd)
						continue
					}
					if r.Kind == "" || r.Message == "" {
						t.Errorf("%s: an error without kind or message: %+v", cmd, r)
					}
					t.Logf("%s -> %s: %q (cause: %s; %d ms)", cmd, r.Kind, r.Message, r.Cause, r.MS)
					if rr := c.do("read %s", task); !rr.OK {
						t.Errorf("after the failed %q, a read fails: %s: %q (cause: %s)", cmd, rr.Kind, rr.Message, rr.Cause)
					}
				}
			})
			t.Run("reads keep working", func(t *testing.T) {
				c.t = t
				r := c.do("read %s", task)
				if !r.OK {
					t.Errorf("a read failed on a full disk: %s: %q (cause: %s)", r.Kind, r.Message, r.Cause)
				}
				if rows, integrity := dkState(t, db); integrity != "ok" {
					t.Errorf("integrity_check: %s", integrity)
				} else if rows != before {
					t.Errorf("the sidecar's rows changed although every write failed")
				}
			})
			t.Run("once the disk is writable, writes succeed and file and sidecar agree", func(t *testing.T) {
				c.t = t
				c.ok("unlimit")
				unlimited = true
				c.ok("read %s", task)
				p := c.ok("propose after-%d", phase.limit)
				if dkCount(t, db, `SELECT count(*) FROM proposals WHERE proposal_id = ?`, p.ID) != 1 {
					t.Errorf("the proposal made after the disk came back is not in the sidecar")
				}
				file, _ := os.ReadFile(doc)
				current, err := room.VersionText(context.Background(), db, 0)
				if err != nil {
					t.Fatal(err)
				}
				if current != string(file) {
					t.Errorf("the file and the sidecar's current version differ:\nfile %q\nsidecar %q", file, current)
				}
				if _, integrity := dkState(t, db); integrity != "ok" {
					t.Errorf("integrity_check: %s", integrity)
				}
			})
		})
	}
	c.t = t
	t.Run("once the disk is back nothing is lost", func(t *testing.T) {
		// The proposal approved before the disk filled either commits now or,
		// if a failed commit had already replaced the file (phase two), its
		// text is in the room as an external edit and the proposal is stale
		// (writeDoc's documented trade: nothing lost, only attribution).
		r := c.do("commit %s", approved)
		t.Logf("commit of the proposal approved before the disk filled: ok=%v %s %q", r.OK, r.Kind, r.Message)
		file, _ := os.ReadFile(doc)
		if r.OK && !strings.Contains(string(file), "before-5") {
			t.Errorf("committed, but the file does not hold it: %q", file)
		}
		if n := dkCount(t, db, `SELECT count(*) FROM versions`); n <= versions {
			t.Errorf("%d versions, want more than %d", n, versions)
		}
		found := false
		for v := dkCount(t, db, `SELECT max(version) FROM versions`); v >= 1 && !found; v-- {
			text, err := room.VersionText(context.Background(), db, v)
			if err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
			found = strings.Contains(text, "before-4")
		}
		if !found {
			t.Errorf("an earlier version is gone")
		}
	})
	c.ok("close")
	if strings.Contains(c.stderr.String(), "panic") {
		t.Errorf("the child panicked:\n%s", c.stderr)
	}
	t.Run("the writer logged why the writes failed", func(t *testing.T) {
		logs := c.stderr.String()
		if !strings.Contains(logs, "full") && !strings.Contains(logs, "too large") && !strings.Contains(logs, "I/O") {
			t.Errorf("no cause in the log:\n%s", logs)
		}
	})
}
