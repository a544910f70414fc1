package crashtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/commonroom/ce/internal/cetest"
	"github.com/commonroom/ce/internal/mcptest"
)

// TestLitestreamRecovery is the disaster-recovery recipe of issue 13 item 16,
// run for real: `ce serve --wal-autocheckpoint 0` under `litestream
// replicate -exec` with a file replica, handoffs and document commits
// driven through the API, both processes killed with SIGKILL at a random
// moment, `litestream restore` into a new directory beside a copy of the
// Markdown file, and `ce serve` there. Every handoff acknowledged more than
// one sync interval (plus one monitor interval, Litestream's WAL polling)
// before the kill must be there, at least as far along as acknowledged,
// with its task; the sessions joined before the load must still be
// accepted; PRAGMA integrity_check must pass. The recovery point — how
// long before the kill the newest acknowledgement that survived was made —
// is measured on every run and reported.
//
// CE_LITESTREAM names the litestream binary (scripts/litestream.sh installs
// v0.5.18 and runs this test); without it the test is skipped.
// CE_LITESTREAM_RUNS (default 3) sets the number of kills,
// CE_LITESTREAM_SYNC (seconds, default 0.5) the replica's sync interval,
// CE_LITESTREAM_SEED the seed of the kill moments, and CE_LITESTREAM_LOG
// Litestream's log level (shown when a run fails; default info).
func TestLitestreamRecovery(t *testing.T) {
	bin := os.Getenv("CE_LITESTREAM")
	if bin == "" {
		t.Skip("CE_LITESTREAM is not set: scripts/litestream.sh installs litestream v0.5.18 and runs this test")
	}
	if out, err := exec.Command(bin, "version").Output(); err != nil {
		t.Fatalf("CE_LITESTREAM=%s: %v", bin, err)
	} else {
		t.Logf("litestream %s", strings.TrimSpace(string(out)))
	}
	runs := envInt(t, "CE_LITESTREAM_RUNS", 3)
	syncEvery := envSeconds(t, "CE_LITESTREAM_SYNC", 500*time.Millisecond)
	seed := time.Now().UnixNano()
	if v := os.Getenv("CE_LITESTREAM_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("CE_LITESTREAM_SEED=%q: %v", v, err)
		}
		seed = n
	}
	report := func(format string, args ...any) {
		t.Logf(format, args...)
		if testing.Verbose() {
			fmt.Printf("litestream: "+format+"\n", args...)
		}
	}
	report("seed %d, %d runs, sync-interval %s, monitor-interval %s", seed, runs, syncEvery, lsMonitor)
	rng := rand.New(rand.NewSource(seed))
	var newest, oldestLost []time.Duration
	for i := range runs {
		t.Run(fmt.Sprintf("kill_%d", i+1), func(t *testing.T) {
			r := litestreamRun(t, bin, syncEvery, 2*time.Second+time.Duration(rng.Int63n(int64(2*time.Second))), i == 0)
			report("kill %d: %d acknowledgements before the kill, %d recovered; the newest recovered was %s before the kill; %s",
				i+1, r.acked, r.recovered, r.newest.Round(time.Millisecond), r.lostText())
			newest = append(newest, r.newest)
			if r.lost > 0 {
				oldestLost = append(oldestLost, r.oldestLost)
			}
		})
	}
	if len(newest) > 0 {
		slices.Sort(newest)
		report("recovery point over %d kills (sync-interval %s): the newest recovered acknowledgement was %s to %s before the kill (median %s)",
			len(newest), syncEvery, newest[0].Round(time.Millisecond), newest[len(newest)-1].Round(time.Millisecond),
			newest[len(newest)/2].Round(time.Millisecond))
	}
	if len(oldestLost) > 0 {
		slices.Sort(oldestLost)
		report("the oldest lost acknowledgement was at most %s before the kill", oldestLost[len(oldestLost)-1].Round(time.Millisecond))
	}
}

// lsMonitor is how often Litestream looks at the WAL for new frames; it is
// kept below the sync interval so the sync interval bounds the loss.
const lsMonitor = 100 * time.Millisecond

// lsAck is one acknowledged change: a handoff reaching a state, or a
// document version.
type lsAck struct {
	handoff, task string
	state         string // created (open), accepted, result_ready, approved, cancelled; "" for a version
	version       int64
	at            time.Time
}

var lsRank = map[string]int{"open": 0, "accepted": 1, "result_ready": 2, "approved": 3}

type lsResult struct {
	acked, recovered, lost int
	newest, oldestLost     time.Duration
}

func (r lsResult) lostText() string {
	if r.lost == 0 {
		return "none lost"
	}
	return fmt.Sprintf("%d lost, the oldest %s before the kill", r.lost, r.oldestLost.Round(time.Millisecond))
}

// lsAPI is a small client for the room's plain HTTP routes.
type lsAPI struct {
	hc      *http.Client
	ingress string
	owner   string
	opToken string
}

func (a *lsAPI) do(ctx context.Context, method, url, token string, body, out any) (int, error) {
	r, err := mcptest.Do(ctx, a.hc, method, url, token, body)
	if err != nil {
		return r.Status, err
	}
	if r.Status/100 != 2 {
		return r.Status, fmt.Errorf("%s %s: HTTP %d: %s", method, url, r.Status, r.Raw)
	}
	if out != nil {
		if err := json.Unmarshal(r.Raw, out); err != nil {
			return r.Status, fmt.Errorf("%s %s: %v: %s", method, url, err, r.Raw)
		}
	}
	return r.Status, nil
}

// participant joins one participant with these capabilities.
func (a *lsAPI) participant(ctx context.Context, name string, caps ...string) (sessionGrant, error) {
	inv, err := mcptest.Invite(ctx, a.hc, a.owner, a.opToken, map[string]any{"capabilities": caps, "max_uses": 1, "expires_in_minutes": 60})
	if err != nil {
		return sessionGrant{}, err
	}
	return mcptest.Join(ctx, a.hc, a.ingress, inv.URI, name, "agent")
}

// litestreamRun is one serve–load–kill–restore–serve cycle.
func litestreamRun(t *testing.T, bin string, syncEvery, loadFor time.Duration, alsoWithoutFile bool) lsResult {
	dir := t.TempDir()
	live, replica, restored := filepath.Join(dir, "live"), filepath.Join(dir, "replica"), filepath.Join(dir, "restored")
	for _, d := range []string{live, restored} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(live, "room.md")
	if err := os.WriteFile(file, []byte("# Recovery\n\n## Log\n\nnothing yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := file + ".commonroom.db"
	cfg := filepath.Join(dir, "litestream.yml")
	// The recipe of the README: logs on stderr (stdout is ce's), a file
	// replica, a short sync interval, the WAL polled more often than that.
	level := cmp.Or(os.Getenv("CE_LITESTREAM_LOG"), "info")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`logging:
  level: %s
  stderr: true
dbs:
  - path: %s
    monitor-interval: %s
    replica:
      type: file
      path: %s
      sync-interval: %s
`, level, db, lsMonitor, replica, syncEvery)), 0o600); err != nil {
		t.Fatal(err)
	}

	// litestream replicate -exec "ce serve FILE --json --wal-autocheckpoint 0 ..."
	execLine := fmt.Sprintf("%s serve %s --json --rate-limit 0 --max-sessions 256 --wal-autocheckpoint 0", shellQuote(ceBin), shellQuote(file))
	ls := cetest.Spawn(t, bin, "", nil, 4<<20, stopTimeout, "replicate", "-config", cfg, "-exec", execLine)
	var cePID int
	t.Cleanup(func() {
		if cePID > 0 {
			syscall.Kill(cePID, syscall.SIGKILL)
		}
	})
	var b banner
	line, err := ls.FirstLine(readyTimeout)
	if err != nil {
		t.Fatalf("ce was not ready under litestream: %v", err)
	}
	if err := json.Unmarshal([]byte(line), &b); err != nil || b.PID == 0 {
		t.Fatalf("the first line on stdout is not ce's banner (%v): %s", err, line)
	}
	cePID = b.PID
	of, err := readOwnerFile(file + ".commonroom.owner")
	if err != nil || of.PID != cePID {
		t.Fatalf("operator credential: %+v, %v (banner pid %d)", of, err, cePID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := &lsAPI{hc: &http.Client{Timeout: 10 * time.Second}, ingress: of.IngressURL, owner: of.OwnerURL, opToken: of.OperatorToken}
	defer api.hc.CloseIdleConnections()

	// The cast, joined before the load: their sessions must survive.
	const lanes = 6
	// Each lane waits this long between two steps: a busy room (about 200
	// acknowledgements a second), not the machine's ceiling, where the
	// replication lag is the CPU's rather than Litestream's.
	pace := envSeconds(t, "CE_LITESTREAM_PACE", 25*time.Millisecond)
	type lane struct{ owner, worker, approver sessionGrant }
	ls6 := make([]lane, lanes)
	for i := range ls6 {
		var err error
		if ls6[i].owner, err = api.participant(ctx, fmt.Sprintf("owner-%d", i), "read", "propose"); err == nil {
			if ls6[i].worker, err = api.participant(ctx, fmt.Sprintf("worker-%d", i), "read", "checkout"); err == nil {
				ls6[i].approver, err = api.participant(ctx, fmt.Sprintf("approver-%d", i), "read", "approve")
			}
		}
		if err != nil {
			t.Fatalf("joining: %v", err)
		}
	}
	editor, err := api.participant(ctx, "editor", "read", "admin")
	if err != nil {
		t.Fatalf("joining: %v", err)
	}

	var mu sync.Mutex
	var acks []lsAck
	record := func(a lsAck) {
		a.at = time.Now()
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	}
	stop := make(chan struct{})
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	var unexpected []string
	fail := func(format string, args ...any) {
		if stopped() {
			return // the kill makes requests fail: expected
		}
		mu.Lock()
		unexpected = append(unexpected, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i, l := range ls6 {
		wg.Go(func() {
			for n := 0; !stopped(); n++ {
				var c struct {
					Handoff struct {
						HandoffID string `json:"handoff_id"`
						TaskID    string `json:"task_id"`
					} `json:"handoff"`
				}
				if _, err := api.do(ctx, "POST", api.ingress+"/workspace/handoff", l.owner.SessionToken,
					map[string]any{"summary": fmt.Sprintf("lane %d work %d", i, n), "assignee": l.worker.ParticipantID}, &c); err != nil {
					fail("create: %v", err)
					return
				}
				h := lsAck{handoff: c.Handoff.HandoffID, task: c.Handoff.TaskID}
				h.state = "open"
				record(h)
				steps := []struct {
					state, path, token string
					body               map[string]any
				}{
					{"accepted", "/workspace/handoff/accept", l.worker.SessionToken, map[string]any{"handoff_id": h.handoff}},
					{"result_ready", "/workspace/handoff/complete", l.worker.SessionToken, map[string]any{"handoff_id": h.handoff, "result": map[string]any{"text": "done"}}},
					{"approved", "/workspace/handoff/approve", l.approver.SessionToken, map[string]any{"handoff_id": h.handoff}},
				}
				if n%4 == 3 { // now and then the owner cancels after the accept
					steps = append(steps[:1], struct {
						state, path, token string
						body               map[string]any
					}{"cancelled", "/workspace/task/cancel", l.owner.SessionToken, map[string]any{"task_id": h.task}})
				}
				for _, s := range steps {
					time.Sleep(pace)
					if _, err := api.do(ctx, "POST", api.ingress+s.path, s.token, s.body, nil); err != nil {
						fail("%s: %v", s.path, err)
						return
					}
					h.state = s.state
					record(h)
				}
				time.Sleep(pace)
			}
		})
	}
	wg.Go(func() { // document versions, committed raw by an admin
		for n := 1; !stopped(); n++ {
			var st struct {
				Version int64 `json:"version"`
			}
			if _, err := api.do(ctx, "GET", api.ingress+"/workspace/status", editor.SessionToken, nil, &st); err != nil {
				fail("status: %v", err)
				return
			}
			var res struct {
				Version int64 `json:"version"`
			}
			if _, err := api.do(ctx, "POST", api.ingress+"/workspace/commit", editor.SessionToken, map[string]any{
				"base_version": st.Version, "summary": "log", "content": fmt.Sprintf("# Recovery\n\n## Log\n\nentry %d\n", n)}, &res); err != nil {
				fail("commit: %v", err)
				return
			}
			record(lsAck{version: res.Version})
			time.Sleep(50 * time.Millisecond)
		}
	})

	time.Sleep(loadFor)
	// The disaster: both processes die at once, Litestream first so that
	// nothing ce acknowledges from here on can reach the replica.
	killAt := time.Now()
	ls.Cmd.Process.Signal(syscall.SIGKILL)
	syscall.Kill(cePID, syscall.SIGKILL)
	close(stop)
	<-ls.Done()
	waitGone(t, cePID)
	wg.Wait()
	for _, u := range unexpected {
		t.Errorf("unexpected answer under load: %s", u)
	}

	// Restore into a new directory, beside a copy of the Markdown file.
	restoredDB := filepath.Join(restored, "room.md.commonroom.db")
	if out, err := exec.Command(bin, "restore", "-config", cfg, "-o", restoredDB, db).CombinedOutput(); err != nil {
		t.Fatalf("litestream restore: %v\n%s", err, out)
	}
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "room.md"), text, 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := loadSnapshot(ctx, restoredDB, true)
	if err != nil {
		t.Fatalf("reading the restored sidecar: %v", err)
	}
	if len(snap.integrity) != 1 || snap.integrity[0] != "ok" {
		t.Errorf("integrity_check of the restored sidecar: %v", snap.integrity)
	}

	// What came back, against what was acknowledged.
	bound := killAt.Add(-syncEvery - lsMonitor)
	var r lsResult
	var newestAt time.Time
	oldestLost := killAt
	for _, a := range acks {
		if a.at.After(killAt) {
			continue
		}
		r.acked++
		present := false
		if a.state == "" {
			_, present = snap.versions[a.version]
		} else if h, ok := snap.handoffs[a.handoff]; ok {
			_, hasTask := snap.tasks[a.task]
			switch {
			case a.state == "cancelled":
				present = h.status == "cancelled"
			default:
				rk, known := lsRank[h.status]
				present = h.status == "cancelled" || (known && rk >= lsRank[a.state])
			}
			if present && !hasTask {
				t.Errorf("handoff %s came back without its task %s", a.handoff, a.task)
			}
		}
		if present {
			r.recovered++
			if a.at.After(newestAt) {
				newestAt = a.at
			}
			continue
		}
		r.lost++
		if a.at.Before(oldestLost) {
			oldestLost = a.at
		}
		if a.at.Before(bound) {
			what := fmt.Sprintf("version %d", a.version)
			if a.state != "" {
				what = fmt.Sprintf("handoff %s %s", a.handoff, a.state)
			}
			t.Errorf("%s was acknowledged %s before the kill (more than sync %s + monitor %s) and is not in the restored sidecar",
				what, killAt.Sub(a.at).Round(time.Millisecond), syncEvery, lsMonitor)
		}
	}
	if r.recovered == 0 {
		t.Fatalf("nothing acknowledged came back (%d acknowledged)", r.acked)
	}
	r.newest = killAt.Sub(newestAt)
	if r.lost > 0 {
		r.oldestLost = killAt.Sub(oldestLost)
	}

	// ce serve on the restored directory: the same room, the old sessions
	// admitted, a handoff and its task readable through the API.
	var probe lsAck
	for _, a := range acks {
		if a.state != "" && a.at.Before(bound) {
			probe = a
		}
	}
	srv := startServer(t, restored, filepath.Join(restored, "room.md"))
	if srv.Banner.WorkspaceID != b.WorkspaceID {
		t.Errorf("the restored room is %s, the original %s", srv.Banner.WorkspaceID, b.WorkspaceID)
	}
	api2 := &lsAPI{hc: api.hc}
	for _, l := range ls6 {
		for _, s := range []sessionGrant{l.owner, l.worker, l.approver} {
			if _, err := api2.do(ctx, "GET", srv.Owner.IngressURL+"/workspace/status", s.SessionToken, nil, nil); err != nil {
				t.Errorf("a session joined before the load is not admitted after the restore: %v", err)
			}
		}
	}
	if probe.handoff != "" {
		owner := ls6[0].owner.SessionToken
		for _, l := range ls6 {
			if h, ok := snap.handoffs[probe.handoff]; ok && h.owner == l.owner.ParticipantID {
				owner = l.owner.SessionToken
			}
		}
		if _, err := api2.do(ctx, "GET", srv.Owner.IngressURL+"/workspace/handoff?handoff_id="+probe.handoff, owner, nil, nil); err != nil {
			t.Errorf("reading a recovered handoff: %v", err)
		}
		if _, err := api2.do(ctx, "GET", srv.Owner.IngressURL+"/workspace/task?task_id="+probe.task, owner, nil, nil); err != nil {
			t.Errorf("reading a recovered task: %v", err)
		}
	}
	if code := srv.terminate(); code != 0 {
		t.Errorf("the restored room exited %d", code)
	}

	// Without the Markdown file: ce serve writes it back from the newest
	// version in the restored sidecar.
	if alsoWithoutFile {
		bare := filepath.Join(dir, "restored-without-file")
		if err := os.Mkdir(bare, 0o700); err != nil {
			t.Fatal(err)
		}
		bareDB := filepath.Join(bare, "room.md.commonroom.db")
		if out, err := exec.Command(bin, "restore", "-config", cfg, "-o", bareDB, db).CombinedOutput(); err != nil {
			t.Fatalf("litestream restore: %v\n%s", err, out)
		}
		srv := startServer(t, bare, filepath.Join(bare, "room.md"))
		got, err := os.ReadFile(filepath.Join(bare, "room.md"))
		if err != nil {
			t.Fatalf("the document was not written back: %v", err)
		}
		if snap.newest == nil || string(got) != snap.newest.content {
			t.Errorf("the document written back is %q, want the newest restored version's text", got)
		}
		srv.terminate()
	}
	return r
}

// waitGone waits until pid has exited (gone, or a zombie nobody reaps).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(stopTimeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'Z' {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("ce (pid %d) still runs %s after SIGKILL", pid, stopTimeout)
}

// shellQuote quotes s for litestream's -exec, which splits like a shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
