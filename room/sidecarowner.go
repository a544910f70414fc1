package room

import (
	"errors"
	"io/fs"
	"os"
)

// SidecarOwnerCheck decides whether a process running as euid may adopt a
// sidecar file (the database, its -wal or -shm) owned by uid: only if the
// file is its own or root's. The sidecar is the room: it holds the
// invitations, sessions and history the room will honour, so one that
// another user wrote beside the document (a directory others may write to,
// say) would hand that user a pre-made invitation and whatever else they
// put in it — the more so when ce runs as root, which could open anyone's
// file. Root's own files are trusted as root is (SECURITY.md). It returns
// nil, or an error naming the file and its owner and saying what to do. It
// is a pure function so the decision is testable as any user.
func SidecarOwnerCheck(path string, uid uint32, euid int) error {
	if int(uid) == euid || uid == 0 {
		return nil
	}
	return Errorf(KindInvalidRequest,
		"%s is owned by uid %d, and ce runs as uid %d: a room's sidecar holds the invitations and sessions the room honours, "+
			"so ce adopts only its own (or root's), never one another user left beside the document. "+
			"If the room is yours, check the file and take it over (chown %d %s), or serve as uid %d; "+
			"otherwise move it away to start a new room there, or use --ephemeral", path, uid, euid, euid, path, uid)
}

// CheckSidecarOwners applies SidecarOwnerCheck, as this process, to the
// sidecar at dbPath and its -wal and -shm, whichever exist; it looks at
// the names themselves (a symlink is judged by its own owner, and refused
// later as not a regular file). ce serve calls it before it takes
// anything else, so a refused room is left exactly as it was.
func CheckSidecarOwners(dbPath string) error {
	euid := os.Geteuid()
	for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm"} {
		st, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Errorf(KindInvalidRequest, "cannot look at %s: %v", p, err)
		}
		if err := SidecarOwnerCheck(p, metaOf(st).uid, euid); err != nil {
			return err
		}
	}
	return nil
}
