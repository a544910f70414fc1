package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/commonroom/ce/room"
)

// backupFile is one file a backup wrote.
type backupFile struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	Mode   string `json:"mode"`
	SHA256 string `json:"sha256,omitempty"`
}

// backupResult is what `ce backup --json` prints.
type backupResult struct {
	WorkspaceID string     `json:"workspace_id"`
	Version     int64      `json:"version"`
	Dir         string     `json:"dir"`
	DirCreated  bool       `json:"dir_created"`
	Document    backupFile `json:"document"`
	Sidecar     backupFile `json:"sidecar"`
	Serving     bool       `json:"serving"`
	// LiveDocumentMatches says whether the live file held the backed-up
	// version's text when the backup finished; false means an edit of the
	// file was not yet recorded as a version (the backup holds the version).
	LiveDocumentMatches bool `json:"live_document_matches"`
}

func backupCommand(env Env) *ffcli.Command {
	fs := flag.NewFlagSet("ce backup", flag.ContinueOnError)
	workspace := fs.String("workspace", "", workspaceUsage)
	asJSON := fs.Bool("json", false, "print JSON")
	return &ffcli.Command{
		Name:       "backup",
		ShortUsage: "ce backup --workspace FILE [--json] DIR",
		ShortHelp:  "copy the room (sidecar and document, at one version) into DIR, while it serves or not",
		LongHelp: "Writes DIR/NAME.md and DIR/NAME.md.commonroom.db: a consistent snapshot of the sidecar " +
			"and the document text of the snapshot's newest version, so `ce serve DIR/NAME.md` opens the same " +
			"room (same workspace id, sessions still valid). DIR is created if it does not exist (its parent " +
			"must); a DIR that already holds either file is refused. Nothing in the live room changes.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErr("backup takes exactly one DIR")
			}
			res, err := backupRoom(ctx, *workspace, args[0])
			if err != nil {
				return err
			}
			if !res.LiveDocumentMatches {
				fmt.Fprintf(env.Stderr, "ce: note: the live file differs from version %d (an edit not yet recorded as a version); the backup holds version %d\n",
					res.Version, res.Version)
			}
			if *asJSON {
				return printJSON(env.Stdout, res)
			}
			fmt.Fprintf(env.Stdout, "backup of room %s at version %d\n", res.WorkspaceID, res.Version)
			fmt.Fprintf(env.Stdout, "  %s  %d bytes  mode %s\n", res.Document.Path, res.Document.Bytes, res.Document.Mode)
			fmt.Fprintf(env.Stdout, "  %s  %d bytes  mode %s\n", res.Sidecar.Path, res.Sidecar.Bytes, res.Sidecar.Mode)
			fmt.Fprintf(env.Stdout, "serve it with: ce serve %s\n", res.Document.Path)
			return nil
		},
	}
}

// backupRoom copies the room of docPath into dir. The sidecar is
// snapshotted first (room.BackupSidecar) into a temporary file, the
// document is written from that snapshot's newest version, both are
// fsynced and given their modes, and only then do they get their names
// (hard links, which never replace an existing file). A failure leaves dir
// as it was (a directory the backup created is removed again).
func backupRoom(ctx context.Context, docPath, dir string) (_ *backupResult, err error) {
	abs, err := room.ExistingDocPath(docPath)
	if err != nil {
		return nil, err
	}
	docInfo, err := os.Stat(abs)
	if err != nil {
		return nil, room.Errorf(room.KindNotFound, "%s: %v", docPath, err)
	}
	liveDB := room.SidecarPath(abs)
	dbInfo, err := os.Stat(liveDB)
	if err != nil {
		return nil, room.Errorf(room.KindNotFound, "%s has no room yet (no %s): run `ce serve` first", docPath, filepath.Base(liveDB))
	}
	// The document copy gets the document's permission bits; the sidecar
	// copy the same without execute bits, never wider than the live
	// sidecar and never wider than 0600, like the live one (DESIGN §12).
	docMode := docInfo.Mode().Perm()
	dbMode := docMode & dbInfo.Mode().Perm() & 0o600

	res := &backupResult{}
	if res.Dir, err = filepath.Abs(dir); err != nil {
		return nil, room.Errorf(room.KindInvalidRequest, "bad directory %q", dir)
	}
	switch st, serr := os.Stat(res.Dir); {
	case errors.Is(serr, fs.ErrNotExist):
		// Only DIR itself is created: a mistyped parent is an error, not a tree.
		if err := os.Mkdir(res.Dir, 0o700); err != nil {
			return nil, room.Errorf(room.KindInvalidRequest, "cannot create %s: %v", dir, err)
		}
		res.DirCreated = true
		defer func() {
			if err != nil {
				os.Remove(res.Dir) // only if still empty
			}
		}()
	case serr != nil:
		return nil, room.Errorf(room.KindInvalidRequest, "cannot use %s: %v", dir, serr)
	case !st.IsDir():
		return nil, room.Errorf(room.KindInvalidRequest, "%s is not a directory", dir)
	}
	name := filepath.Base(abs)
	dstDoc := filepath.Join(res.Dir, name)
	dstDB := room.SidecarPath(dstDoc)
	// A stale -wal or -shm beside the copy would be applied to it on open:
	// refuse those as firmly as the files themselves.
	for _, p := range []string{dstDoc, dstDB, dstDB + "-wal", dstDB + "-shm", dstDB + "-journal"} {
		if _, err := os.Lstat(p); err == nil {
			return nil, room.Errorf(room.KindInvalidRequest,
				"%s already holds %s; a backup never overwrites: choose another directory", dir, filepath.Base(p))
		}
	}
	if abs == dstDoc {
		return nil, room.Errorf(room.KindInvalidRequest, "%s is the room's own directory", dir)
	}

	tmpDB, err := os.CreateTemp(res.Dir, "."+name+".backup-db-*")
	if err != nil {
		return nil, room.Errorf(room.KindInvalidRequest, "cannot write in %s: %v", dir, err)
	}
	tmpDB.Close()
	defer os.Remove(tmpDB.Name())
	snap, err := room.BackupSidecar(ctx, liveDB, tmpDB.Name())
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(tmpDB.Name(), dbMode); err != nil {
		return nil, room.Internal(err)
	}
	tmpDoc, err := os.CreateTemp(res.Dir, "."+name+".backup-md-*")
	if err != nil {
		return nil, room.Errorf(room.KindInvalidRequest, "cannot write in %s: %v", dir, err)
	}
	defer os.Remove(tmpDoc.Name())
	_, err = tmpDoc.WriteString(snap.Content)
	if err == nil {
		err = tmpDoc.Chmod(docMode)
	}
	if err == nil {
		err = tmpDoc.Sync()
	}
	if cerr := tmpDoc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, room.Errorf(room.KindInternal, "writing the document copy: %v", err)
	}
	if err := linkNew(tmpDB.Name(), dstDB); err != nil {
		return nil, err
	}
	if err := linkNew(tmpDoc.Name(), dstDoc); err != nil {
		os.Remove(dstDB)
		return nil, err
	}
	if err := syncDirOf(dstDoc); err != nil {
		return nil, room.Errorf(room.KindInternal, "syncing %s: %v", dir, err)
	}

	res.WorkspaceID, res.Version = snap.WorkspaceID, snap.Version
	res.Document = backupFile{Path: dstDoc, Bytes: int64(len(snap.Content)), Mode: fmt.Sprintf("%04o", docMode), SHA256: snap.ContentSHA256}
	res.Sidecar = backupFile{Path: dstDB, Bytes: snap.Bytes, Mode: fmt.Sprintf("%04o", dbMode)}
	if of, err := readOwnerFile(abs); err == nil && processAlive(of.PID) {
		res.Serving = true
	}
	if live, err := os.ReadFile(abs); err == nil {
		h := sha256.Sum256(live)
		res.LiveDocumentMatches = hex.EncodeToString(h[:]) == snap.ContentSHA256
	}
	return res, nil
}

// linkNew gives the finished temporary file its name without ever
// replacing a file that appeared there meanwhile.
func linkNew(tmp, dst string) error {
	err := os.Link(tmp, dst)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return room.Errorf(room.KindInvalidRequest, "%s appeared while the backup ran; a backup never overwrites", dst)
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EXDEV), errors.Is(err, syscall.ENOTSUP):
		// A filesystem without hard links: check, then rename.
		if _, err := os.Lstat(dst); err == nil {
			return room.Errorf(room.KindInvalidRequest, "%s appeared while the backup ran; a backup never overwrites", dst)
		}
		if err := os.Rename(tmp, dst); err != nil {
			return room.Errorf(room.KindInternal, "naming %s: %v", dst, err)
		}
		return nil
	default:
		return room.Errorf(room.KindInternal, "naming %s: %v", dst, err)
	}
}

func syncDirOf(path string) error {
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
