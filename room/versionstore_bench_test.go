package room_test

import (
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
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
