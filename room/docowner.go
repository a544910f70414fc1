package room

import (
	"os"
	"slices"
	"syscall"
)

// OwnerCheck decides whether a process running as euid with the groups
// given can keep a file's owner and group when it replaces the file: a
// commit writes a new file and renames it over the document, and only
// root may give a file away, and only a member of a group may give it
// that group. It returns nil when it can, or an error saying why not and
// what to do. It is a pure function so the decision is testable as any
// user.
func OwnerCheck(path string, uid, gid uint32, euid int, groups []int) error {
	if euid == 0 {
		return nil
	}
	if int(uid) != euid {
		return Errorf(KindInvalidRequest,
			"%s is owned by uid %d and ce runs as uid %d: a commit replaces the file, and the new file could not keep its owner. "+
				"Run ce as the file's owner, or take the file over (chown) if it is yours to serve", path, uid, euid)
	}
	if !slices.Contains(groups, int(gid)) {
		return Errorf(KindInvalidRequest,
			"%s belongs to group %d, which is not one of yours: a commit replaces the file, and the new file could not keep its group. "+
				"Run ce as a member of group %d, or change the file's group (chgrp) to one of yours", path, gid, gid)
	}
	return nil
}

// CheckDocOwner applies OwnerCheck to the document as this process: ce
// serve decides at open, not on the first commit, whether it can keep
// the document's owner and group.
func CheckDocOwner(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return Errorf(KindInvalidRequest, "cannot open %s: %v", path, err)
	}
	m := metaOf(st)
	groups, err := os.Getgroups()
	if err != nil {
		groups = nil
	}
	groups = append(groups, os.Getegid())
	return OwnerCheck(path, m.uid, m.gid, os.Geteuid(), groups)
}

// DocLinks is how many names the document has. A commit replaces the file
// by rename, so every other hard link keeps the old text (nothing is lost,
// but the names part ways); ce serve warns about it.
func DocLinks(path string) int {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(sys.Nlink)
	}
	return 1
}
