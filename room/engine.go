package room

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
)

// Now reads the room's clock.
func (e *Engine) Now() time.Time { return e.Clock() }

// Engine holds the rules of one room. Its mutating methods take a *Tx and run
// inside the actor's transaction; its read methods take any Querier. The few
// fields it keeps in memory are caches of committed state (parsed versions,
// the file's last seen stamp, session last_seen times), never the authority.
type Engine struct {
	DocPath     string // absolute, symlinks resolved
	Name        string // file stem, for display
	WorkspaceID string // set by Bootstrap, stable across restarts
	HostID      string // the host participant, set by Bootstrap
	Limits      Limits
	// Clock is the room's one source of time (tests inject a fake one).
	Clock func() time.Time
	// Retention is the host's retention policy (retention.go); the zero
	// value keeps everything. Set before the actor starts.
	Retention Retention
	// Archive, when set, receives every record retention prunes before
	// its delete commits (prune_archive.go).
	Archive *Archive

	prune pruneState // prune.go

	hints    atomic.Pointer[[]Hint]
	stamp    atomic.Pointer[fileStamp]
	docs     docCache
	parses   singleflight.Group // concurrent cache misses of one version share a parse
	seen     lastSeen
	sessions sessionCache
	// challenges are the proven join's outstanding server nonces
	// (joinchallenge.go), in memory only and bounded.
	challenges joinChallenges
	// host is what tells this machine's loopback from another's, read
	// once (machine.go).
	host hostOnce

	afterFileWrite func() error // crash-test seam, run right after the document is renamed into place; nil in production

	// file is the guarded file write (docfile.go): the document as a
	// commit replaces it. Only the writer touches it.
	file guardedFile

	// wc is the writer's copy of its live handoff rows (handoff_wcache.go);
	// only the writer touches it.
	wc writerCache

	// dir is the document's directory, opened by NewEngine and held until
	// Close: every file operation after start goes through it (docdir.go).
	dir *heldDir

	// sidecar is the store the room runs on (AttachStore), whose files
	// Storage stats; nil for an engine that only reads (ce status).
	sidecar atomic.Pointer[Store]
}

// NewEngine resolves the document path (creating an empty file when it is
// missing and its directory exists; refusing anything but a regular file)
// and opens the document's directory, which the engine holds until Close:
// the room reads and writes the document through it, not through the
// path, which may come to lead elsewhere while it serves (docdir.go).
func NewEngine(docPath string, limits Limits) (*Engine, error) {
	abs, err := ResolveDocPath(docPath)
	if err != nil {
		return nil, err
	}
	dir, err := openHeldDir(filepath.Dir(abs))
	if err != nil {
		return nil, Errorf(KindInvalidRequest, "cannot open the directory of %s: %v", abs, err)
	}
	e := &Engine{DocPath: abs, Limits: limits, Clock: time.Now, dir: dir, file: newGuardedFile(dir, abs)}
	base := filepath.Base(abs)
	e.Name = strings.TrimSuffix(base, filepath.Ext(base))
	return e, nil
}

// ResolveDocPath returns the absolute, symlink-resolved path of the document,
// creating it empty if it does not exist. It never creates a directory (a
// mistyped path must not grow a tree), and it refuses, before opening it,
// anything that is not a regular file: a FIFO would block the read, a
// device would put the sidecar in /dev.
func ResolveDocPath(docPath string) (string, error) {
	abs, err := filepath.Abs(docPath)
	if err != nil {
		return "", Errorf(KindInvalidRequest, "bad path %q", docPath)
	}
	st, err := os.Stat(abs)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if lst, lerr := os.Lstat(abs); lerr == nil && lst.Mode()&fs.ModeSymlink != 0 {
			return "", Errorf(KindNotFound, "%s is a symbolic link to a file that does not exist", abs)
		}
		dir := filepath.Dir(abs)
		if dst, err := os.Stat(dir); err != nil || !dst.IsDir() {
			return "", Errorf(KindNotFound, "the directory %s does not exist; ce creates a missing file, never its directory", dir)
		}
		f, err := os.OpenFile(abs, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return "", Errorf(KindInvalidRequest, "cannot create %s: %v", abs, err)
		}
		if f != nil {
			f.Close()
		}
	case err != nil:
		return "", Errorf(KindInvalidRequest, "cannot open %s: %v", abs, err)
	case !st.Mode().IsRegular():
		return "", notRegular(abs, st.Mode())
	}
	return resolveRegular(abs)
}

// ExistingDocPath resolves the document path like ResolveDocPath but never
// creates anything: commands other than serve must not conjure up a room
// for a mistyped file name. It refuses what is not a regular file too.
func ExistingDocPath(docPath string) (string, error) {
	abs, err := filepath.Abs(docPath)
	if err != nil {
		return "", Errorf(KindInvalidRequest, "bad path %q", docPath)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", Errorf(KindNotFound, "%s: no such file", docPath)
	}
	if !st.Mode().IsRegular() {
		return "", notRegular(abs, st.Mode())
	}
	return resolveRegular(abs)
}

// resolveRegular resolves symlinks and checks once more that what the path
// names is a regular file (it may have changed since the first look).
func resolveRegular(abs string) (string, error) {
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", Errorf(KindInvalidRequest, "cannot resolve %s: %v", abs, err)
	}
	st, err := os.Lstat(real)
	if err != nil {
		return "", Errorf(KindInvalidRequest, "cannot open %s: %v", real, err)
	}
	if !st.Mode().IsRegular() {
		return "", notRegular(real, st.Mode())
	}
	return real, nil
}

// SetHints records how joiners reach this room (the ingress listener); new
// invitations carry them. Endpoint addresses never enter events or logs.
func (e *Engine) SetHints(h []Hint) {
	h = append([]Hint(nil), h...)
	e.hints.Store(&h)
}

// Hints returns a copy of the hints new invitations carry, first the one the
// transport exposed: the ingress accepts exactly their names in Host and
// labels a session by the one its join came through.
func (e *Engine) Hints() []Hint {
	p := e.hints.Load()
	if p == nil {
		return nil
	}
	out := make([]Hint, len(*p))
	for i, h := range *p {
		h.IPs = append([]string(nil), h.IPs...)
		if h.Params != nil {
			m := make(map[string]string, len(h.Params))
			for k, v := range h.Params {
				m[k] = v
			}
			h.Params = m
		}
		out[i] = h
	}
	return out
}

func (e *Engine) currentHints() []Hint {
	if p := e.hints.Load(); p != nil && len(*p) > 0 {
		return *p
	}
	return []Hint{localHint}
}

func contentHash(s string) string {
	h := sha256.Sum256(bytesOf(s)) // no copy of a large document
	return hex.EncodeToString(h[:])
}

func getMeta(ctx context.Context, q Querier, key string) (string, bool, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = ?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, Internal(err)
	}
	return v, true, nil
}

func (tx *Tx) setMeta(key, value string) error {
	_, err := tx.exec(`INSERT INTO meta(key, value) VALUES (?, ?)
		ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return Internal(err)
	}
	return nil
}

// Load reads the room's identity (workspace id, host) for a process that
// only reads the sidecar and so never runs Bootstrap.
func (e *Engine) Load(ctx context.Context, q Querier) error {
	id, ok, err := getMeta(ctx, q, "workspace_id")
	if err != nil {
		return err
	}
	if !ok {
		return Errorf(KindNotFound, "this sidecar holds no room yet")
	}
	e.WorkspaceID = id
	var host string
	err = q.QueryRowContext(ctx, `SELECT participant_id FROM participants WHERE is_host = 1 AND left_at IS NULL ORDER BY joined_at LIMIT 1`).Scan(&host)
	if err == nil {
		e.HostID = host
	}
	return nil
}

// Bootstrap opens the room inside the actor's first transaction: on a new
// sidecar it creates the workspace and version 1 from the file; on every open
// it records an out-of-band edit as a version and makes sure the host exists.
func (e *Engine) Bootstrap(tx *Tx, hostName string) error {
	id, ok, err := getMeta(tx.ctx, tx.q, "workspace_id")
	if err != nil {
		return err
	}
	if !ok {
		id = newID("workspace", 8)
		e.WorkspaceID = id
		content, st, err := readDoc(e.docName())
		if err != nil {
			return err
		}
		for k, v := range map[string]string{"workspace_id": id, "lifecycle": "ACTIVE", "created_at": WireTime(tx.nowMS())} {
			if err := tx.setMeta(k, v); err != nil {
				return err
			}
		}
		if err := tx.insertVersion(1, content, contentHash(content), "workspace created", "bootstrap", "", ""); err != nil {
			return err
		}
		if err := tx.emit("workspace.created", refs{version: 1}, map[string]any{"version": 1}); err != nil {
			return err
		}
		tx.after = append(tx.after, func() { e.stamp.Store(&st) })
	}
	e.WorkspaceID = id
	// A killed writer's temporary files go; one that is a document the
	// writer had just swapped out is recorded first (an editor's save may
	// be in it) and removed only once that version has committed.
	for _, t := range staleTemps(e.docName()) {
		if !t.replaced {
			os.Remove(t.path)
			continue
		}
		if err := e.recordExternal(tx, t.text); err != nil {
			return err
		}
		tx.after = append(tx.after, func() { os.Remove(t.path) })
	}
	if err := e.SyncFile(tx); err != nil {
		return err
	}
	return e.ensureHost(tx, hostName)
}

// MarkStarted records that a process began serving the room.
func (e *Engine) MarkStarted(tx *Tx) error {
	v, err := currentVersion(tx.ctx, tx.q)
	if err != nil {
		return err
	}
	return tx.emit("workspace.started", refs{version: v}, map[string]any{"version": v})
}

// MarkStopped records a graceful stop.
func (e *Engine) MarkStopped(tx *Tx) error {
	v, err := currentVersion(tx.ctx, tx.q)
	if err != nil {
		return err
	}
	// A graceful stop keeps every slide: the uses noted since the last
	// flush are written with the stop.
	if err := e.FlushLastSeen(tx); err != nil {
		return err
	}
	return tx.emit("workspace.stopped", refs{version: v}, map[string]any{"version": v})
}

// lastSeen keeps session activity in memory; the sweeper flushes it at most
// once a minute so a read never turns into a write (D25). Every
// authenticated request notes a use, so a note must not take a room-wide
// lock: a sync.Map updates a session already noted since the last flush
// without one. It also must not allocate: a session noted since the last
// flush has its entry, and a use only swaps the time in it.
type lastSeen struct {
	m sync.Map // session_ref -> *seenAt
}

// seenAt is one session's last noted use (unix ms), or seenTaken once take
// removed the entry: a use that finds that notes itself in a new entry.
type seenAt struct{ at atomic.Int64 }

const seenTaken = math.MinInt64

func (l *lastSeen) touch(ref string, at int64) {
	for {
		if e, ok := l.m.Load(ref); ok {
			s := e.(*seenAt)
			if cur := s.at.Load(); cur != seenTaken && s.at.CompareAndSwap(cur, at) {
				return // take has not had this entry yet: it will see at
			}
			continue // taken meanwhile: the next Load finds no entry, or a new one
		}
		s := &seenAt{}
		s.at.Store(at)
		if _, loaded := l.m.LoadOrStore(ref, s); !loaded {
			return
		}
	}
}

// get returns the last use noted since the last flush.
func (l *lastSeen) get(ref string) (int64, bool) {
	e, ok := l.m.Load(ref)
	if !ok {
		return 0, false
	}
	at := e.(*seenAt).at.Load()
	return at, at != seenTaken
}

// maxLifeMS is Limits.SessionMaxLifetime in ms; unset means no cap beyond
// the idle window.
func (e *Engine) maxLifeMS() int64 {
	if e.Limits.SessionMaxLifetime <= 0 {
		return 1 << 50
	}
	return e.Limits.SessionMaxLifetime.Milliseconds()
}

// take removes and returns the uses noted so far. A use noted while it
// runs is either taken now or kept for the next flush, never lost: an entry
// leaves the map before its time is read and marked taken, and a use that
// loses the race to the mark notes itself in a new entry.
func (l *lastSeen) take() map[string]int64 {
	var m map[string]int64
	l.m.Range(func(k, e any) bool {
		if l.m.CompareAndDelete(k, e) {
			if at := e.(*seenAt).at.Swap(seenTaken); at != seenTaken {
				if m == nil {
					m = map[string]int64{}
				}
				m[k.(string)] = at
			}
		}
		return true
	})
	return m
}
