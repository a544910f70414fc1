package room

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unsafe"
)

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
