package room

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// docBits is the permission the room's files beside the document start
// from: the document's read and write bits, never execute or special bits,
// and the document's group (ok false: the document could not be read).
// The lock file, which says only who serves the room, gets exactly these.
func docBits(docPath string) (fs.FileMode, uint32, bool) {
	st, err := os.Stat(docPath)
	if err != nil {
		return 0o600, 0, false
	}
	m := metaOf(st)
	return m.mode & 0o666, m.gid, true
}

// sidecarBits is docBits never wider than 0600: the sidecar, its -wal and
// -shm hold the whole text and its history, and also what only the room's
// participants were meant to see (proposals, results, answers, the hashes
// of their credentials). Reading the document does not make someone a
// participant, so a group- or world-readable document still gets an
// owner-only sidecar (DESIGN §12); no one reads it who cannot read the
// document.
func sidecarBits(docPath string) (fs.FileMode, uint32, bool) {
	perm, gid, ok := docBits(docPath)
	return perm & 0o600, gid, ok
}

// createOrNarrow makes path exist with at most perm: a missing file is
// created with exactly perm and the document's group (where this process
// may give it that group); an existing one wider than perm loses the
// extra bits. narrowed reports the latter.
func createOrNarrow(path string, perm fs.FileMode, gid uint32, haveGid bool) (narrowed bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
	switch {
	case err == nil:
		defer f.Close()
		if haveGid {
			f.Chown(-1, int(gid)) // best effort: only a member of the group (or root) may
		}
		return false, f.Chmod(perm) // the umask may have narrowed it further; make it exact
	case errors.Is(err, fs.ErrExist):
		return narrow(path, perm)
	default:
		return false, err
	}
}

// narrow removes from an existing file every permission bit perm lacks.
func narrow(path string, perm fs.FileMode) (bool, error) {
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%s is %s", path, fileKind(st.Mode()))
	}
	cur := st.Mode().Perm()
	if cur&^perm == 0 {
		return false, nil
	}
	return true, os.Chmod(path, cur&perm)
}

// PrepareSidecar makes the sidecar no more readable than the document
// before SQLite opens it: a missing sidecar is created empty with the
// document's read/write bits and group (SQLite then gives -wal and -shm
// the database file's mode), and an existing sidecar, -wal or -shm wider
// than those bits is narrowed. It returns the files it narrowed, for a log
// line. dbPath may be elsewhere (--ephemeral); the bits still come from
// the document. A sidecar that is not ours — another user's file
// (CheckSidecarOwners), or another program's — is refused first, as
// OpenStore would, and left untouched, its mode included.
func PrepareSidecar(ctx context.Context, docPath, dbPath string) ([]string, error) {
	if err := CheckSidecarOwners(dbPath); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dbPath); err == nil {
		if err := checkForeign(ctx, dbPath, false); err != nil {
			return nil, err
		}
	}
	perm, gid, ok := sidecarBits(docPath)
	var narrowed []string
	n, err := createOrNarrow(dbPath, perm, gid, ok)
	if err != nil {
		return nil, Errorf(KindInternal, "cannot prepare the sidecar %s", dbPath).wrap(err)
	}
	if n {
		narrowed = append(narrowed, dbPath)
	}
	for _, p := range []string{dbPath + "-wal", dbPath + "-shm"} {
		n, err := narrow(p, perm)
		if err != nil {
			return nil, Errorf(KindInternal, "cannot narrow the permissions of %s", filepath.Base(p)).wrap(err)
		}
		if n {
			narrowed = append(narrowed, p)
		}
	}
	return narrowed, nil
}
