package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/commonroom/ce/room"
)

// The watch scenario measures how long an edit made outside the room takes
// to reach a live stream: an editor-style save (a temporary file renamed
// over the document) at a random moment, then the first
// notifications/resources/updated for the document whose version holds
// that save (or a later one: a save overwritten before the room looked is
// seen when its successor is). Nothing reads the room while saves are
// made, since a read makes the room look at the file at once; versions are
// matched to saves afterwards by reading the sidecar directly, which the
// room does not notice. The room must be quiet otherwise (its own room, or
// an idle --target-file room whose document the scenario overwrites and
// then restores).

// watchTarget names the goal in the targets table.
const watchTarget = "outside save → resources/updated p99"

// watchResult is one run of the scenario.
type watchResult struct {
	Saves    int     `json:"saves"`
	GapMs    int     `json:"mean_gap_ms"` // saves are spaced uniformly in [gap/2, 3·gap/2]
	Versions int     `json:"versions"`    // versions the saves became (several saves may share one)
	Frames   int     `json:"frames"`
	Latency  latency `json:"save_to_frame"`
}

// watchMarker ends every saved document, so each version names the save it holds.
var watchMarker = regexp.MustCompile(`<!-- bench save (\d+) -->`)

func scenarioWatch(ctx context.Context, e *env) error {
	c, err := e.room(ctx, "watch", false)
	if err != nil {
		return err
	}
	defer e.release(c)
	saves, gap := 100, 500*time.Millisecond
	if e.cfg.smoke {
		saves, gap = 10, 200*time.Millisecond
	}
	rc := newRoomClient(c, 4)
	defer rc.close()
	ss, err := rc.sessions(ctx, "watch-reader", 1, "read")
	if err != nil {
		return err
	}
	var status struct {
		WorkspaceID string `json:"workspace_id"`
		Version     int64  `json:"version"`
	}
	tr, err := rc.mcp(ss[0]).tool(ctx, "workspace_status", map[string]any{})
	if err == nil {
		err = json.Unmarshal(tr.StructuredContent, &status)
	}
	if err != nil || status.WorkspaceID == "" {
		return fmt.Errorf("workspace_status: %v %s", err, clip(tr.StructuredContent))
	}
	original, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	if !c.owned() {
		defer os.WriteFile(c.file, original, 0o644) // the target's text comes back (as a version of its own)
	}
	frames, err := openResourceStream(ctx, c.ingressURL, ss[0].Token, "commonroom://workspace/"+status.WorkspaceID)
	if err != nil {
		return err
	}
	defer frames.close()

	e.waitQuiet(ctx, "watch")
	e.logf("watch: %d editor-style saves, about %s apart, each timed to its frame", saves, gap)
	savedAt := make([]time.Time, saves+1) // by save number, from 1
	for i := 1; i <= saves && ctx.Err() == nil; i++ {
		text := fmt.Sprintf("%s\nEdited outside the room.\n\n<!-- bench save %d -->\n", bytes.TrimRight(original, "\n"), i)
		if err := editorSave(c.file, text); err != nil {
			return err
		}
		savedAt[i] = time.Now()
		if i < saves {
			pause := gap/2 + rand.N(gap)
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Wait for the version holding the last save, then for its frame. The
	// old room looked only when its sweeper woke (every 30 s), so allow more.
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: c.file + ".commonroom.db"}).String()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(90 * time.Second)
	var marks []int // marks[k] is the save held by version status.Version+1+k
	for {
		marks, err = watchVersions(ctx, db, status.Version)
		if err != nil {
			return err
		}
		if len(marks) > 0 && marks[len(marks)-1] == saves && frames.count() >= len(marks) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the last save was not a version with its frame within 90s: %d versions, %d frames", len(marks), frames.count())
		}
		select {
		case <-frames.wake:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	at := frames.times()
	if len(at) != len(marks) {
		e.rep.violation(fmt.Sprintf("watch: %d resources/updated frames for %d versions (one each expected)", len(at), len(marks)))
	}
	var h hist
	k := 0
	for i := 1; i <= saves; i++ {
		for k < len(marks) && marks[k] < i {
			k++
		}
		if k >= len(marks) || k >= len(at) {
			e.rep.violation(fmt.Sprintf("watch: save %d reached no version", i))
			break
		}
		h.add(at[k].Sub(savedAt[i]))
	}
	res := &watchResult{Saves: saves, GapMs: int(gap / time.Millisecond), Versions: len(marks), Frames: len(at), Latency: h.summary()}
	e.rep.mu.Lock()
	e.rep.Watch = res
	e.rep.mu.Unlock()
	e.rep.printWatch()
	return nil
}

// watchVersions reads, straight from the sidecar, which save each version
// after base holds, oldest first. A version without a marker (someone
// else's change) is an error: the room was not quiet.
func watchVersions(ctx context.Context, db *sql.DB, base int64) ([]int, error) {
	rows, err := db.QueryContext(ctx, `SELECT version FROM versions WHERE version > ? ORDER BY version`, base)
	if err != nil {
		return nil, err
	}
	var vs []int64
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, err
		}
		vs = append(vs, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var marks []int
	for _, v := range vs {
		content, err := room.VersionText(ctx, db, v) // the texts are stored as chunks
		if err != nil {
			return nil, err
		}
		m := watchMarker.FindStringSubmatch(content)
		if m == nil {
			return nil, fmt.Errorf("version %d holds no bench save: the room was not quiet", v)
		}
		n, _ := strconv.Atoi(m[1])
		marks = append(marks, n)
	}
	return marks, nil
}

// editorSave writes text as most editors save: a new file beside the
// document, renamed over it.
func editorSave(path, text string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".bench-swp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// resourceStream is one subscriptions/listen following a resource; it
// keeps the arrival time of every notifications/resources/updated frame.
type resourceStream struct {
	cancel context.CancelFunc
	done   chan struct{}
	wake   chan struct{} // capacity 1: a frame arrived
	mu     sync.Mutex
	at     []time.Time
}

var resourcesUpdated = []byte(`"method":"notifications/resources/updated"`)

func openResourceStream(ctx context.Context, ingressURL, token, uri string) (*resourceStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	body := encodeRequest(1, "subscriptions/listen", map[string]any{
		"notifications": map[string]any{"resourceSubscriptions": []string{uri}},
	})
	req, err := http.NewRequestWithContext(sctx, "POST", ingressURL+"/mcp", bytes.NewReader(body))
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	res, err := (&http.Client{}).Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	br := bufio.NewReader(res.Body)
	first, err := br.ReadBytes('\n')
	if res.StatusCode != http.StatusOK || err != nil || !bytes.Contains(first, []byte("notifications/subscriptions/acknowledged")) {
		res.Body.Close()
		cancel()
		return nil, fmt.Errorf("subscriptions/listen: HTTP %d, first line %s (%v)", res.StatusCode, clip(first), err)
	}
	s := &resourceStream{cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		for {
			line, err := br.ReadBytes('\n')
			if bytes.HasPrefix(line, []byte("data: ")) && bytes.Contains(line, resourcesUpdated) {
				now := time.Now()
				s.mu.Lock()
				s.at = append(s.at, now)
				s.mu.Unlock()
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

func (s *resourceStream) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

func (s *resourceStream) times() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at...)
}

func (s *resourceStream) close() {
	s.cancel()
	<-s.done
}

func (r *report) printWatch() {
	w := r.Watch
	r.header("watch (an editor's save → notifications/resources/updated on a live stream)")
	r.row("watch", "saves, versions, frames", fmt.Sprintf("%d, %d, %d", w.Saves, w.Versions, w.Frames), "")
	r.row("watch", "save → frame p50 / p99 / max (ms)", fmt.Sprintf("%s / %s / %s", num(w.Latency.P50Ms), num(w.Latency.P99Ms), num(w.Latency.MaxMs)), "")
}
