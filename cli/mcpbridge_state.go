package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/commonroom/ce/room"
)

// mcpState is what `ce mcp` keeps between starts so a restarted host comes
// back as the same participant instead of joining again: the session and
// the way in it came through. It holds a bearer secret, so the file is
// 0600 and a wider one is refused.
type mcpState struct {
	WorkspaceID   string    `json:"workspace_id"`
	SessionToken  string    `json:"session_token"`
	ParticipantID string    `json:"participant_id"`
	Hint          room.Hint `json:"hint"`
	// URL is the room's address for a loopback hint; a hint of another
	// transport is dialled again through its plugin at every start.
	URL       string `json:"url"`
	ExpiresAt string `json:"expires_at"`
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

// loadMCPState reads path and checks that it may be used for workspaceID:
// a regular file of this user, mode 0600 or narrower, holding a session of
// that room. Anything else is refused with what to do about it.
func loadMCPState(path, workspaceID string) (mcpState, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return mcpState{}, errNoState
	}
	if err != nil {
		return mcpState{}, mcpRefusal("the state file %s: %v", path, err)
	}
	if !fi.Mode().IsRegular() {
		return mcpState{}, mcpRefusal("the state file %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return mcpState{}, mcpRefusal("the state file %s has mode %04o; it holds a session secret, so ce mcp uses it only when no one else can read it (chmod 600 %s)", path, perm, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return mcpState{}, mcpRefusal("the state file %s belongs to another user", path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return mcpState{}, mcpRefusal("the state file %s: %v", path, err)
	}
	var s mcpState
	if err := json.Unmarshal(b, &s); err != nil || s.SessionToken == "" || s.WorkspaceID == "" {
		return mcpState{}, mcpRefusal("the state file %s is not a ce mcp session (remove it to join again)", path)
	}
	if s.WorkspaceID != workspaceID {
		return mcpState{}, mcpRefusal("the state file %s holds a session of %s, not of the invited %s (use another --state)", path, s.WorkspaceID, workspaceID)
	}
	return s, nil
}

// saveMCPState writes s to path with mode 0600 (the directory 0700),
// replacing any file there in one rename so a crash leaves the old state
// or the new one.
func saveMCPState(path string, s mcpState) error {
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

// mcpRefusal is a refusal at start: exit code 2 with the message.
func mcpRefusal(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}
