package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/commonroom/ce/room"
)

// restoreMissingDocument writes the document back from its sidecar when
// the file is gone but a sidecar beside it holds a room: the case of a
// sidecar restored from a backup or a Litestream replica without its
// Markdown file. Every version is in the sidecar, so the newest one is the
// document as the room last knew it; without this, serving would create an
// empty file and record the empty text as an outside edit.
//
// A file that exists is never touched, whatever it holds: an older copy
// put back beside a restored sidecar is indistinguishable from an edit
// made while the room was down, and becomes a version like one (the newer
// text stays in the history). Nothing happens while another process serves
// the room, or with --ephemeral (whose sidecar is not beside the file).
func restoreMissingDocument(ctx context.Context, env Env, file string) error {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil // ResolveDocPath reports it
	}
	if _, err := os.Lstat(abs); !errors.Is(err, fs.ErrNotExist) {
		return nil // the file (or a symlink) is there, or unreadable: not ours to judge
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return nil
	}
	path := filepath.Join(dir, filepath.Base(abs))
	db := room.SidecarPath(path)
	st, err := os.Stat(db)
	if err != nil || !st.Mode().IsRegular() {
		return nil // no room here yet: serving creates one, as always
	}
	lock, err := room.AcquireWriterLock(path)
	if err != nil {
		if errors.Is(err, room.ErrLocked) {
			return nil // serve reports the room that holds it
		}
		return err
	}
	defer lock.Release()
	version, content, err := room.NewestVersion(ctx, db)
	if room.ErrorKind(err) == room.KindNotFound {
		return nil // an empty sidecar: nothing to restore
	}
	if err != nil {
		return err
	}
	// The file gets the sidecar's permission bits: of the two, the sidecar
	// is the one that survived with the owner's choice.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, st.Mode().Perm()&0o666)
	if err != nil {
		return room.Errorf(room.KindInvalidRequest, "cannot write %s back from its sidecar: %v", file, err)
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDirOf(path)
	}
	if err != nil {
		os.Remove(path)
		return room.Errorf(room.KindInternal, "writing %s back from its sidecar: %v", file, err)
	}
	fmt.Fprintf(env.Stderr, "ce: %s was missing; wrote it back from version %d in its sidecar\n", file, version)
	return nil
}
