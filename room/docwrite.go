package room

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/pmezard/go-difflib/difflib"
)

// CommitInput is either a proposal commit ({proposal_id}, needs commit) or a
// raw commit ({base_version, summary, content, target?}, needs admin). A raw
// commit with a target replaces that region (heading line through the end of
// the region) in the current text; without one, or with "workspace", content
// replaces the whole document.
type CommitInput struct {
	ProposalID  string  `json:"proposal_id,omitempty"`
	BaseVersion *int64  `json:"base_version,omitempty"`
	Summary     string  `json:"summary,omitempty"`
	Content     *string `json:"content,omitempty"`
	Target      string  `json:"target,omitempty"`
}

// CommitResult names the version a commit created. Target (canonical) is set
// for raw commits that named one.
type CommitResult struct {
	Version       int64   `json:"version"`
	Summary       string  `json:"summary"`
	ParticipantID string  `json:"participant_id"`
	Target        *string `json:"target,omitempty"`
}

// VersionChange summarises one version (changes_since, stale_version).
type VersionChange struct {
	Version       int64   `json:"version"`
	Summary       string  `json:"summary"`
	ParticipantID *string `json:"participant_id"`
	CreatedAt     string  `json:"created_at"`
}

// staleChanges is how many versions a stale_version error lists.
const staleChanges = 10

// SetAfterFileWrite installs a hook that runs right after the document has
// been renamed into place and before the version row is written. It exists
// for crash tests (a hook error stands for a crash between the file write and
// COMMIT); production rooms leave it nil. Set it before sending commands.
func (e *Engine) SetAfterFileWrite(f func() error) { e.afterFileWrite = f }

// Commit writes a new version of the document: the file first (atomically,
// mode kept, symlink target resolved at open), then the version row, all
// before the actor's COMMIT. An out-of-band edit of the file is recorded as
// its own version before anything else, so it is never lost; a commit
// against an older base is refused with stale_version and the data to
// recover. Every pending proposal is superseded by a commit.
func (e *Engine) Commit(tx *Tx, p Principal, in CommitInput) (CommitResult, error) {
	if in.ProposalID != "" {
		if in.Content != nil || in.BaseVersion != nil || in.Target != "" || in.Summary != "" {
			return CommitResult{}, invalid("proposal_id",
				"commit takes either proposal_id alone, or base_version, summary, content and an optional target")
		}
		return e.commitProposal(tx, p, in.ProposalID)
	}
	if in.Content == nil && in.BaseVersion == nil {
		return CommitResult{}, invalid("proposal_id", "proposal_id is required (raw commits of content need admin)")
	}
	return e.commitRaw(tx, p, in)
}

func (e *Engine) commitProposal(tx *Tx, p Principal, id string) (CommitResult, error) {
	if err := p.Require(CapCommit); err != nil {
		return CommitResult{}, err
	}
	if err := e.SyncFile(tx); err != nil {
		return CommitResult{}, err
	}
	pr, err := e.loadProposal(tx.ctx, tx.q, id)
	if err != nil {
		return CommitResult{}, err
	}
	if pr.Status != ProposalApproved {
		return CommitResult{}, proposalConflict(pr, "proposal %s is %s; only an approved proposal can be committed", pr.ProposalID, pr.Status)
	}
	d, err := e.txDoc(tx)
	if err != nil {
		return CommitResult{}, err
	}
	if pr.BaseVersion != d.Version {
		attempted, err := e.attemptedText(tx, pr.BaseVersion, d, pr.Change.Section, pr.Change.Content)
		if err != nil {
			return CommitResult{}, err
		}
		stale, err := e.staleError(tx, pr.BaseVersion, d, attempted)
		if err != nil {
			return CommitResult{}, err
		}
		n, err := tx.execN(`UPDATE proposals SET status = 'conflicted', updated_at = ? WHERE proposal_id = ? AND status = 'approved'`,
			tx.nowMS(), pr.ProposalID)
		if err != nil {
			return CommitResult{}, Internal(err)
		}
		if n != 1 {
			return CommitResult{}, proposalConflict(pr, "proposal %s is no longer approved", pr.ProposalID)
		}
		if err := tx.emit("proposal.conflicted", refs{actor: p.ParticipantID}, map[string]any{
			"proposal_id": pr.ProposalID, "status": ProposalConflicted,
			"base_version": pr.BaseVersion, "current_version": d.Version,
		}); err != nil {
			return CommitResult{}, err
		}
		// The proposal's new state commits; the caller still hears stale_version.
		tx.CommitAndFail(stale.With("proposal_id", pr.ProposalID))
		return CommitResult{}, nil
	}
	text := pr.Change.Content
	if pr.Change.Section != "" {
		r, ok := FindRegion(d.Regions, pr.Change.Section)
		if !ok {
			return CommitResult{}, Errorf(KindInvalidRegion, "section %q is no longer in the document", pr.Change.Section).
				With("region", pr.Change.Section).With("proposal_id", pr.ProposalID)
		}
		text = ReplaceRegion(d.Content, r, pr.Change.Content)
	}
	summary := pr.Summary
	if summary == "" {
		summary = "proposal " + pr.ProposalID
	}
	v, err := e.writeVersion(tx, text, summary, "proposal", p.ParticipantID, pr.ProposalID)
	if err != nil {
		return CommitResult{}, err
	}
	n, err := tx.execN(`UPDATE proposals SET status = 'committed', committed_version = ?, updated_at = ?
		WHERE proposal_id = ? AND status = 'approved'`, v, tx.nowMS(), pr.ProposalID)
	if err != nil {
		return CommitResult{}, Internal(err)
	}
	if n != 1 {
		return CommitResult{}, proposalConflict(pr, "proposal %s is no longer approved", pr.ProposalID)
	}
	if err := tx.emit("proposal.committed", refs{actor: p.ParticipantID, version: v}, map[string]any{
		"proposal_id": pr.ProposalID, "version": v, "status": ProposalCommitted,
	}); err != nil {
		return CommitResult{}, err
	}
	if err := e.supersedePending(tx, p.ParticipantID, v); err != nil {
		return CommitResult{}, err
	}
	return CommitResult{Version: v, Summary: summary, ParticipantID: p.ParticipantID}, nil
}

func (e *Engine) commitRaw(tx *Tx, p Principal, in CommitInput) (CommitResult, error) {
	if err := p.Require(CapAdmin); err != nil {
		return CommitResult{}, err
	}
	if in.BaseVersion == nil {
		return CommitResult{}, invalid("base_version", "base_version is required: the version you read")
	}
	if in.Content == nil {
		return CommitResult{}, invalid("content", "content is required")
	}
	content := *in.Content
	if !utf8.ValidString(content) {
		return CommitResult{}, invalid("content", "content is not valid UTF-8")
	}
	if err := checkText("summary", in.Summary, e.Limits.MaxSummaryChars); err != nil {
		return CommitResult{}, err
	}
	if err := e.SyncFile(tx); err != nil {
		return CommitResult{}, err
	}
	d, err := e.txDoc(tx)
	if err != nil {
		return CommitResult{}, err
	}
	base := *in.BaseVersion
	switch {
	case base < 1:
		return CommitResult{}, Errorf(KindVersionNotFound, "version %d does not exist", base).With("base_version", base)
	case base > d.Version:
		return CommitResult{}, invalid("base_version", "base_version %d is in the future; the document is at version %d", base, d.Version).
			With("current_version", d.Version)
	case base != d.Version:
		attempted, err := e.attemptedText(tx, base, d, in.Target, content)
		if err != nil {
			return CommitResult{}, err
		}
		stale, err := e.staleError(tx, base, d, attempted)
		if err != nil {
			return CommitResult{}, err
		}
		return CommitResult{}, stale
	}
	text := content
	var target *string
	if in.Target != "" {
		r, whole, err := d.FindSection(in.Target)
		if err != nil {
			return CommitResult{}, err
		}
		canon := mdWorkspace
		if !whole {
			canon = r.Path
			text = ReplaceRegion(d.Content, r, content)
		}
		target = &canon
	}
	summary := in.Summary
	if summary == "" {
		summary = "raw commit"
	}
	v, err := e.writeVersion(tx, text, summary, "raw_commit", p.ParticipantID, "")
	if err != nil {
		return CommitResult{}, err
	}
	if err := e.supersedePending(tx, p.ParticipantID, v); err != nil {
		return CommitResult{}, err
	}
	return CommitResult{Version: v, Summary: summary, ParticipantID: p.ParticipantID, Target: target}, nil
}

// attemptedText is the document the caller meant to produce: the change
// applied to the base it read (a section missing there is looked up in the
// current text; failing both, the content stands alone).
func (e *Engine) attemptedText(tx *Tx, base int64, cur *Doc, section, content string) (string, error) {
	if section == "" || WholeDocument(section) {
		return content, nil
	}
	b, err := e.versionRow(tx.ctx, tx.q, base)
	if err != nil {
		return "", err
	}
	if r, ok := FindRegion(ParseRegions(b.content), section); ok {
		return ReplaceRegion(b.content, r, content), nil
	}
	if r, ok := FindRegion(cur.Regions, section); ok {
		return ReplaceRegion(cur.Content, r, content), nil
	}
	return content, nil
}

// staleError builds stale_version with everything needed to recover: the
// versions involved, the diff from the current text to the attempted one,
// and the versions committed since the base.
func (e *Engine) staleError(tx *Tx, base int64, cur *Doc, attempted string) (*Error, error) {
	changes, err := versionChanges(tx.ctx, tx.q, base, staleChanges)
	if err != nil {
		return nil, err
	}
	diff, cut := e.unifiedDiff(cur.Content, attempted, fmt.Sprintf("v%d", cur.Version), fmt.Sprintf("attempted@v%d", base))
	stale := Errorf(KindStaleVersion, "base version %d is stale: the document is at version %d; read the diff and propose again",
		base, cur.Version).
		With("base_version", base).With("expected_version", base).With("current_version", cur.Version).
		With("diff", diff).With("changes", changes)
	if cut {
		stale.With("diff_truncated", true)
	}
	return stale, nil
}

// versionChanges lists up to limit versions after `after`, oldest first.
func versionChanges(ctx context.Context, q Querier, after int64, limit int) ([]VersionChange, error) {
	rows, err := q.QueryContext(ctx, `SELECT version, summary, participant_id, created_at FROM versions
		WHERE version > ? ORDER BY version LIMIT ?`, after, limit)
	if err != nil {
		return nil, Internal(err)
	}
	defer rows.Close()
	out := []VersionChange{}
	for rows.Next() {
		var c VersionChange
		var pid sql.NullString
		var created int64
		if err := rows.Scan(&c.Version, &c.Summary, &pid, &created); err != nil {
			return nil, Internal(err)
		}
		c.ParticipantID = optStr(pid)
		c.CreatedAt = WireTime(created)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, Internal(err)
	}
	return out, nil
}

// optStr and optTime turn nullable columns into optional wire values.
func optStr(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	v := s.String
	return &v
}

func optTime(v sql.NullInt64) *string {
	if !v.Valid {
		return nil
	}
	s := WireTime(v.Int64)
	return &s
}

// unifiedDiff renders the unified diff from a to b (3 lines of context),
// bounded by the request body limit and cut on a line boundary; cut reports
// whether it was bounded. A last line without a newline is marked the way
// diff(1) does.
func (e *Engine) unifiedDiff(a, b, fromLabel, toLabel string) (diff string, cut bool) {
	if a == b {
		return "", false
	}
	out, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: diffLines(a), B: diffLines(b), FromFile: fromLabel, ToFile: toLabel, Context: 3,
	})
	if err != nil { // only a failing writer can fail, and a strings.Builder does not
		return "", false
	}
	max := int(e.Limits.MaxBodyBytes)
	if max <= 0 || len(out) <= max {
		return out, false
	}
	out = out[:max]
	if i := strings.LastIndexByte(out, '\n'); i >= 0 {
		out = out[:i+1]
	}
	return out, true
}

func diffLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "\n") {
		lines[len(lines)-1] = last + "\n\\ No newline at end of file\n"
	}
	return lines
}

// txDoc is the current version as this transaction sees it, parsed.
func (e *Engine) txDoc(tx *Tx) (*Doc, error) { return e.CurrentDoc(tx.ctx, tx.q) }

// writeVersion writes text to the file, then records it as the next version.
func (e *Engine) writeVersion(tx *Tx, text, summary, source, participantID, proposalID string) (int64, error) {
	if err := e.writeDoc(tx, text); err != nil {
		return 0, err
	}
	return e.addVersion(tx, text, summary, source, participantID, proposalID)
}

// writeDoc replaces the document atomically: a temporary file in the same
// directory, fsync, the old file's mode, rename over the (symlink-resolved)
// path, fsync of the directory. The stamp of the new file is remembered once
// the transaction commits, so the writer does not mistake its own write for
// an external edit; if the transaction does not commit, the stamp stays old
// and the next sync records the file's text as an external edit (nothing is
// lost, only attribution).
func (e *Engine) writeDoc(tx *Tx, text string) error {
	path := e.DocPath
	previous, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fileError("cannot read the document", err)
	}
	fi, err := replaceFile(path, text)
	if err != nil {
		return err
	}
	if hook := e.afterFileWrite; hook != nil {
		// The crash seam: a failure here stands for the process dying right
		// after the rename, so nothing below (not even the undo) happens.
		if err := hook(); err != nil {
			return Internal(err)
		}
	}
	// If the transaction does not commit, put the old text back so the file
	// never runs ahead of the sidecar. Should that fail too (a full disk),
	// the next sync records the file as an external edit: nothing is lost.
	tx.undo = append(tx.undo, func() error {
		_, err := replaceFile(path, string(previous))
		return err
	})
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fileError("cannot sync the document's directory", err)
	}
	st := stampOf(fi)
	tx.after = append(tx.after, func() { e.stamp.Store(&st) })
	return nil
}

// replaceFile writes text to a temporary file beside path (fsynced, with the
// existing file's mode) and renames it over path. It returns the new file's
// metadata.
func replaceFile(path, text string) (fs.FileInfo, error) {
	dir := filepath.Dir(path)
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fileError("cannot stat the document", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, fileError("cannot create a temporary file beside the document", err)
	}
	tmp := f.Name()
	fi, err := fillTemp(f, text, mode)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fileError("cannot write the document", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fileError("cannot replace the document", err)
	}
	return fi, nil
}

// fillTemp writes, chmods and syncs the temporary file and returns its
// metadata as it will be after the rename (same inode, size and mtime).
func fillTemp(f *os.File, text string, mode fs.FileMode) (fs.FileInfo, error) {
	if _, err := f.WriteString(text); err != nil {
		return nil, err
	}
	if err := f.Chmod(mode); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return f.Stat()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOTSUP) {
		return err
	}
	return nil
}

func stampOf(fi fs.FileInfo) fileStamp {
	st := fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.inode = sys.Ino
	}
	return st
}

func fileError(msg string, err error) *Error {
	return Errorf(KindInternal, "%s", msg).wrap(err)
}

// removeStaleTemps deletes temporary files a killed writer left beside the
// document (".<name>.*.tmp", the pattern replaceFile uses). Only the writer,
// holding the writer lock, calls it, so none of them is in use.
func removeStaleTemps(docPath string) {
	matches, err := filepath.Glob(filepath.Join(filepath.Dir(docPath), "."+globEscape(filepath.Base(docPath))+".*.tmp"))
	if err != nil {
		return
	}
	for _, m := range matches {
		os.Remove(m)
	}
}

// globEscape quotes the glob metacharacters a file name may contain.
func globEscape(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '*', '?', '[', '\\':
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}
