package room_test

import (
	"encoding/binary"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/commonroom/ce/room"
)

// BenchmarkLifecycleWALPages says which b-trees the lifecycle's commits
// dirty: each WAL frame is one page a COMMIT wrote (two pwrites, and a page
// a checkpoint copies later), so pages per command, per table or index, is
// where the writer's I/O goes, whatever the machine's load. 64 agents run
// 2,000 lifecycles to give the indexes a room's size, nothing checkpoints,
// then b.N lifecycles are measured: the frames they appended are read from
// the WAL's frame headers and each page is named by dbstat. Reported:
// pages/cmd in all, and <b-tree>-pages/cmd for each b-tree with at least
// 0.02 pages per command.
//
//	go test -run '^$' -bench LifecycleWALPages -benchtime 1000x ./room
func BenchmarkLifecycleWALPages(b *testing.B) {
	room.SetVerifyWriterCache(false)
	defer room.SetVerifyWriterCache(true)
	e := newEnv(b, withRealClock(), withWALAutocheckpoint(0), withLimits(func(l *room.Limits) {
		l.MaxLiveSessions, l.MaxSessionsPerInvite = 512, 512
		l.MaxActiveTasks, l.MaxTasksPerParticipant = 1000, 1000
	}))
	const callers = 64
	agents := lifecycleAgents(e, callers)
	run := func(n int64) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for i := range callers {
			a := agents[i]
			wg.Go(func() {
				for next.Add(1) <= n {
					res, err := e.create(a.creator, room.CreateHandoffInput{Summary: "benchmark work"})
					if err == nil {
						err = a.finish(e, res.Handoff.HandoffID)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	run(2000)
	wal := room.SidecarPath(e.eng.DocPath) + "-wal"
	st, err := os.Stat(wal)
	if err != nil {
		b.Fatal(err)
	}
	c0 := e.r.Stats().Commands.Load()
	b.ResetTimer()
	run(int64(b.N))
	b.StopTimer()
	cmds := float64(max(e.r.Stats().Commands.Load()-c0, 1))
	data, err := os.ReadFile(wal)
	if err != nil {
		b.Fatal(err)
	}
	var pageSize int64
	if err := e.store.Reader.QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
		b.Fatal(err)
	}
	owner := map[uint32]string{1: "page-1"}
	rows, err := e.store.Reader.Query(`SELECT name, pageno FROM dbstat`)
	if err != nil {
		b.Fatal(err)
	}
	for rows.Next() {
		var name string
		var pg uint32
		if err := rows.Scan(&name, &pg); err != nil {
			b.Fatal(err)
		}
		owner[pg] = name
	}
	rows.Close()
	by := map[string]int{}
	frames := 0
	for p := st.Size(); p+24+pageSize <= int64(len(data)); p += 24 + pageSize {
		name := owner[binary.BigEndian.Uint32(data[p:])]
		if name == "" {
			name = "freed"
		}
		by[strings.TrimPrefix(name, "sqlite_autoindex_")]++
		frames++
	}
	b.ReportMetric(float64(frames)/cmds, "pages/cmd")
	names := make([]string, 0, len(by))
	for k := range by {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v := float64(by[k]) / cmds; v >= 0.02 {
			b.ReportMetric(v, k+"-pages/cmd")
		}
	}
}
