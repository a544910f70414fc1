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
