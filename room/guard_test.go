package room_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// setSwapHook installs the guarded replace's test seam on the writer
// goroutine: edit runs once, the first time a replacement reaches stage.
func (d docRoom) setSwapHook(stage string, edit func()) {
	d.tb.Helper()
	d.setSwapHooks(map[string]func(){stage: edit})
}

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

func (d docRoom) setNoExchange() {
	d.tb.Helper()
	if _, err := do(d.env, func(eng *room.Engine, tx *room.Tx) (none, error) {
		room.SetNoExchange(eng, true)
		return none{}, nil
	}); err != nil {
		d.tb.Fatal(err)
	}
}

// saveOver replaces path the way an editor saves: a new file, renamed over.
func saveOver(tb testing.TB, path, text string) {
	tb.Helper()
	tmp := filepath.Join(filepath.Dir(path), "editor.swp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

func noTempFiles(tb testing.TB, doc string) {
	tb.Helper()
	ents, err := os.ReadDir(filepath.Dir(doc))
	if err != nil {
		tb.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			tb.Fatalf("left over beside the document: %s", e.Name())
		}
	}
}

// TestGuard_OutsideEditDuringTheWrite makes an outside edit land at each
// point of a commit's file write — between the commit's read and the
// guard's check, between the check and the swap, and after the swap into
// the file that just left the document's name — through the internal seam,
// so the timing is exact. The outside text always becomes a version first.
// A section commit whose section the edit left alone is re-applied onto it;
// any other commit answers stale_version and leaves the outside text in the
// file.
func TestGuard_OutsideEditDuringTheWrite(t *testing.T) {
	t.Parallel()
	const line = "added outside\n"
	outsideText := testDoc + line
	goalsDone := strings.Replace(testDoc, "## Goals\n\nship it\n\n", goalsEdit, 1)

	type edit struct {
		name  string
		stage string
		do    func(tb testing.TB, doc string, held *os.File)
	}
	appendAt := func(stage string) edit {
		return edit{"an_append_" + stage, stage, func(tb testing.TB, doc string, _ *os.File) {
			if err := appendLine(doc, line); err != nil {
				tb.Fatal(err)
			}
		}}
	}
	saveAt := func(stage string) edit {
		return edit{"an_editor_save_" + stage, stage, func(tb testing.TB, doc string, _ *os.File) { saveOver(tb, doc, outsideText) }}
	}
	rewriteAt := func(stage string) edit {
		return edit{"an_in_place_rewrite_" + stage, stage, func(tb testing.TB, doc string, _ *os.File) {
			if err := os.WriteFile(doc, []byte(outsideText), 0o644); err != nil {
				tb.Fatal(err)
			}
		}}
	}
	// A writer that opened the document before the swap and writes after
	// the swapped-out file was read (an appender caught mid-way).
	lateAppend := edit{"a_late_append_to_the_replaced_file", "swapped", func(tb testing.TB, _ string, held *os.File) {
		if _, err := held.WriteString(line); err != nil {
			tb.Fatal(err)
		}
	}}

	// A commitFn prepares a commit (a proposal is made and approved before
	// the seam is armed) and returns it, with the proposal's id if any.
	type commitFn func(d docRoom, a room.Principal) (run func() (room.CommitResult, error), proposalID string)
	proposal := func(section, content string) commitFn {
		return func(d docRoom, a room.Principal) (func() (room.CommitResult, error), string) {
			pr := d.mustPropose(a, section, content)
			d.mustApprove(pr.ProposalID)
			return func() (room.CommitResult, error) { return d.commitProposal(a, pr.ProposalID) }, pr.ProposalID
		}
	}
	rawCommit := func(target, content string) commitFn {
		return func(d docRoom, a room.Principal) (func() (room.CommitResult, error), string) {
			return func() (room.CommitResult, error) {
				return d.commit(d.op(), room.CommitInput{BaseVersion: refOf(int64(1)), Summary: "raw", Target: target, Content: refOf(content)})
			}, ""
		}
	}

	cases := []struct {
		name       string
		noExchange bool
		edit       edit
		commit     commitFn
		wantStale  bool
		wantFile   string // the file after the commit
	}{
		{"goals_proposal_is_rebased_onto", false, appendAt("swap"), proposal("Goals", goalsEdit), false, goalsDone + line},
		{"goals_proposal_is_rebased_onto", false, saveAt("swap"), proposal("Goals", goalsEdit), false, goalsDone + line},
		{"goals_proposal_is_rebased_onto", false, rewriteAt("read"), proposal("Goals", goalsEdit), false, goalsDone + line},
		{"goals_proposal_is_rebased_onto", false, lateAppend, proposal("Goals", goalsEdit), false, goalsDone + line},
		{"raw_goals_commit_is_rebased_onto", false, saveAt("swap"), rawCommit("Goals", goalsEdit), false, goalsDone + line},
		{"risks_proposal_is_stale_after", false, appendAt("swap"), proposal("Risks", "## Risks\n\nmany\n"), true, outsideText},
		{"risks_proposal_is_stale_after", false, lateAppend, proposal("Risks", "## Risks\n\nmany\n"), true, outsideText},
		{"whole_document_raw_commit_is_stale_after", false, saveAt("swap"), rawCommit("", "# Whole\n"), true, outsideText},
		{"whole_document_proposal_is_stale_after", false, appendAt("swap"), proposal("", "# Whole\n"), true, outsideText},
		{"without_exchange_goals_proposal_is_rebased_onto", true, appendAt("swap"), proposal("Goals", goalsEdit), false, goalsDone + line},
		{"without_exchange_goals_proposal_is_rebased_onto", true, saveAt("swap"), proposal("Goals", goalsEdit), false, goalsDone + line},
		{"without_exchange_goals_proposal_is_rebased_onto", true, lateAppend, proposal("Goals", goalsEdit), false, goalsDone + line},
		{"without_exchange_risks_proposal_is_stale_after", true, appendAt("swap"), proposal("Risks", "## Risks\n\nmany\n"), true, outsideText},
	}
	for _, c := range cases {
		t.Run(c.name+"_"+c.edit.name, func(t *testing.T) {
			t.Parallel()
			d := newDocRoom(t)
			a := d.join("a", agentCaps...)
			held, err := os.OpenFile(d.doc, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if c.noExchange {
				d.setNoExchange()
			}
			run, prID := c.commit(d, a)
			d.setSwapHook(c.edit.stage, func() { c.edit.do(t, d.doc, held) })
			mark := d.lastEventID()
			res, err := run()

			t.Run("the_outside_text_is_version_2_without_participant", func(t *testing.T) {
				v := d.versionAt(2)
				if v.Content != outsideText || v.Source != "external" || v.Participant != nil {
					t.Fatalf("version 2 %+v", v)
				}
			})
			t.Run("the_file_holds_what_it_should", func(t *testing.T) {
				if got := d.fileText(); got != c.wantFile {
					t.Fatalf("file %q, want %q", got, c.wantFile)
				}
				noTempFiles(t, d.doc)
			})
			if c.wantStale {
				t.Run("the_commit_is_stale_version_and_the_outside_version_commits", func(t *testing.T) {
					wantKind(t, err, room.KindStaleVersion)
					if errField(t, err, "current_version") != int64(2) || d.version() != 2 {
						t.Fatalf("fields %v, version %d", room.AsError(err).Fields, d.version())
					}
				})
				if prID != "" {
					t.Run("the_proposal_is_conflicted", func(t *testing.T) {
						if st := d.proposalStatus(prID); st != "conflicted" {
							t.Fatalf("status %s", st)
						}
						if got := types(d.eventsAfter(mark)); !slices.Equal(got, []string{"change.committed", "proposal.conflicted"}) {
							t.Fatalf("events %v", got)
						}
					})
				}
				return
			}
			t.Run("the_commit_lands_on_the_outside_text", func(t *testing.T) {
				if err != nil {
					t.Fatal(err)
				}
				v := d.versionAt(3)
				if res.Version != 3 || d.version() != 3 || v.Content != c.wantFile || v.Source == "external" {
					t.Fatalf("result %+v, version 3 %+v, current %d", res, v, d.version())
				}
				if prID != "" && d.proposalStatus(prID) != "committed" {
					t.Fatalf("status %s", d.proposalStatus(prID))
				}
			})
			t.Run("the_writer_does_not_take_its_own_write_for_an_outside_edit", func(t *testing.T) {
				if d.eng.FileChanged() {
					t.Fatal("the engine sees its own write as a change")
				}
				d.sweep()
				if d.version() != 3 {
					t.Fatalf("version %d after a sweep", d.version())
				}
			})
		})
	}
}

// TestGuard_UndoOfARolledBackCommit: a command that wrote the file and
// then failed puts the old text back — but only while the file holds what
// it wrote. An outside edit made since stays (the next sync records it),
// and an outside text the failed command had recorded is what comes back.
func TestGuard_UndoOfARolledBackCommit(t *testing.T) {
	t.Parallel()
	const line = "added outside\n"
	goalsDone := strings.Replace(testDoc, "## Goals\n\nship it\n\n", goalsEdit, 1)
	fail := errors.New("the command fails after its write")
	cases := []struct {
		name      string
		hook      string // stage at which the held descriptor appends line ("" = none)
		afterward bool   // append line to the document after the commit wrote it
		wantFile  string
	}{
		{"the_old_text_comes_back", "", false, testDoc},
		{"an_outside_edit_made_after_the_write_stays", "", true, goalsDone + line},
		{"an_outside_text_the_command_recorded_comes_back", "swapped", false, testDoc + line},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDocRoom(t)
			held, err := os.OpenFile(d.doc, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Close()
			if c.hook != "" {
				d.setSwapHook(c.hook, func() {
					if _, err := held.WriteString(line); err != nil {
						t.Error(err)
					}
				})
			}
			op := d.op()
			_, err = do(d.env, func(eng *room.Engine, tx *room.Tx) (none, error) {
				if _, err := eng.Commit(tx, op, room.CommitInput{BaseVersion: refOf(int64(1)), Target: "Goals", Content: refOf(goalsEdit)}); err != nil {
					return none{}, err
				}
				if c.afterward {
					if err := appendLine(d.doc, line); err != nil {
						return none{}, err
					}
				}
				return none{}, fail
			})
			if !errors.Is(err, fail) {
				t.Fatalf("command error %v", err)
			}
			if got := d.fileText(); got != c.wantFile {
				t.Fatalf("file %q after the undo, want %q", got, c.wantFile)
			}
			if d.version() != 1 {
				t.Fatalf("version %d: the rolled-back command left a version", d.version())
			}
			noTempFiles(t, d.doc)
			d.sweep()
			if want := c.wantFile; want != testDoc {
				if v := d.versionAt(2); v.Content != want || v.Source != "external" {
					t.Fatalf("after a sync, version 2 %+v, want the file's text as an external edit", v)
				}
			} else if d.version() != 1 {
				t.Fatalf("version %d after a sync of the restored file", d.version())
			}
		})
	}
}

// TestGuard_AWriterHoldingTheReplacedFileIsNotLost: an appender that opened
// the document before a commit replaced it and writes afterwards writes to
// the replaced file. The writer keeps that file open and looks again at the
// next sync: the line lands in the document and in a version.
func TestGuard_AWriterHoldingTheReplacedFileIsNotLost(t *testing.T) {
	t.Parallel()
	const line = "written late\n"
	d := newDocRoom(t)
	held, err := os.OpenFile(d.doc, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	d.rawCommit(testDoc + "## More\n\ncommitted\n")
	if _, err := held.WriteString(line); err != nil {
		t.Fatal(err)
	}
	d.sweep()
	want := testDoc + "## More\n\ncommitted\n" + line
	if got := d.fileText(); got != want {
		t.Fatalf("file %q, want %q", got, want)
	}
	if v := d.versionAt(d.version()); v.Content != want || v.Source != "external" {
		t.Fatalf("latest version %+v", v)
	}
}

// TestGuard_AHardLinkKeepsTheOldTextAndItsOwnWrites: a commit replaces the
// file, so another hard link keeps the old text (nothing is lost, the names
// part ways). What is later written through that name stays there: the
// writer does not copy it into the document as it does for a replaced file
// nobody can reach any more.
func TestGuard_AHardLinkKeepsTheOldTextAndItsOwnWrites(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	other := filepath.Join(filepath.Dir(d.doc), "copy.md")
	if err := os.Link(d.doc, other); err != nil {
		t.Fatal(err)
	}
	d.rawCommit("# New\n")
	if err := appendLine(other, "written to the copy\n"); err != nil {
		t.Fatal(err)
	}
	d.sweep()
	b, err := os.ReadFile(other)
	if err != nil || string(b) != testDoc+"written to the copy\n" {
		t.Fatalf("the other link holds %q, %v", b, err)
	}
	if d.fileText() != "# New\n" || d.version() != 2 {
		t.Fatalf("the document holds %q at version %d", d.fileText(), d.version())
	}
}
