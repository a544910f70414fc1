package room_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// proseWords is the vocabulary proseDoc draws from: varied enough that
// the text compresses about as well as real Markdown prose does, which a
// repeated line (benchDoc) does not.
var proseWords = strings.Fields(`the a of to and in that is for it as with was on be by this are or from at
an which but not have has had were can will would should could may might must room version document
section heading agent handoff task proposal commit lease review change edit owner reader writer stream
event sidecar file text line word paragraph note idea plan goal risk issue design measure memory store
chunk delta snapshot history diff base current older newer bytes pages index table query engine actor
listen server client session invite token capability principal sweeper watcher batch queue frame`)

// proseLines returns numbered lines of pseudo-random prose under a heading
// every 40 lines, about size bytes in all; the same seed gives the same text.
func proseLines(seed uint64, size int) []string {
	rng := rand.New(rand.NewPCG(seed, 17))
	var lines []string
	total := 0
	for i := 0; total < size; i++ {
		var l string
		if i%40 == 0 {
			l = fmt.Sprintf("## Part %d\n", i/40)
		} else {
			l = proseLine(rng)
		}
		lines = append(lines, l)
		total += len(l)
	}
	return lines
}

func proseLine(rng *rand.Rand) string {
	var b strings.Builder
	n := 8 + rng.IntN(12)
	for j := range n {
		if j > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(proseWords[rng.IntN(len(proseWords))])
	}
	b.WriteString(".\n")
	return b.String()
}

// usedBytes is the sidecar's size in pages that hold data (page count less
// the free list, WAL included): what committing a version cost in storage,
// independent of when the WAL is checkpointed.
func usedBytes(tb testing.TB, db *sql.DB) int64 {
	tb.Helper()
	var pages, free, size int64
	if err := db.QueryRow(`SELECT (SELECT page_count FROM pragma_page_count()), (SELECT freelist_count FROM pragma_freelist_count()), (SELECT page_size FROM pragma_page_size())`).
		Scan(&pages, &free, &size); err != nil {
		tb.Fatal(err)
	}
	return (pages - free) * size
}

// BenchmarkCommitOneLine is a raw commit of a one-line change to a 1 MiB
// document of prose (a different line each time), through the actor:
// stored-B/op is how much the sidecar grew per commit, and file-B/op the
// growth of the sidecar file itself after a WAL checkpoint once the room
// is closed.
func BenchmarkCommitOneLine(b *testing.B) {
	lines := proseLines(1, 1<<20)
	d := newDocRoom(b, withRealClock(), withDocText(strings.Join(lines, "")))
	rng := rand.New(rand.NewPCG(2, 3))
	d.rawCommit(strings.Join(lines, "") + "\n") // the first commit of a room may set up what later ones reuse
	before := usedBytes(b, d.store.Reader)
	fileBefore := checkpointedSize(b, d)
	n := 0
	for b.Loop() {
		i := 1 + rng.IntN(len(lines)-1)
		if i%40 == 0 {
			i++
		}
		lines[i] = proseLine(rng)
		d.rawCommit(strings.Join(lines, "") + "\n")
		n++
	}
	used := usedBytes(b, d.store.Reader) - before
	b.ReportMetric(float64(used)/float64(n), "stored-B/op")
	b.ReportMetric(float64(checkpointedSize(b, d)-fileBefore)/float64(n), "file-B/op")
}

// checkpointedSize closes the room, checkpoints the WAL into the sidecar
// and returns the sidecar file's size; the room is open again after it.
func checkpointedSize(tb testing.TB, d docRoom) int64 {
	tb.Helper()
	d.close()
	db, err := sql.Open("sqlite", "file:"+room.SidecarPath(d.doc))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		tb.Fatal(err)
	}
	db.Close()
	st, err := os.Stat(room.SidecarPath(d.doc))
	if err != nil {
		tb.Fatal(err)
	}
	d.open()
	return st.Size()
}

// BenchmarkLargeDocument opens a room on a 30 MB document of prose (a
// fresh sidecar), then has it pick up an outside edit of one line (the
// sweeper's file sync), and reports per byte of the document the bytes
// allocated by each step (open-alloc, edit-alloc) and the heap still live
// after each (open-live, edit-live; the room holds the text and its
// regions): what serving a large document costs in memory.
func BenchmarkLargeDocument(b *testing.B) {
	lines := proseLines(9, 30<<20)
	text := strings.Join(lines, "")
	lines[len(lines)/2] = "an outside edit of one line.\n"
	edited := strings.Join(lines, "")
	lines = nil
	var openB, editB, openLive, editLive float64
	live := func(base uint64) float64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) - float64(base)
	}
	for b.Loop() {
		b.StopTimer()
		var m0, m1, m1e, m2 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		b.StartTimer()
		d := newDocRoom(b, withRealClock(), withDocText(text))
		runtime.ReadMemStats(&m1)
		b.StopTimer()
		openLive += live(m0.HeapAlloc)
		b.StartTimer()
		if err := os.WriteFile(d.doc, []byte(edited), 0o644); err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&m1e)
		d.sweep()
		runtime.ReadMemStats(&m2)
		b.StopTimer()
		editLive += live(m0.HeapAlloc)
		b.StartTimer()
		if d.version() != 2 {
			b.Fatalf("the outside edit is not a version: at %d", d.version())
		}
		d.close()
		openB += float64(m1.TotalAlloc - m0.TotalAlloc)
		editB += float64(m2.TotalAlloc - m1e.TotalAlloc)
	}
	per := float64(b.N) * float64(len(text))
	b.ReportMetric(openB/per, "open-alloc/docbyte")
	b.ReportMetric(editB/per, "edit-alloc/docbyte")
	b.ReportMetric(openLive/per, "open-live/docbyte")
	b.ReportMetric(editLive/per, "edit-live/docbyte")
}
