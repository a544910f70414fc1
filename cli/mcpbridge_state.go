package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/commonroom/ce/room"
)

// sessionState is the session state file: what `ce mcp` keeps between
// starts so a restarted host comes back as the same participant instead of
// joining again (the session and the way in it came through), and what
// `ce call --state` reads to send one request with that session. It holds
// a bearer secret, so the file is 0600 and a wider one is refused. Unknown
// fields are ignored so the file can grow; expires_at is not judged here
// because sessions slide — the room says whether the session still holds.
type sessionState struct {
	WorkspaceID   string    `json:"workspace_id"`
	SessionToken  string    `json:"session_token"`
	ParticipantID string    `json:"participant_id"`
	Hint          room.Hint `json:"hint"`
	// Hints are further ways in, walked in order by `ce call` (ce mcp
	// writes none: it keeps the one hint it joined over).
	Hints []room.Hint `json:"hints,omitempty"`
	// URL is the room's address for a loopback hint; a hint of another
	// transport is dialled again through its plugin at every start.
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
}

// hints are the ways in the file names: Hints, else the one Hint.
func (s sessionState) hints() []room.Hint {
	if len(s.Hints) == 0 && s.Hint.Type != "" {
		return []room.Hint{s.Hint}
	}
	return s.Hints
}

// defaultMCPStatePath is $XDG_CONFIG_HOME/commonroom/sessions/<ws>.json (or
// ~/.config/…): one session per room per user, found again by the
// invitation's workspace id.
func defaultMCPStatePath(env Env, workspaceID string) string {
	base := filepath.Dir(filepath.Dir(joinStateDir(env, "x"))) // …/commonroom
	return filepath.Join(base, "sessions", stateDirName(workspaceID)+".json")
}

// errNoState is loadMCPState's answer when there is no state file yet.
var errNoState = errors.New("no state file")

// maxStateFile bounds the session state file read.
const maxStateFile = 1 << 20

// readStateFile reads the session state file at path, refusing one that
// is not a regular file of this user (a symlink included), that others may
// read (it holds a bearer secret), or that is larger than maxStateFile.
// A missing file is an error that satisfies errors.Is(err, fs.ErrNotExist).
func readStateFile(path string) (sessionState, error) {
	var s sessionState
	fh, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return s, err
	}
	// Lstat as well: the file opened must be the one at path, not a link's
	// target.
	if li, err := os.Lstat(path); err != nil || !li.Mode().IsRegular() || !fi.Mode().IsRegular() || !os.SameFile(fi, li) {
		return s, fmt.Errorf("the state file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return s, fmt.Errorf("the state file %s has mode %04o; it holds a session secret, so it is used only when no one else can read it (chmod 600 %s)", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return s, fmt.Errorf("the state file %s belongs to another user", path)
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxStateFile+1))
	if err != nil {
		return s, fmt.Errorf("the state file %s: %v", path, err)
	}
	if len(b) > maxStateFile {
		return s, fmt.Errorf("the state file %s is larger than %d bytes", path, maxStateFile)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("the state file %s is not a session state file (a JSON object): %v", path, err)
	}
	return s, nil
}

// loadMCPState reads path and checks that it may be used for workspaceID:
// a state file readStateFile accepts, holding a session of that room.
// Anything else is refused with what to do about it.
func loadMCPState(path, workspaceID string) (sessionState, error) {
	s, err := readStateFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return sessionState{}, errNoState
	}
	if err != nil {
		return sessionState{}, usageError("%v", err)
	}
	if s.SessionToken == "" || s.WorkspaceID == "" {
		return sessionState{}, usageError("the state file %s is not a ce mcp session (remove it to join again)", path)
	}
	if s.WorkspaceID != workspaceID {
		return sessionState{}, usageError("the state file %s holds a session of %s, not of the invited %s (use another --state)", path, s.WorkspaceID, workspaceID)
	}
	return s, nil
}

// saveMCPState writes s to path with mode 0600 (the directory 0700),
// replacing any file there in one rename so a crash leaves the old state
// or the new one.
func saveMCPState(path string, s sessionState) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("the state directory: %w", err)
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".mcp-state-*")
	if err != nil {
		return fmt.Errorf("the state file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// stateLockPoll is how often a ce mcp waiting for another one's lock on
// the state file tries again.
const stateLockPoll = 20 * time.Millisecond

// lockMCPState takes an exclusive lock (flock) on PATH.lock, beside the
// state file, for the step that reads the state file and, when there is
// none, joins and saves the new session. Two ce mcp started at once on one
// fresh state file (a host that launches its servers twice, two hosts
// sharing a --state) used to both join: two participants, one of them
// orphaned, or a one-use invitation spent by the first and the second
// failing. With the lock the second waits for the first to save and then
// reuses its session. The wait is bounded (wait, the transport timeout: a
// join takes at most about that long); past it the error says who holds
// the lock and what to do. The lock file is created 0600 in the state
// file's directory (made 0700, as saveMCPState would) and is never
// removed: removing a flock's file races with its next taker. The
// returned unlock may be called more than once.
func lockMCPState(ctx context.Context, log *slog.Logger, path string, wait time.Duration) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, usageError("the state directory of %s: %v", path, err)
	}
	lockPath := path + ".lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, usageError("the state file's lock %s: %v", lockPath, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, usageError("the state file's lock %s is not a regular file; move it away", lockPath)
	}
	try := func() (bool, error) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return false, nil
		}
		return err == nil, err
	}
	got, err := try()
	if !got && err == nil {
		log.Info("another ce mcp is joining with this state file; waiting for it, then using its session", "state", path, "lock", lockPath, "at_most", wait.String())
		deadline := time.NewTimer(wait)
		defer deadline.Stop()
		tick := time.NewTicker(stateLockPoll)
		defer tick.Stop()
		for !got && err == nil {
			select {
			case <-ctx.Done():
				err = ctx.Err()
			case <-deadline.C:
				f.Close()
				return nil, room.Errorf(room.KindRoomBusy,
					"another ce mcp has held %s for %s (--transport-timeout) while it joins the room with the state file %s; gave up waiting. "+
						"Try again once it has joined (it then shares its session), or give this host its own --state", lockPath, wait, path)
			case <-tick.C:
				got, err = try()
			}
		}
	}
	if err != nil {
		f.Close()
		return nil, room.Errorf(room.KindInternal, "cannot lock the state file's lock %s: %v", lockPath, err)
	}
	return sync.OnceFunc(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}), nil
}
