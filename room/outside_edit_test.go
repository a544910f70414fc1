package room_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commonroom/ce/room"
)

// outsideEditCommits is how many section commits each outside-edit run
// makes: 1,000 (issue 13 item 1 asks for 0 lost over 1,000; about 5 s
// each here), or 300 under the race detector, where the growing document
// makes 1,000 take minutes. CE_OUTSIDE_EDIT_COMMITS overrides it.
func outsideEditCommits(t *testing.T) int {
	n := 1000
	if raceEnabled {
		n = 300
	}
	if s := os.Getenv("CE_OUTSIDE_EDIT_COMMITS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("CE_OUTSIDE_EDIT_COMMITS=%q", s)
		}
		n = v
	}
	return n
}

// outsideDoc has the section the commits change (Goals) before the one the
// outside writers append to (Log, the last): a commit's section is untouched
// by an append, so every commit can land.
const outsideDoc = "# Doc\n\n## Goals\n\nstart\n\n## Log\n\n"

// outsideWriter runs write every few milliseconds until stopped and keeps
// the marker of every write that completed. It never gets more than
// outsidePaceAhead writes ahead of the commits' attempts (pace): on a
// machine so loaded that commits crawl, a clock-paced writer would grow the
// document faster than the room can parse it, each commit would get slower
// still, and the run would never end (it once ran past ten minutes under
// -race). On a healthy machine the commits outrun the writer and the pace
// never holds it back.
type outsideWriter struct {
	mu      sync.Mutex
	markers []string
	errs    []error
	pace    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// outsidePaceAhead is how many writes the outside writer may make beyond
// one per commit attempt.
const outsidePaceAhead = 4

func startOutsideWriter(pause func() time.Duration, write func(i int) (string, error)) *outsideWriter {
	w := &outsideWriter{pace: make(chan struct{}, outsidePaceAhead), stop: make(chan struct{}), done: make(chan struct{})}
	for range outsidePaceAhead {
		w.pace <- struct{}{}
	}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			case <-w.pace:
			}
			m, err := write(i)
			w.mu.Lock()
			if err != nil {
				w.errs = append(w.errs, err)
			} else {
				w.markers = append(w.markers, m)
			}
			w.mu.Unlock()
			select {
			case <-w.stop:
				return
			case <-time.After(pause()):
			}
		}
	}()
	return w
}

// attempted lets the writer make one more write: a commit was attempted.
func (w *outsideWriter) attempted() {
	select {
	case w.pace <- struct{}{}:
	default: // the writer is already that far ahead
	}
}

func (w *outsideWriter) finish() ([]string, []error) {
	close(w.stop)
	<-w.done
	return w.markers, w.errs
}

// appendLine is an appender's write: open O_APPEND, write one line, close.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// editorSave is an editor's save: read the file, add a line, write a
// temporary file beside it and rename it over the file.
func editorSave(path, line string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(path), "editor-save.swp")
	if err := os.WriteFile(tmp, append(b, line...), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// commitSectionsUnderOutsideEdits makes n raw commits of the Goals section
// back to back (a stale base is retried against the new version) while w
// writes, then reports how many of the writer's markers are in neither the
// final file nor any stored version.
func commitSectionsUnderOutsideEdits(t *testing.T, d docRoom, n int, w *outsideWriter) {
	t.Helper()
	op := d.op()
	stale := 0
	start := time.Now()
	// The base is the version current when the command runs (after
	// recording the file's edits so far): what is measured is the window
	// between that read and the file's replacement.
	commit := func(i int) error {
		_, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (room.CommitResult, error) {
			if err := eng.SyncFile(tx); err != nil {
				return room.CommitResult{}, err
			}
			cur, err := eng.CurrentDoc(tx.Context(), tx.Querier())
			if err != nil {
				return room.CommitResult{}, err
			}
			return eng.Commit(tx, op, room.CommitInput{BaseVersion: refOf(cur.Version), Summary: fmt.Sprintf("commit %d", i),
				Target: "Goals", Content: refOf(fmt.Sprintf("## Goals\n\ncommit %d\n\n", i))})
		})
		return err
	}
	for i := 0; i < n; {
		err := commit(i)
		w.attempted()
		switch {
		case err == nil:
			i++
		case room.ErrorKind(err) == room.KindStaleVersion:
			stale++ // an outside edit came between; try again
		default:
			w.finish()
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	markers, errs := w.finish()
	if len(errs) > 0 {
		t.Fatalf("the outside writer failed %d times, first: %v", len(errs), errs[0])
	}
	d.sweep() // records the file's last outside edit, if any
	final := d.fileText()
	kept := map[string]bool{}
	for _, l := range strings.SplitAfter(final, "\n") {
		kept[l] = true
	}
	versions := 0
	for v := int64(1); v <= d.version(); v++ {
		c, err := room.VersionText(context.Background(), d.store.Reader, v)
		if err != nil {
			t.Fatal(err)
		}
		versions++
		for _, l := range strings.SplitAfter(c, "\n") {
			kept[l] = true
		}
	}
	var lost []string
	for _, m := range markers {
		if !kept[m] {
			lost = append(lost, strings.TrimSpace(m))
		}
	}
	t.Logf("%d commits in %v (%.0f/s), %d stale retries, %d outside writes, %d versions, %d lost",
		n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), stale, len(markers), versions, len(lost))
	if len(markers) == 0 {
		t.Fatal("the outside writer wrote nothing")
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d outside writes are in neither the file nor any version: %v", len(lost), len(markers), lost[:min(len(lost), 10)])
	}
	// While the writer ran, an editor's save that read the file before a
	// commit replaced it could rename older text over that commit: the
	// editor's own lost update, which the room keeps as a version like any
	// outside edit. With the writer stopped, the room's own commit must
	// reach the file.
	if err := commit(n); err != nil {
		t.Fatalf("the commit after the outside writer stopped: %v", err)
	}
	if final := d.fileText(); !strings.Contains(final, fmt.Sprintf("commit %d\n", n)) {
		t.Fatalf("the last commit is not in the file:\n%s", final)
	}
}

// TestOutsideEdits_AppendsDuringCommitsAreNeverLost is issue 13 item 1's
// first reproduction: a line appended every ~10 ms (open O_APPEND, write,
// close) while section commits run back to back. Every appended line must
// end up in the file or in a stored version.
func TestOutsideEdits_AppendsDuringCommitsAreNeverLost(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withDocText(outsideDoc))
	w := startOutsideWriter(func() time.Duration { return 10 * time.Millisecond }, func(i int) (string, error) {
		line := fmt.Sprintf("appended line %d\n", i)
		return line, appendLine(d.doc, line)
	})
	commitSectionsUnderOutsideEdits(t, d, outsideEditCommits(t), w)
}

// TestOutsideEdits_EditorSavesDuringCommitsAreNeverLost is the second: an
// editor-style save (write a temporary file, rename it over the document)
// every 2–20 ms against back-to-back section commits. Every save's text
// must end up in the file or in a stored version.
func TestOutsideEdits_EditorSavesDuringCommitsAreNeverLost(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withDocText(outsideDoc))
	w := startOutsideWriter(func() time.Duration { return time.Duration(2+rand.IntN(19)) * time.Millisecond }, func(i int) (string, error) {
		line := fmt.Sprintf("saved in an editor %d\n", i)
		return line, editorSave(d.doc, line)
	})
	commitSectionsUnderOutsideEdits(t, d, outsideEditCommits(t), w)
}
