package room

import (
	"cmp"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"
)

// The guarded file write is one subsystem: guardedFile and the files
// docfile.go (this type, opening and reading the document, its metadata),
// docswap.go (the guarded replacement, the files it retires, the undo),
// docswap_linux.go and docswap_other.go (the atomic exchange) and
// docowner.go (whether a replacement can keep the file's owner). It knows
// the document's name in the held directory and nothing of the engine, the
// sidecar or versions: the engine (docwrite.go, document.go) decides what
// to write and records what the subsystem hands back as outside texts.
// A test keeps these files free of Engine (docfile_set_test.go).

// guardedFile is the document as the writer replaces it. Its one entry
// point for a write is replace (restore is replace run back, the undo of
// a commit that does not commit); checkRetired is the late writer's look
// every sync takes first, and close gives back the files it keeps open.
// Only the writer goroutine uses it.
type guardedFile struct {
	// dir is the document's directory as opened at start (docdir.go);
	// nil reaches the document by path.
	dir  *heldDir
	path string // the document's absolute path at start

	// meta is the document's owner, group and mode as last read; a
	// replacement gives them to the new file.
	meta docMeta
	// retired holds the files the last replacements took off the
	// document's name, open, for a late writer (see checkRetired).
	retired []retiredFile

	// Seams of the guarded replace for tests only (export_test.go):
	// swapHook runs at named points of a replacement, so an outside edit
	// can land exactly there; noExchange forces the fallback used where
	// RENAME_EXCHANGE is missing. Both nil/false in production.
	swapHook   func(stage string)
	noExchange bool
}

// newGuardedFile is the document at path, reached through dir, with the
// owner, group and mode it has now (if it exists).
func newGuardedFile(dir *heldDir, path string) guardedFile {
	g := guardedFile{dir: dir, path: path}
	if st, err := os.Stat(path); err == nil {
		g.meta = metaOf(st)
	}
	return g
}

// name is the path that reaches the document through the held directory:
// every file operation after start uses it, never the path at start.
func (g *guardedFile) name() string {
	if g.dir == nil {
		return g.path
	}
	return g.dir.name(filepath.Base(g.path))
}

// close gives back the replaced files kept open for a late writer. The
// directory is the engine's to close.
func (g *guardedFile) close() {
	for _, r := range g.retired {
		r.f.Close()
	}
	g.retired = nil
}

// fileKind names what a path is, for an error that says why ce refuses it.
func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return "not a regular file"
	}
}

// notRegular refuses a document that is not a regular file: ce replaces the
// document by rename and keeps a sidecar beside it, which makes no sense for
// a pipe (reading it blocks), a device (the sidecar would land in /dev) or
// a directory.
func notRegular(path string, m fs.FileMode) error {
	if m.IsDir() {
		return Errorf(KindInvalidRequest, "%s is a directory; ce serves one Markdown file", path)
	}
	return Errorf(KindInvalidRequest, "%s is %s; ce serves one regular Markdown file", path, fileKind(m))
}

// docReplaced is a write's answer when the document's name no longer
// holds a regular file (a symlink, a FIFO put in its place while the room
// serves): the room resolved the document to one regular file at start and
// never writes through whatever replaced it. It is unavailable, not
// internal, because the request is sound and the host can fix the file;
// the message says what is there, that nothing was written, and what to
// do. It names the file by its base name: participants read it too.
func docReplaced(path string) *Error {
	name := filepath.Base(path)
	what, fix := "not a regular file", ""
	if st, err := os.Lstat(path); err == nil {
		what = fileKind(st.Mode())
		if st.Mode()&fs.ModeSymlink != 0 {
			fix = "; to serve the file the link points to instead, stop the room and run ce serve on that file"
		}
	}
	return Errorf(KindUnavailable,
		"the document %s is now %s, and ce writes only to the regular file it serves: nothing was written, and an approved proposal stays approved. "+
			"Put the regular file back at %s and commit again%s", name, what, name, fix)
}

// openDocFile opens the document for reading without following a symlink
// in its last component and without blocking (a FIFO swapped in for the
// file would otherwise hang the writer), and refuses anything but a regular
// file. It returns the file's metadata as fstat saw it before any read.
func openDocFile(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		// O_NOFOLLOW answers a link in the last component with ELOOP, which
		// reads as a loop; name it for what it is.
		if errors.Is(err, syscall.ELOOP) {
			if st, lerr := os.Lstat(path); lerr == nil && st.Mode()&fs.ModeSymlink != 0 {
				return nil, nil, notRegular(path, st.Mode())
			}
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notRegular(path, fi.Mode())
	}
	return f, fi, nil
}

// readAllAt reads the whole file from offset 0, whatever the descriptor's
// offset, so the same descriptor can be read again later. The buffer is
// sized from fstat and becomes the string without a copy: io.ReadAll's
// doubling and the conversion made a 30 MB document cost 135 MB of
// allocation per read (issue 17). A file that grows while it is read is
// still read to its end.
func readAllAt(f *os.File) (string, error) {
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	buf := make([]byte, 0, size+1) // +1: reaching EOF needs no growth
	r := io.NewSectionReader(f, 0, 1<<62)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
	}
	if len(buf) == 0 {
		return "", nil
	}
	return unsafe.String(unsafe.SliceData(buf), len(buf)), nil // buf is never written again
}

// docMeta is what a replacement keeps of the file it replaces.
type docMeta struct {
	mode     fs.FileMode // permission bits with setuid, setgid and sticky
	uid, gid uint32
	known    bool
}

func metaOf(fi fs.FileInfo) docMeta {
	m := docMeta{mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), known: true}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		m.uid, m.gid = sys.Uid, sys.Gid
	} else {
		m.uid, m.gid = uint32(os.Geteuid()), uint32(os.Getegid())
	}
	return m
}

func stampOf(fi fs.FileInfo) fileStamp {
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.inode = sys.Ino
	}
	return st
}

func fileError(msg string, err error) *Error {
	return Errorf(KindInternal, "%s", msg).wrap(err)
}

// tempTagged is the name writeTemp gives its temporary file once it
// knows the file's inode: the name CreateTemp chose, with the inode before
// ".tmp" (".notes.md.123456.i789.tmp"), so it still matches the pattern
// staleTemps looks for.
func tempTagged(name string, ino uint64) string {
	return strings.TrimSuffix(name, ".tmp") + ".i" + strconv.FormatUint(ino, 10) + ".tmp"
}

// tempTag is the inode a temporary file's name carries (ok false for a
// name without one: an older ce's, or a system without inodes).
func tempTag(name string) (uint64, bool) {
	rest := strings.TrimSuffix(name, ".tmp")
	i := strings.LastIndex(rest, ".i")
	if i < 0 {
		return 0, false
	}
	ino, err := strconv.ParseUint(rest[i+2:], 10, 64)
	return ino, err == nil
}

// staleTemp is a temporary file a killed writer left beside the document.
type staleTemp struct {
	path string
	// replaced: the file is not the writer's own but the document the
	// exchange took off its name, and text is what it holds.
	replaced bool
	text     string
	mtime    int64
}

// staleTemps finds the temporary files a killed writer left beside the
// document (".<name>.*.tmp", the pattern writeTemp uses), oldest first.
// Most hold the writer's own text, half written or never committed: they
// can go. But a writer killed right after the exchange leaves the file that
// was the document under the temporary name, and if an editor saved between
// the writer's check and the swap, that file holds a text no version has.
// It tells itself apart: writeTemp names each file by its own inode, and
// this one has another. Such a file is returned with its text, to be
// recorded before it is removed; one that cannot be read (not a regular
// file) is not returned, and stays. Only the writer, holding the writer
// lock, calls it, so none of them is in use.
func staleTemps(docPath string) []staleTemp {
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(docPath), "."+globEscape(filepath.Base(docPath))+".*.tmp"))
	if err != nil {
		return nil
	}
	var out []staleTemp
	for _, m := range matches {
		st, err := os.Lstat(m)
		if err != nil {
			continue
		}
		t := staleTemp{path: m, mtime: st.ModTime().UnixNano()}
		tag, tagged := tempTag(filepath.Base(m))
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && tagged && sys.Ino != tag {
			f, _, text, err := readAt(m)
			if err != nil {
				continue // not a text: leave it
			}
			f.Close()
			t.replaced, t.text = true, text
		}
		out = append(out, t)
	}
	slices.SortStableFunc(out, func(a, b staleTemp) int { return cmp.Compare(a.mtime, b.mtime) })
	return out
}

// globEscape quotes the glob metacharacters a file name may contain.
func globEscape(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}
