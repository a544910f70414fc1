package crashtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestColdReadsDoNotStall restarts a room (kill -9, as a crash would) and
// has many sessions read at once while the restarted process has prepared
// nothing yet. Every read must be answered promptly: a read that waits on
// another read's statement preparation while holding a pooled connection
// would stall the whole read path until the clients give up.
func TestColdReadsDoNotStall(t *testing.T) {
	const readers = 24
	dir := t.TempDir()
	file := filepath.Join(dir, "room.md")
	if err := os.WriteFile(file, []byte("# Cold\n\ntext\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(hc.CloseIdleConnections)
	w := &world{liveTasks: map[string]liveTask{}}
	g := newGate()
	w.gate, w.led = g, &ledger{}
	w.c = &client{gate: g, hc: hc, w: w}

	srv := startServer(t, dir, file)
	g.open(newGen(1, srv))
	inv, err := w.invite(ctx, []string{"read", "propose", "checkout"})
	if err != nil {
		t.Fatal(err)
	}
	var ps []*participant
	for i := 0; i < readers; i++ {
		p, err := w.join(ctx, inv.URI, fmt.Sprintf("reader-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}

	for round := 1; round <= 3; round++ {
		srv.kill9()
		srv = startServer(t, dir, file)
		cur := newGen(round+1, srv)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var slow []string
		start := make(chan struct{})
		for _, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
				defer rcancel()
				began := time.Now()
				var st struct {
					Version int64 `json:"version"`
				}
				err := w.c.do(rctx, cur, ingress, p.token, "GET", "/workspace/status", nil, &st)
				if err != nil || time.Since(began) > 5*time.Second {
					mu.Lock()
					slow = append(slow, fmt.Sprintf("%s: GET /workspace/status took %v: %v", p.name, time.Since(began).Round(time.Millisecond), err))
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		for _, s := range slow {
			t.Errorf("restart %d: %s", round, s)
		}
		if len(slow) > 0 {
			t.Fatalf("restart %d: %d of %d concurrent first reads stalled (the read pool has 8 connections)", round, len(slow), readers)
		}
	}
}
