package room

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// LockPath is the writer lock beside the document. Whoever holds an
// exclusive flock on it is the room's one writer (D21).
func LockPath(docPath string) string { return docPath + ".commonroom.lock" }

// WriterLock is a held writer lock. The kernel drops it when the process
// dies, so a kill -9 never leaves a room locked.
type WriterLock struct {
	f *os.File
}

// ErrLocked means another process is the room's writer.
var ErrLocked = errors.New("another process is serving this room")

// AcquireWriterLock takes the writer lock without waiting. It returns
// ErrLocked (wrapped with the holder's pid when known) if it is held.
func AcquireWriterLock(docPath string) (*WriterLock, error) {
	// The lock file gets the document's read/write bits (and group): it
	// holds only a pid, and whoever may open the document may see who
	// serves it.
	perm, gid, haveGid := docBits(docPath)
	if _, err := createOrNarrow(LockPath(docPath), perm, gid, haveGid); err != nil && !errors.Is(err, fs.ErrPermission) {
		return nil, Errorf(KindInternal, "cannot create the lock file").wrap(err)
	}
	f, err := os.OpenFile(LockPath(docPath), os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, Errorf(KindInternal, "cannot open the lock file").wrap(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := readPid(f)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if pid > 0 {
				return nil, fmt.Errorf("%w (pid %d)", ErrLocked, pid)
			}
			return nil, ErrLocked
		}
		return nil, Errorf(KindInternal, "cannot lock the room").wrap(err)
	}
	// Record our pid for the error message others get; the lock, not the
	// content, is what counts.
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return &WriterLock{f: f}, nil
}

func readPid(f *os.File) int {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:n])))
	return pid
}

// Release gives the lock up.
func (l *WriterLock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	err := l.f.Close()
	l.f = nil
	return err
}
