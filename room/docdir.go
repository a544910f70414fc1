package room

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The directories a room opened at start, held by descriptor (issue 25
// item 5). A room is opened around a path, but a path can come to lead
// elsewhere while the room serves: `mv dir dir.old`, a new `mkdir dir` in
// its place, a symlink `dir -> elsewhere`. Everything the room touches
// after start — the sidecar's SQLite connections, the document's reads and
// its guarded replacement — goes through the directory it opened, never
// through the path again, so it can neither create a sidecar in the new
// directory (SQLite creates a missing database file by default) nor read or
// write a document that is not the one it serves.
//
// On Linux the held directory is named by /proc/self/fd/<fd>/<name>: the
// kernel resolves that through the descriptor, so it reaches the held
// directory wherever it has been moved, and SQLite (which resolves symbolic
// links, this magic one included, when it opens a database) names the
// sidecar's -wal and -shm by where the directory is at that moment. Where
// there is no /proc the path at start is used, checked against the held
// directory's identity before every file operation (see Engine.DocAway);
// there a directory swapped in between that check and the operation can
// still be reached, and every SQLite connection is opened with mode=rw or
// mode=ro, so even then none can create a file.

// dirID is a directory's identity: its device and inode.
type dirID struct{ dev, ino uint64 }

func idOf(fi fs.FileInfo) dirID {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return dirID{dev: uint64(st.Dev), ino: uint64(st.Ino)}
	}
	return dirID{}
}

// heldDir is a directory opened at start and kept open until close.
type heldDir struct {
	f    *os.File // O_RDONLY|O_DIRECTORY, close-on-exec
	path string   // absolute, where the directory was at start
	id   dirID
	via  string // "/proc/self/fd/<fd>" when that reaches the held directory, else ""
}

// openHeldDir opens path (a directory) and records its identity. It
// decides once whether /proc/self/fd reaches it: the link must lead to the
// very directory opened, or the path at start is used instead.
func openHeldDir(path string) (*heldDir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(abs, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	d := &heldDir{f: f, path: abs, id: idOf(fi)}
	via := "/proc/self/fd/" + strconv.Itoa(int(f.Fd()))
	if st, err := os.Stat(via); err == nil && st.IsDir() && idOf(st) == d.id && d.id != (dirID{}) {
		d.via = via
	}
	return d, nil
}

// name is the path that reaches base inside the held directory.
func (d *heldDir) name(base string) string {
	if d.via != "" {
		return d.via + "/" + base
	}
	return filepath.Join(d.path, base)
}

// here reports whether the path at start still leads to the held
// directory (following symbolic links: a link put in its place that leads
// back to it is the same directory).
func (d *heldDir) here() bool {
	st, err := os.Stat(d.path)
	return err == nil && st.IsDir() && idOf(st) == d.id
}

// now is where the held directory is now, for the host's log; "" where
// /proc cannot tell.
func (d *heldDir) now() string {
	if d.via == "" {
		return ""
	}
	p, err := os.Readlink(d.via)
	if err != nil {
		return ""
	}
	return p
}

// sync makes a rename in the held directory durable.
func (d *heldDir) sync() error {
	if err := d.f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

// close gives the descriptor back. Only once nothing can use the
// directory any more: a later open could get the same number, and the
// names built on it would then lead there.
func (d *heldDir) close() error {
	if d == nil || d.f == nil {
		return nil
	}
	err := d.f.Close()
	d.f = nil
	return err
}

// ErrDocMoved is the cause of the unavailable error an operation gets
// while the document's path does not lead into the directory the room
// opened (see Engine.DocAway); callers that can go on without the file
// (the sweeper, reads) tell it apart with errors.Is.
var ErrDocMoved = errors.New("the document's directory was moved or replaced")

// DocAway is nil while the document's path leads into the directory the
// room opened at start, and otherwise an unavailable error that says so
// and what to do. Everything that reads or writes the document asks it
// first: the room serves the file it opened, and while that file's
// directory is somewhere else (renamed, replaced by a new directory or a
// symlink to another place) it changes no file and records no outside
// edit, rather than act on a file the user no longer sees there. It costs
// one stat of the directory's path. The message names the document by its
// base name only (participants read it too) and fits the 256 bytes an
// error body's message keeps, what to do included.
func (e *Engine) DocAway() error {
	if e.dir == nil || e.dir.here() {
		return nil
	}
	return Errorf(KindUnavailable,
		"the document %s cannot be reached: its directory was moved or replaced while the room serves it. Nothing was written. "+
			"Move the directory back (the room resumes by itself) or stop the room and serve the file where it is now",
		filepath.Base(e.DocPath)).wrap(ErrDocMoved)
}

// DocDirNow is where the document's directory is now when it is not where
// the room opened it, for the host's log ("" when the system cannot tell).
func (e *Engine) DocDirNow() string {
	if e.dir == nil {
		return ""
	}
	return e.dir.now()
}

// docName is the path that reaches the document through the directory the
// room holds: every file operation after start uses it, never DocPath.
func (e *Engine) docName() string { return e.file.name() }

// RemoveBeside removes the file whose name is the document's plus suffix
// (the operator credential, ".commonroom.owner") from the directory the
// room opened, wherever that is now: a room that stops after its directory
// moved removes its own file, never a namesake in the new directory.
func (e *Engine) RemoveBeside(suffix string) error {
	return os.Remove(e.docName() + suffix)
}

// Close gives back what the engine holds open: the document's directory
// and the files recent commits replaced. Call it once the room's writer
// and watcher have stopped; the engine is not used after.
func (e *Engine) Close() error {
	e.file.close()
	return e.dir.close()
}
