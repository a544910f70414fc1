package room_test

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// vimSave saves text the way vim does by default (backupcopy=auto on a
// file with one name): the file is renamed to a backup, a new file is
// written under the name, and the backup is removed.
func vimSave(tb testing.TB, doc, text string) {
	tb.Helper()
	if err := os.Rename(doc, doc+"~"); err != nil {
		tb.Fatal(err)
	}
	vimWrite(tb, doc, text)
}

// vimWrite is the second half of vim's save: the new file under the name
// (created, or truncated if something is there by now), then the backup
// goes.
func vimWrite(tb testing.TB, doc, text string) {
	tb.Helper()
	f, err := os.OpenFile(doc, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := f.WriteString(text); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.Remove(doc + "~"); err != nil {
		tb.Fatal(err)
	}
}

// TestGuard_EditorSavesDuringTheWrite: more than one outside edit, or a
// save that is not one rename (vim's), lands while a commit writes the
// file. Every text a save left becomes a version, none is lost or doubled,
// and the Goals proposal is re-applied on top of the last one, which left
// Goals alone. Where vim's save is cut between its rename and its write,
// the commit recreates the missing file, vim's write then replaces that
// text, and both are versions.
func TestGuard_EditorSavesDuringTheWrite(t *testing.T) {
	t.Parallel()
	const one, two = "saved once\n", "saved twice\n"
	goalsDone := strings.Replace(testDoc, "## Goals\n\nship it\n\n", goalsEdit, 1)
	cases := []struct {
		name     string
		edits    func(doc string) map[string]func()
		after    func(doc string) // once the commit returned
		want     []string         // versions from 2 on
		wantFile string
	}{
		{"vims_backup_rename_save_before_the_swap", func(doc string) map[string]func() {
			return map[string]func(){"swap": func() { vimSave(t, doc, testDoc+one) }}
		}, nil, []string{testDoc + one, goalsDone + one}, goalsDone + one},
		{"vims_save_cut_between_its_rename_and_its_write", func(doc string) map[string]func() {
			return map[string]func(){"swap": func() { must(t, os.Rename(doc, doc+"~")) }}
		}, func(doc string) { vimWrite(t, doc, testDoc+one) }, []string{goalsDone, testDoc + one}, testDoc + one},
		{"two_saves_one_before_and_one_after_the_swap", func(doc string) map[string]func() {
			return map[string]func(){
				"swap":    func() { saveOver(t, doc, testDoc+one) },
				"swapped": func() { saveOver(t, doc, testDoc+one+two) },
			}
		}, nil, []string{testDoc + one, testDoc + one + two, goalsDone + one + two}, goalsDone + one + two},
		{"a_save_then_an_append_after_the_swap", func(doc string) map[string]func() {
			return map[string]func(){
				"swap":    func() { saveOver(t, doc, testDoc+one) },
				"swapped": func() { must(t, appendLine(doc, two)) },
			}
		}, nil, []string{testDoc + one, testDoc + one + two, goalsDone + one + two}, goalsDone + one + two},
		{"two_saves_in_place_before_the_check", func(doc string) map[string]func() {
			return map[string]func(){"read": func() {
				must(t, os.WriteFile(doc, []byte(testDoc+one), 0o644))
				must(t, os.WriteFile(doc, []byte(testDoc+two), 0o644))
			}}
		}, nil, []string{testDoc + two, goalsDone + two}, goalsDone + two},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDocRoom(t)
			a := d.join("a", agentCaps...)
			pr := d.mustPropose(a, "Goals", goalsEdit)
			d.mustApprove(pr.ProposalID)
			d.setSwapHooks(c.edits(d.doc))
			if _, err := d.commitProposal(a, pr.ProposalID); err != nil {
				t.Fatal(err)
			}
			if c.after != nil {
				c.after(d.doc)
			}
			d.sweep()
			if got := d.versionTexts(2); !slices.Equal(got, c.want) {
				t.Fatalf("versions from 2 %q\nwant %q", got, c.want)
			}
			if f := d.fileText(); f != c.wantFile {
				t.Fatalf("file %q, want %q", f, c.wantFile)
			}
			noTempFiles(t, d.doc)
		})
	}
}
