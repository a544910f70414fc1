package actor

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commonroom/ce/listen"
	"github.com/commonroom/ce/room"
	"github.com/fsnotify/fsnotify"
)

// watchWait bounds every wait for something the watcher must cause. It is
// generous on purpose: these tests prove that it happens, never how fast
// (bench/scenario_watch.go measures that).
const watchWait = 20 * time.Second

const watchDoc = "# Idea\n\nhello\n\n## Goals\n\nship\n"

// watchedRoom opens a room in its own directory whose only way to notice an
// outside edit is the watcher: the sweeper sleeps an hour, nothing reads
// through Read (which syncs too), and unless mod says otherwise the
// fallback poll also waits an hour, so events alone explain a sync. Its
// publisher is a real hub.
func watchedRoom(t *testing.T, mod func(*Config)) (*testRoom, *listen.Hub) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "room")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte(watchDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	hub := listen.NewHub(listen.Config{Encode: encodeResourceURI})
	t.Cleanup(hub.Close) // after the room's cleanup, registered below
	tr := openRoomAt(t, doc, func(c *Config) {
		c.Publisher = hub
		c.MaxSweepWait = time.Hour
		c.Watch = WatchConfig{Enabled: true, Poll: time.Hour}
		if mod != nil {
			mod(c)
		}
	})
	return tr, hub
}

// uriFrame is a frame that is just a resource URI, as JSON.
type uriFrame []byte

func (f uriFrame) AppendTo(dst, _ []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, f...)
	return append(dst, "\n\n"...)
}

// encodeResourceURI is the test hub's encoder: it sends the URI of each
// ResourceChanged and nothing else, so the tests see what the actor
// published without any front door's wire format.
func encodeResourceURI(m listen.Message) (listen.Frame, bool) {
	c, ok := m.Change.(ResourceChanged)
	if !ok {
		return nil, true // not what these tests follow
	}
	b, err := json.Marshal(c.URI)
	return uriFrame(b), err == nil
}

// resourceFrames opens a real SSE stream from the hub, subscribed to uri's
// updates, and returns the uri of every ResourceChanged frame it reads, in
// order.
func resourceFrames(t *testing.T, hub *listen.Hub, uri string) <-chan string {
	t.Helper()
	sub, err := hub.Subscribe(listen.SubscribeRequest{Topics: []string{ResourceTopic(uri)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sub.Serve(w, r, listen.ServeOptions{})
	}))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(srv.Close)
	t.Cleanup(sub.Close)
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 256)
	go func() {
		defer close(out)
		res, err := srv.Client().Do(req)
		if err != nil {
			return
		}
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var uri string
			if json.Unmarshal([]byte(data), &uri) != nil {
				continue
			}
			select {
			case out <- uri:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// expectFrame waits for a resources/updated frame naming uri.
func expectFrame(t *testing.T, frames <-chan string, uri string) {
	t.Helper()
	timeout := time.After(watchWait)
	for {
		select {
		case got, ok := <-frames:
			if !ok {
				t.Fatalf("the stream ended before a resources/updated for %s", uri)
			}
			if got == uri {
				return
			}
		case <-timeout:
			t.Fatalf("no resources/updated for %s within %v: the outside edit was not noticed", uri, watchWait)
		}
	}
}

// latest is the newest version's number, source and text.
func latest(t *testing.T, tr *testRoom) (v int64, source, content string) {
	t.Helper()
	if err := tr.store.Reader.QueryRow(`SELECT version, source FROM versions ORDER BY version DESC LIMIT 1`).
		Scan(&v, &source); err != nil {
		t.Fatal(err)
	}
	content, err := room.VersionText(context.Background(), tr.store.Reader, v)
	if err != nil {
		t.Fatal(err)
	}
	return v, source, content
}

// expectExternal checks that the newest version is the file's text,
// recorded as an outside edit.
func expectExternal(t *testing.T, tr *testRoom) int64 {
	t.Helper()
	want, err := os.ReadFile(tr.doc)
	if err != nil {
		t.Fatal(err)
	}
	v, source, content := latest(t, tr)
	if source != "external" || content != string(want) {
		t.Fatalf("newest version %d is %s %q, want the file's text %q recorded as external", v, source, content, want)
	}
	return v
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// editorSave saves as most editors do: a new file beside the document,
// renamed over it, so the document's inode changes.
func editorSave(t *testing.T, path, text string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".swp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// logTap hands every log record to a channel, so a test waits for what the
// watcher logs instead of polling a buffer.
type logTap struct{ ch chan slog.Record }

func newLogTap() logTap { return logTap{ch: make(chan slog.Record, 1024)} }

func (l logTap) Enabled(context.Context, slog.Level) bool { return true }
func (l logTap) Handle(_ context.Context, r slog.Record) error {
	select {
	case l.ch <- r:
	default:
	}
	return nil
}
func (l logTap) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logTap) WithGroup(string) slog.Handler      { return l }

// waitLog waits for a record whose message starts with prefix.
func (l logTap) waitLog(t *testing.T, prefix string) slog.Record {
	t.Helper()
	timeout := time.After(watchWait)
	for {
		select {
		case r := <-l.ch:
			if strings.HasPrefix(r.Message, prefix) {
				return r
			}
		case <-timeout:
			t.Fatalf("no log %q within %v", prefix, watchWait)
		}
	}
}

// drained counts the records logged so far whose message starts with prefix.
func (l logTap) drained(prefix string) int {
	n := 0
	for {
		select {
		case r := <-l.ch:
			if strings.HasPrefix(r.Message, prefix) {
				n++
			}
		default:
			return n
		}
	}
}

func TestWatch_OutsideEditBecomesAVersionAndANotice(t *testing.T) {
	cases := []struct {
		name string
		edit func(t *testing.T, path string)
	}{
		{"an append is synced", func(t *testing.T, path string) {
			appendTo(t, path, "\nappended by hand\n")
		}},
		{"an in-place rewrite is synced", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("# Idea\n\nrewritten in place, longer than before\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"an editor's save by rename is synced", func(t *testing.T, path string) {
			editorSave(t, path, "# Idea\n\nsaved by an editor\n\n## Goals\n\nship\n")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, hub := watchedRoom(t, nil)
			frames := resourceFrames(t, hub, tr.Engine().DocumentURI())
			c.edit(t, tr.doc)
			expectFrame(t, frames, tr.Engine().DocumentURI())
			if v := expectExternal(t, tr); v != 2 {
				t.Fatalf("the edit is version %d, want 2", v)
			}
			st := tr.Stats()
			if st.FileSyncs.Load() == 0 || st.WatchEvents.Load() == 0 {
				t.Fatalf("file syncs %d, watch events %d: the edit was not seen by the watcher", st.FileSyncs.Load(), st.WatchEvents.Load())
			}
			if n := st.Sweeps.Load(); n != 0 {
				t.Fatalf("%d sweeps ran; this test needs the sweeper idle", n)
			}
		})
	}
}

// TestWatch_OwnWritesCauseNoSync: the sidecar's files live beside the
// document and are written on every commit, and the room's own commits
// replace the document; none of that may cost a sync. The debounce is cut
// to a millisecond so each own commit is looked at on its own, not merged
// into the next burst. The last outside append is the barrier: its sync
// must be the only one.
func TestWatch_OwnWritesCauseNoSync(t *testing.T) {
	tr, hub := watchedRoom(t, func(c *Config) { c.Watch.Quiet, c.Watch.MaxDelay = time.Millisecond, time.Millisecond })
	ctx := context.Background()
	uri := tr.Engine().DocumentURI()
	frames := resourceFrames(t, hub, uri)
	for range 20 {
		if _, err := invite(ctx, tr.Room); err != nil {
			t.Fatal(err)
		}
	}
	host := room.Operator(tr.Engine().HostID)
	events := tr.Stats().WatchEvents.Load()
	for i := range 10 {
		v, _, _ := latest(t, tr)
		text := watchDoc + strings.Repeat("own commit\n", i+1)
		if _, err := Do(ctx, tr.Room, "commit", func(tx *room.Tx) (room.CommitResult, error) {
			return tr.Engine().Commit(tx, host, room.CommitInput{BaseVersion: &v, Content: &text, Summary: "own"})
		}); err != nil {
			t.Fatal(err)
		}
		expectFrame(t, frames, uri)
		waitCounter(t, &tr.Stats().WatchEvents, events+1) // the watcher saw this commit's rename
		events = tr.Stats().WatchEvents.Load()
	}
	appendTo(t, tr.doc, "the outside edit\n")
	expectFrame(t, frames, uri)
	if v := expectExternal(t, tr); v != 12 {
		t.Fatalf("the outside edit is version %d, want 12 (1 + 10 own commits + 1)", v)
	}
	st := tr.Stats()
	if n := st.FileSyncs.Load(); n != 1 {
		t.Fatalf("%d file syncs, want exactly 1 (the outside edit): the room's own writes caused syncs", n)
	}
	if n := count(t, tr, `SELECT count(*) FROM versions WHERE source = 'external'`); n != 1 {
		t.Fatalf("%d external versions, want 1", n)
	}
	if st.WatchIgnored.Load() == 0 {
		t.Fatal("no sidecar event was seen, so this test proves nothing about filtering them")
	}
	t.Logf("events naming the document %d, other files' events dropped %d, sync requests %d",
		st.WatchEvents.Load(), st.WatchIgnored.Load(), st.SyncRequests.Load())
}

// waitCounter waits until c reaches n.
func waitCounter(t *testing.T, c *atomic.Uint64, n uint64) {
	t.Helper()
	deadline := time.Now().Add(watchWait)
	for c.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("counter at %d, want %d", c.Load(), n)
		}
		runtime.Gosched()
	}
}

// TestWatch_ContinuousWritesStillSync: with a quiet period longer than the
// test, only the maximum delay can explain a sync while the file is being
// appended to every few milliseconds.
func TestWatch_ContinuousWritesStillSync(t *testing.T) {
	tr, hub := watchedRoom(t, func(c *Config) { c.Watch.Quiet, c.Watch.MaxDelay = time.Hour, 100*time.Millisecond })
	uri := tr.Engine().DocumentURI()
	frames := resourceFrames(t, hub, uri)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	stopWriting := sync.OnceFunc(func() { close(stop); <-stopped })
	defer stopWriting()
	go func() {
		defer close(stopped)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				f, err := os.OpenFile(tr.doc, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Error(err)
					return
				}
				f.WriteString("more\n")
				f.Close()
			}
		}
	}()
	expectFrame(t, frames, uri)
	stopWriting()
	if _, source, _ := latest(t, tr); source != "external" {
		t.Fatalf("newest version is %s, want an external edit recorded while the file was being written", source)
	}
}

func TestWatch_PollCatchesEditsWithoutEvents(t *testing.T) {
	cases := []struct {
		name     string
		pollOnly bool
		failNew  bool
		warnings int
	}{
		{"a room configured for a filesystem without events polls", true, false, 0},
		{"a room that cannot create a watcher warns once and polls", false, true, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tap := newLogTap()
			tr, hub := watchedRoom(t, func(cfg *Config) {
				cfg.Logger = slog.New(tap)
				cfg.Watch.PollOnly = c.pollOnly
				cfg.Watch.Poll = 20 * time.Millisecond
				if c.failNew {
					cfg.Watch.newWatcher = func() (*fsnotify.Watcher, error) { return nil, errors.New("too many open files") }
				}
			})
			uri := tr.Engine().DocumentURI()
			frames := resourceFrames(t, hub, uri)
			appendTo(t, tr.doc, "first\n")
			expectFrame(t, frames, uri)
			expectExternal(t, tr)
			editorSave(t, tr.doc, watchDoc+"second, saved by rename\n")
			expectFrame(t, frames, uri)
			if v := expectExternal(t, tr); v != 3 {
				t.Fatalf("the second edit is version %d, want 3", v)
			}
			st := tr.Stats()
			if st.WatchEvents.Load() != 0 || st.WatchArms.Load() != 0 {
				t.Fatalf("%d events, %d arms: filesystem events were used", st.WatchEvents.Load(), st.WatchArms.Load())
			}
			if n := tap.drained("cannot watch the document"); n != c.warnings {
				t.Fatalf("%d warnings that the watcher could not be created, want %d", n, c.warnings)
			}
		})
	}
}

// TestWatch_DirectoryMovedAwayAndBack moves the document's directory away
// (which ends an inotify watch), puts something else where it was, edits
// the document where it is now, and moves it back. While it is away the
// watcher asks for no sync however often it polls, never watches what is
// at the path now, and nothing is recorded (not the edit, not a namesake in
// the other place); once it is back the watch is re-armed and the edit
// made meanwhile becomes a version by itself, with nothing reading.
func TestWatch_DirectoryMovedAwayAndBack(t *testing.T) {
	const stranger = "# Someone else's idea\n"
	cases := []struct {
		name string
		put  func(t *testing.T, dir, elsewhere string)
	}{
		{"nothing in its place", func(*testing.T, string, string) {}},
		{"a new directory with a namesake in its place", func(t *testing.T, dir, _ string) {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "idea.md"), []byte(stranger), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"a symlink to a directory with a namesake in its place", func(t *testing.T, dir, elsewhere string) {
			if err := os.WriteFile(filepath.Join(elsewhere, "idea.md"), []byte(stranger), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(elsewhere, dir); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name+": no sync while away, the edit made meanwhile is recorded once it is back", func(t *testing.T) {
			tap := newLogTap()
			tr, hub := watchedRoom(t, func(cfg *Config) {
				cfg.Logger = slog.New(tap)
				cfg.Watch.Poll = 20 * time.Millisecond
			})
			uri := tr.Engine().DocumentURI()
			frames := resourceFrames(t, hub, uri)
			dir := filepath.Dir(tr.doc)
			old, elsewhere := dir+".away", filepath.Join(filepath.Dir(dir), "elsewhere")
			if err := os.Mkdir(elsewhere, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dir, old); err != nil {
				t.Fatal(err)
			}
			c.put(t, dir, elsewhere)
			tap.waitLog(t, "the document's directory was moved or replaced")
			st := tr.Stats()
			requests, syncs, polls := st.SyncRequests.Load(), st.FileSyncs.Load(), st.WatchPolls.Load()
			appendTo(t, filepath.Join(old, "idea.md"), "edited while away\n")
			waitCounter(t, &st.WatchPolls, polls+5)
			if st.SyncRequests.Load() != requests || st.FileSyncs.Load() != syncs {
				t.Fatalf("while away over 5 polls: sync requests %d -> %d, file syncs %d -> %d; want none",
					requests, st.SyncRequests.Load(), syncs, st.FileSyncs.Load())
			}
			if v, _, _ := latest(t, tr); v != 1 {
				t.Fatalf("version %d while away, want 1: something was recorded", v)
			}
			if n := st.WatchArms.Load(); n != 1 {
				t.Fatalf("the watch was armed %d times while away, want 1 (never on what is at the path now)", n)
			}

			if err := os.RemoveAll(dir); err != nil { // the placeholder, never what it leads to
				t.Fatal(err)
			}
			if err := os.Rename(old, dir); err != nil {
				t.Fatal(err)
			}
			tap.waitLog(t, "the document's directory is back")
			expectFrame(t, frames, uri)
			if v := expectExternal(t, tr); v != 2 {
				t.Fatalf("the edit made while away is version %d, want 2", v)
			}
			if n := st.WatchArms.Load(); n != 2 {
				t.Fatalf("the watch was armed %d times, want 2", n)
			}
			if n := st.Sweeps.Load(); n != 0 {
				t.Fatalf("%d sweeps ran; this test needs the sweeper idle", n)
			}
			events := st.WatchEvents.Load()
			appendTo(t, tr.doc, "edited after the return\n")
			expectFrame(t, frames, uri)
			if v := expectExternal(t, tr); v != 3 {
				t.Fatalf("the edit after the return is version %d, want 3", v)
			}
			// The poll may have been first; the event still comes (or the
			// watch was not re-armed, and this times out).
			waitCounter(t, &st.WatchEvents, events+1)
			if b, err := os.ReadFile(filepath.Join(elsewhere, "idea.md")); err == nil && string(b) != stranger {
				t.Fatalf("the namesake elsewhere was changed: %q", b)
			}
		})
	}
}

// TestWatch_CloseStopsTheWatcher looks at every goroutine: the watcher and
// fsnotify's reader run while the room is open and are gone once Close
// returns. Goroutines are told by who created them, which a dump names
// even before they first run.
func TestWatch_CloseStopsTheWatcher(t *testing.T) {
	const watcherFn, readerFn = "created by github.com/commonroom/ce/actor.(*Room).startWatcher",
		"created by github.com/fsnotify/fsnotify.newBackend"
	cases := []struct {
		name  string
		watch WatchConfig
		want  []string
	}{
		{"with events, both stop", WatchConfig{Enabled: true}, []string{watcherFn, readerFn}},
		{"polling only, the watcher stops", WatchConfig{Enabled: true, PollOnly: true}, []string{watcherFn}},
		{"disabled, nothing runs", WatchConfig{}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr := openRoom(t, func(cfg *Config) { cfg.Watch = c.watch })
			running := goroutinesRunning(watcherFn, readerFn)
			for _, fn := range []string{watcherFn, readerFn} {
				if want := contains(c.want, fn); running[fn] != want {
					t.Fatalf("%s running: %v, want %v", fn, running[fn], want)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), watchWait)
			defer cancel()
			if err := tr.Close(ctx); err != nil {
				t.Fatal(err)
			}
			// Close has waited for both, but each signals from a deferred
			// call: the watcher closes watchDone and fsnotify's reader its
			// own channels while their goroutines are still on the stack,
			// for the instant it takes them to return.
			deadline := time.Now().Add(watchWait)
			for {
				running = goroutinesRunning(watcherFn, readerFn)
				if !running[watcherFn] && !running[readerFn] {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("after Close, still running: %v", running)
				}
				runtime.Gosched()
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// goroutinesRunning reports which of the strings some goroutine's stack holds.
func goroutinesRunning(fns ...string) map[string]bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]bool{}
	for _, fn := range fns {
		out[fn] = strings.Contains(string(buf), fn)
	}
	return out
}

func TestDebounce(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	cases := []struct {
		name   string
		events []time.Time
		want   time.Duration // the wait after the last event
	}{
		{"one event waits the quiet period", []time.Time{ms(0)}, 50 * time.Millisecond},
		{"a later event in the burst restarts the quiet period", []time.Time{ms(0), ms(30)}, 50 * time.Millisecond},
		{"a long burst is cut at the maximum delay", []time.Time{ms(0), ms(40), ms(80), ms(120), ms(160), ms(220)}, 30 * time.Millisecond},
		{"an event past the maximum delay is due at once", []time.Time{ms(0), ms(300)}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := debounce{quiet: 50 * time.Millisecond, maxDelay: 250 * time.Millisecond}
			var got time.Duration
			for _, at := range c.events {
				got = d.event(at)
			}
			if got != c.want {
				t.Fatalf("wait %v, want %v", got, c.want)
			}
			d.fired()
			if got := d.event(ms(1000)); got != 50*time.Millisecond {
				t.Fatalf("after firing, a new burst waits %v, want the quiet period", got)
			}
		})
	}
}
