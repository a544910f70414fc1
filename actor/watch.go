package actor

// The file watcher: how an edit made outside the room (the user's editor, a
// script, git) becomes a version within a second instead of at the next
// sweep. It is one goroutine per room, a message source for the single
// writer like the sweeper's timer: it never touches the sidecar itself, it
// only asks the writer to sync (RequestFileSync) once the file's stamp says
// it changed.
//
// It watches the document's directory, not the file: editors save by
// writing a temporary file and renaming it over the document, which would
// silently end a watch on the file's inode. The directory also holds the
// sidecar, whose -wal file is written on every commit; those events are
// dropped by one string comparison of the name. The periodic stat stays as
// the fallback for filesystems that deliver no events (NFS, many FUSE
// mounts), where a watch is accepted but never fires, and for when the
// watch cannot be created at all (inotify limits).
//
// The directory can move while the room serves (`mv dir dir.old`, a new
// directory or a symlink in its place). The room keeps serving the
// directory it opened (room/docdir.go) but changes nothing and records no
// edit while the path leads elsewhere, so the watcher then drops its watch,
// asks for no sync, and looks at every poll whether the path leads back; when
// it does, the watch is put back and the file checked at once, so an edit
// made in the moved directory becomes a version then.

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// WatchConfig says how the room notices outside edits of the document.
// Without it (Enabled false) only reads and the sweeper look at the file,
// which suits the one-shot commands that open a room for one change.
type WatchConfig struct {
	// Enabled starts the watcher with the room; ce serve turns it on.
	Enabled bool
	// PollOnly skips filesystem events and relies on the periodic stat
	// alone, as a room on a filesystem without events does.
	PollOnly bool
	// Poll is how often the file is stat'ed whatever the events say (and
	// a broken directory watch re-armed); default 2s. A stat is cheap,
	// and this bounds how late an edit is noticed where no event comes.
	Poll time.Duration
	// Quiet is how long the file must see no event before it is checked,
	// so one save (often several writes and a rename) is one sync;
	// default 50ms.
	Quiet time.Duration
	// MaxDelay bounds how long events may postpone the check, so a file
	// written continuously is still synced; default 250ms. Below Quiet it
	// is the fixed delay of every check.
	MaxDelay time.Duration

	// newWatcher creates the event source (fsnotify.NewWatcher when nil).
	// Tests set it to stand for a system out of inotify instances, which
	// cannot be caused safely on a shared machine.
	newWatcher func() (*fsnotify.Watcher, error)
}

func (c *WatchConfig) defaults() {
	if c.Poll <= 0 {
		c.Poll = 2 * time.Second
	}
	if c.Quiet <= 0 {
		c.Quiet = 50 * time.Millisecond
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = 250 * time.Millisecond
	}
	if c.newWatcher == nil {
		c.newWatcher = fsnotify.NewWatcher
	}
}

// debounce turns a burst of events into one check: due a quiet period after
// the last event, but never later than maxDelay after the first one.
type debounce struct {
	quiet, maxDelay time.Duration
	pending         bool
	first           time.Time
}

// event records an event at now and returns how long to wait before the check.
func (d *debounce) event(now time.Time) time.Duration {
	if !d.pending {
		d.pending, d.first = true, now
	}
	return max(min(d.quiet, d.first.Add(d.maxDelay).Sub(now)), 0)
}

// fired ends the burst: the next event starts a new one.
func (d *debounce) fired() { d.pending = false }

type watcher struct {
	r    *Room
	cfg  WatchConfig
	dir  string
	name string // the document as fsnotify names it: dir + "/" + base
	fsw  *fsnotify.Watcher

	armed  bool // the directory watch is in place
	away   bool // the document's directory is not where the room opened it (room.Engine.DocAway)
	warned bool // a lost or failed watch was logged and is not yet re-armed
	deb    debounce
}

// startWatcher creates the watcher and its goroutine; Close stops it and
// waits (watchDone).
func (r *Room) startWatcher() {
	cfg := r.cfg.Watch
	cfg.defaults()
	dir := filepath.Dir(r.eng.DocPath)
	w := &watcher{r: r, cfg: cfg, dir: dir, name: dir + "/" + filepath.Base(r.eng.DocPath),
		deb: debounce{quiet: cfg.Quiet, maxDelay: cfg.MaxDelay}}
	if !cfg.PollOnly {
		fsw, err := cfg.newWatcher()
		if err != nil {
			r.log.Warn("cannot watch the document for outside edits; checking it every poll period instead",
				"err", err, "poll", cfg.Poll)
		} else {
			w.fsw = fsw
			w.arm()
		}
	}
	r.watchDone = make(chan struct{})
	go w.run()
}

// Pacing the event source. Each event costs about 11 µs of CPU to deliver
// (the read, two goroutine wake-ups), and the sidecar's -wal beside the
// document takes several writes per commit: taken one by one, that added
// about a third to a commit's CPU time. So after a wake-up the watcher
// takes events for eventWindow, then leaves the source alone for
// eventPause: meanwhile fsnotify's reader waits to hand over its next
// event and reads nothing, and the kernel merges each run of identical
// events (the -wal's writes) into one. A save is seen at most eventPause
// later, well inside the debounce.
const (
	eventWindow = time.Millisecond
	eventPause  = 20 * time.Millisecond
)

func (w *watcher) run() {
	defer close(w.r.watchDone)
	var source, events <-chan fsnotify.Event
	var errs <-chan error
	if w.fsw != nil {
		defer w.fsw.Close()
		source, errs = w.fsw.Events, w.fsw.Errors
		events = source
	}
	poll := time.NewTicker(w.cfg.Poll)
	defer poll.Stop()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	gate := time.NewTimer(time.Hour) // ends the window, then the pause
	gate.Stop()
	defer gate.Stop()
	taking := false // within a window
	st := &w.r.stats
	for {
		select {
		case <-w.r.quit:
			return
		case <-gate.C:
			if taking {
				taking, events = false, nil
				gate.Reset(eventPause)
			} else {
				events = source
			}
		case ev, ok := <-events:
			if !ok {
				source, events, errs = nil, nil, nil
				w.armed, w.fsw = false, nil // the poll alone from now on
				w.lost("the event source closed")
				continue
			}
			if !taking {
				taking = true
				gate.Reset(eventWindow)
			}
			switch ev.Name {
			case w.name:
				st.WatchEvents.Add(1)
				settle.Reset(w.deb.event(time.Now()))
			case w.dir:
				// The directory itself was removed or renamed: its
				// watch is gone. Try at once (it may be back already),
				// and at every poll until it is.
				if ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename) {
					w.armed = false
					w.arm()
					w.check()
				}
			default:
				st.WatchIgnored.Add(1) // the sidecar's -wal, temporary files
			}
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				w.r.log.Warn("watching the document: an error from the event source", "err", err)
			}
			w.check() // events may have been lost: look now
		case <-settle.C:
			w.deb.fired()
			w.check()
		case <-poll.C:
			w.arm()
			w.check()
			st.WatchPolls.Add(1)
		}
	}
}

// check asks the writer to sync when the file's stamp changed. While the
// document's directory is away it asks nothing: the room records no edit
// of a file the path does not lead to, and the first check after the
// directory is back (arm comes first at every poll) records an edit made
// while it was away.
func (w *watcher) check() {
	if w.away {
		return
	}
	if w.r.eng.FileChanged() {
		w.r.stats.SyncRequests.Add(1)
		w.r.RequestFileSync()
	}
}

// arm looks where the document's directory is. While it is away (renamed,
// replaced by a new directory or a symlink to another place) the watch is
// dropped, and is never put on whatever is at the path now; once the path
// leads to the directory the room opened again, the watch is put back.
// Without an event source only the first part applies: the poll is all
// there is.
func (w *watcher) arm() {
	if w.r.eng.DocAway() != nil {
		w.leave()
		return
	}
	w.back()
	if w.fsw == nil || w.armed {
		return
	}
	w.fsw.Remove(w.dir) // a stale watch, if any
	if err := w.fsw.Add(w.dir); err != nil {
		w.lost("cannot watch the document's directory: " + err.Error())
		return
	}
	// Between the look and Add the path could have come to lead elsewhere
	// again; the next poll finds that and drops this watch.
	w.armed = true
	if w.r.stats.WatchArms.Add(1) > 1 || w.warned {
		w.r.log.Info("watching the document's directory again")
	}
	w.warned = false
}

// leave drops the watch while the directory is away and logs it once.
func (w *watcher) leave() {
	if w.armed {
		w.fsw.Remove(w.dir)
		w.armed = false
	}
	if w.away {
		return
	}
	w.away = true
	w.r.log.Warn("the document's directory was moved or replaced: the room changes no file and records no outside edit until it is back, "+
		"and requests that need the file answer unavailable; move it back, or stop the room and serve the file where it is now",
		"dir", w.dir, "now", w.r.eng.DocDirNow(), "poll", w.cfg.Poll)
}

// back notes that the directory is where the room opened it again.
func (w *watcher) back() {
	if !w.away {
		return
	}
	w.away = false
	w.r.log.Info("the document's directory is back where the room opened it; serving it again", "dir", w.dir)
}

// lost logs once per outage that events stopped; the poll goes on.
func (w *watcher) lost(why string) {
	if w.warned {
		return
	}
	w.warned = true
	w.r.log.Warn("the document's watch is lost; checking it every poll period until it can be re-armed",
		"why", why, "poll", w.cfg.Poll)
}
