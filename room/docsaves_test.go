package room_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// setSwapHooks installs the guarded replace's seam with one edit per
// stage, each run once, the first time a replacement reaches its stage.
func (d docRoom) setSwapHooks(edits map[string]func()) {
	d.tb.Helper()
	_, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (none, error) {
		room.SetSwapHook(eng, func(s string) {
			if f := edits[s]; f != nil {
				delete(edits, s)
				f()
			}
		})
		return none{}, nil
	})
	if err != nil {
		d.tb.Fatal(err)
	}
}

// TestGuard_EditorSavesDuringTheWrite: more than one outside edit lands
// while a commit writes the file. Every text a save left becomes a
// version, none is lost or doubled, and the Goals proposal is re-applied
// on top of the last one, which left Goals alone.
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
		{"a_save_then_an_append_after_the_swap", func(doc string) map[string]func() {
			return map[string]func(){
				"swap":    func() { saveOver(t, doc, testDoc+one) },
				"swapped": func() { must(t, appendLine(doc, two)) },
			}
		}, nil, []string{testDoc + one, testDoc + one + two, goalsDone + one + two}, goalsDone + one + two},
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
			var got []string
			for v := int64(2); v <= d.version(); v++ {
				got = append(got, d.versionAt(v).Content)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("versions from 2 %q\nwant %q", got, c.want)
			}
			if f := d.fileText(); f != c.wantFile {
				t.Fatalf("file %q, want %q", f, c.wantFile)
			}
			noTempFiles(t, d.doc)
		})
	}
}
