package room

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ArchiveFileName is the file an --archive directory receives.
const ArchiveFileName = "commonroom-archive.jsonl"

// Archive keeps what retention prunes outside the sidecar (issue 26, item
// 4): one JSON object per line per pruned record, appended and fsynced
// before the transaction that deletes the record commits. A batch whose
// archive write fails is rolled back, so nothing is ever deleted without
// its line; a batch whose COMMIT fails after the write is pruned again
// later and its records are written again. Each line carries the kind and
// the id, so a reader keeps the last line of each (kind, id): the records
// are idempotent, never silently missing.
type Archive struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

// ArchiveRecord is one line of the archive.
type ArchiveRecord struct {
	Kind        string         `json:"kind"` // handoff, proposal, version, session, lease, invitation, participant
	ID          string         `json:"id"`
	WorkspaceID string         `json:"workspace_id"`
	PrunedAt    string         `json:"pruned_at"`
	Record      map[string]any `json:"record"`
	// Related rows deleted with the record: a handoff's task, input
	// requests and events.
	Related map[string][]map[string]any `json:"related,omitempty"`
}

// OpenArchive opens (creating if needed, mode 0600) the archive at path, or
// ArchiveFileName inside it when path is a directory, for appending. It
// refuses a path it cannot write now, so ce serve fails at start rather
// than when the first record is due.
func OpenArchive(path string) (*Archive, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, ArchiveFileName)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot open the archive %s for appending: %v", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("cannot sync the archive %s: %v", path, err)
	}
	return &Archive{f: f, path: path}, nil
}

// Path is the file the archive appends to.
func (a *Archive) Path() string { return a.path }

// Append writes the records, one line each, and fsyncs the file before it
// returns: the caller deletes the records only after.
func (a *Archive) Append(recs []ArchiveRecord) error {
	if a == nil || len(recs) == 0 {
		return nil
	}
	var buf []byte
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.f.Write(buf); err != nil {
		return fmt.Errorf("appending to the archive %s: %w", a.path, err)
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("syncing the archive %s: %w", a.path, err)
	}
	return nil
}

// Close closes the archive file.
func (a *Archive) Close() error {
	if a == nil {
		return nil
	}
	return a.f.Close()
}
