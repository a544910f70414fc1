package room_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// docRoom is an env with the document operations (leases, proposals,
// commits) as one-line helpers. Every write goes through the real actor.
type docRoom struct{ *env }

func newDocRoom(tb testing.TB, opts ...envOption) docRoom {
	tb.Helper()
	return docRoom{newEnv(tb, opts...)}
}

// withDocText replaces the document's text before the room first opens.
func withDocText(text string) envOption {
	return func(e *env) {
		if err := os.WriteFile(e.doc, []byte(text), 0o644); err != nil {
			e.tb.Fatal(err)
		}
	}
}

// withSymlinkedDoc moves the document to real/notes.md and opens the room
// through a symlink to it (link.md).
func withSymlinkedDoc() envOption {
	return func(e *env) {
		dir := filepath.Dir(e.doc)
		real := filepath.Join(dir, "real", "notes.md")
		if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
			e.tb.Fatal(err)
		}
		if err := os.Rename(e.doc, real); err != nil {
			e.tb.Fatal(err)
		}
		link := filepath.Join(dir, "link.md")
		if err := os.Symlink(filepath.Join("real", "notes.md"), link); err != nil {
			e.tb.Fatal(err)
		}
		e.doc = link
	}
}

func refOf[T any](v T) *T { return &v }

func (d docRoom) checkout(p room.Principal, target string, minutes *int) (room.Lease, error) {
	return do(d.env, func(eng *room.Engine, tx *room.Tx) (room.Lease, error) {
		return eng.Checkout(tx, p, room.CheckoutInput{Target: target, Minutes: minutes})
	})
}

func (d docRoom) mustCheckout(p room.Principal, target string, minutes *int) room.Lease {
	d.tb.Helper()
	l, err := d.checkout(p, target, minutes)
	if err != nil {
		d.tb.Fatalf("checkout %q: %v", target, err)
	}
	return l
}

func (d docRoom) renew(p room.Principal, id string, minutes *int) (room.Lease, error) {
	return do(d.env, func(eng *room.Engine, tx *room.Tx) (room.Lease, error) {
		return eng.Renew(tx, p, room.RenewInput{LeaseID: id, Minutes: minutes})
	})
}

func (d docRoom) release(p room.Principal, id string) error {
	_, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (none, error) {
		_, err := eng.Release(tx, p, room.ReleaseInput{LeaseID: id})
		return none{}, err
	})
	return err
}

func (d docRoom) liveLeases(p room.Principal) []room.Lease {
	d.tb.Helper()
	ls, err := read(d.env, func(eng *room.Engine, q room.Querier) ([]room.Lease, error) {
		r, err := eng.Leases(context.Background(), q, p, room.Empty{})
		return r.Leases, err
	})
	if err != nil {
		d.tb.Fatal(err)
	}
	return ls
}

func (d docRoom) propose(p room.Principal, in room.ProposeInput) (room.Proposal, error) {
	return do(d.env, func(eng *room.Engine, tx *room.Tx) (room.Proposal, error) { return eng.Propose(tx, p, in) })
}

// mustPropose proposes content for section (or the whole document when
// section is "") against the current version.
func (d docRoom) mustPropose(p room.Principal, section, content string) room.Proposal {
	d.tb.Helper()
	target := section
	if target == "" {
		target = "workspace"
	}
	pr, err := d.propose(p, room.ProposeInput{Target: target, BaseVersion: d.version(), Summary: "edit " + target,
		Change: room.ChangeInput{Content: refOf(content), Section: section}})
	if err != nil {
		d.tb.Fatalf("propose %q: %v", section, err)
	}
	return pr
}

func (d docRoom) review(p room.Principal, id string, approve bool) (room.ReviewResult, error) {
	return do(d.env, func(eng *room.Engine, tx *room.Tx) (room.ReviewResult, error) {
		return eng.Review(tx, p, room.ReviewInput{ProposalID: id, Approve: refOf(approve)})
	})
}

func (d docRoom) mustApprove(id string) {
	d.tb.Helper()
	if _, err := d.review(d.op(), id, true); err != nil {
		d.tb.Fatalf("approve %s: %v", id, err)
	}
}

func (d docRoom) commit(p room.Principal, in room.CommitInput) (room.CommitResult, error) {
	return do(d.env, func(eng *room.Engine, tx *room.Tx) (room.CommitResult, error) { return eng.Commit(tx, p, in) })
}

func (d docRoom) commitProposal(p room.Principal, id string) (room.CommitResult, error) {
	return d.commit(p, room.CommitInput{ProposalID: id})
}

// rawCommit replaces the whole document as the operator, at the current version.
func (d docRoom) rawCommit(text string) room.CommitResult {
	d.tb.Helper()
	res, err := d.commit(d.op(), room.CommitInput{BaseVersion: refOf(d.version()), Summary: "raw", Content: refOf(text)})
	if err != nil {
		d.tb.Fatalf("raw commit: %v", err)
	}
	return res
}

// rejectPending rejects every pending proposal, as the operator.
func (d docRoom) rejectPending() {
	d.tb.Helper()
	rows, err := d.store.Reader.Query(`SELECT proposal_id FROM proposals WHERE status = 'pending'`)
	if err != nil {
		d.tb.Fatal(err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			d.tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if _, err := d.review(d.op(), id, false); err != nil {
			d.tb.Fatal(err)
		}
	}
}

func (d docRoom) version() int64 { return d.scalar(`SELECT max(version) FROM versions`) }

func (d docRoom) fileText() string {
	d.tb.Helper()
	b, err := os.ReadFile(d.doc)
	if err != nil {
		d.tb.Fatal(err)
	}
	return string(b)
}

func (d docRoom) proposalStatus(id string) string {
	d.tb.Helper()
	var s string
	if err := d.store.Reader.QueryRow(`SELECT status FROM proposals WHERE proposal_id = ?`, id).Scan(&s); err != nil {
		d.tb.Fatalf("status of %s: %v", id, err)
	}
	return s
}

// docDump is every row the document operations own, plus the file's text:
// two dumps are equal exactly when nothing changed.
func (d docRoom) docDump() string {
	return d.dump(`SELECT * FROM proposals ORDER BY proposal_id`) + "--\n" +
		d.dump(`SELECT * FROM versions ORDER BY version`) + "--\n" +
		d.dump(`SELECT * FROM leases ORDER BY lease_id`) + "--\n" +
		d.dump(`SELECT count(*), max(event_id) FROM events`) + "--\n" + d.fileText()
}

type versionInfo struct {
	Version     int64
	Content     string
	Source      string
	Participant *string
	ProposalID  *string
}

func (d docRoom) versionAt(v int64) versionInfo {
	d.tb.Helper()
	var out versionInfo
	if err := d.store.Reader.QueryRow(`SELECT version, source, participant_id, proposal_id FROM versions WHERE version = ?`, v).
		Scan(&out.Version, &out.Source, &out.Participant, &out.ProposalID); err != nil {
		d.tb.Fatalf("version %d: %v", v, err)
	}
	text, err := room.VersionText(context.Background(), d.store.Reader, v)
	if err != nil {
		d.tb.Fatalf("version %d's text: %v", v, err)
	}
	out.Content = text
	return out
}

// versionTexts is the text of every version from from to the latest, in order.
func (d docRoom) versionTexts(from int64) []string {
	d.tb.Helper()
	var out []string
	for v := from; v <= d.version(); v++ {
		out = append(out, d.versionAt(v).Content)
	}
	return out
}

// resourcesSince returns the resource URIs published in batches after the
// first `from` batches, in order.
func (r *recorder) resourcesSince(from int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []string{}
	for _, b := range r.batches[from:] {
		for _, m := range b.Messages {
			if uri, ok := strings.CutPrefix(m.Topic, "resource:"); ok {
				out = append(out, uri)
			}
		}
	}
	return out
}

func (r *recorder) batchCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches)
}

// errField returns a recovery field of a domain error.
func errField(tb testing.TB, err error, key string) any {
	tb.Helper()
	e := room.AsError(err)
	if e == nil {
		tb.Fatalf("no error, wanted one with field %q", key)
	}
	v, ok := e.Fields[key]
	if !ok {
		tb.Fatalf("error %v has no field %q (fields %v)", err, key, e.Fields)
	}
	return v
}

var hunkHeader = regexp.MustCompile(`^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@`)

// applyUnifiedDiff applies a unified diff to text, checking every context and
// removed line, so a test can prove a diff is usable as a patch.
func applyUnifiedDiff(text, diff string) (string, error) {
	src := splitKeep(text)
	lines := splitKeep(diff)
	var out []string
	at := 0 // next unread line of src, 0-based
	i := 0
	for i < len(lines) && !strings.HasPrefix(lines[i], "@@") {
		i++ // the --- / +++ header
	}
	for i < len(lines) {
		m := hunkHeader.FindStringSubmatch(lines[i])
		if m == nil {
			return "", fmt.Errorf("bad hunk header %q", lines[i])
		}
		oldStart, _ := strconv.Atoi(m[1])
		oldCount := 1
		if m[2] != "" {
			oldCount, _ = strconv.Atoi(m[2])
		}
		start := oldStart - 1
		if oldCount == 0 {
			start = oldStart // an empty old range names the line it follows
		}
		if start < at || start > len(src) {
			return "", fmt.Errorf("hunk %q out of order", lines[i])
		}
		out = append(out, src[at:start]...)
		at = start
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "@@"); i++ {
			l := lines[i]
			switch l[0] {
			case '\\': // "\ No newline at end of file" belongs to the line before
				if n := len(out); n > 0 {
					out[n-1] = strings.TrimSuffix(out[n-1], "\n")
				}
			case ' ', '-':
				want := l[1:]
				if i+1 < len(lines) && lines[i+1][0] == '\\' {
					want = strings.TrimSuffix(want, "\n")
				}
				if at >= len(src) || src[at] != want {
					return "", fmt.Errorf("line %d does not match %q", at+1, l)
				}
				if l[0] == ' ' {
					out = append(out, src[at])
				}
				at++
			case '+':
				out = append(out, l[1:])
			default:
				return "", fmt.Errorf("bad diff line %q", l)
			}
		}
	}
	out = append(out, src[at:]...)
	return strings.Join(out, ""), nil
}

func splitKeep(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.SplitAfter(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}
