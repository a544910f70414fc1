package room_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

func TestCommit_WritesTheFileAndTheVersion(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	pr := d.mustPropose(a, "Goals", goalsEdit)
	d.mustApprove(pr.ProposalID)
	mark := d.lastEventID()
	res, err := d.commitProposal(a, pr.ProposalID)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(testDoc, "## Goals\n\nship it\n\n", goalsEdit, 1)
	t.Run("the_file_holds_the_new_text", func(t *testing.T) {
		if got := d.fileText(); got != want {
			t.Fatalf("file %q, want %q", got, want)
		}
	})
	t.Run("the_version_row_holds_the_same_text", func(t *testing.T) {
		v := d.versionAt(res.Version)
		if res.Version != 2 || v.Content != want || res.Summary != "edit Goals" || res.ParticipantID != a.ParticipantID {
			t.Fatalf("result %+v, version %+v", res, v)
		}
	})
	t.Run("change_committed_names_the_committer", func(t *testing.T) {
		evs := d.eventsAfter(mark)
		if len(evs) == 0 || evs[0].Type != "change.committed" {
			t.Fatalf("events %v", types(evs))
		}
		var pl map[string]any
		json.Unmarshal([]byte(evs[0].Payload), &pl)
		if pl["participant_id"] != a.ParticipantID || pl["version"] != float64(2) {
			t.Fatalf("payload %v", pl)
		}
	})
	t.Run("the_writer_does_not_take_its_own_write_for_an_external_edit", func(t *testing.T) {
		if d.eng.FileChanged() { // readers would ask the writer for a sync
			t.Fatal("the engine sees its own write as a change")
		}
		d.sweep() // syncs the file
		if d.version() != 2 {
			t.Fatalf("version %d after a sweep", d.version())
		}
	})
	t.Run("no_temporary_file_is_left_beside_the_document", func(t *testing.T) {
		ents, err := os.ReadDir(filepath.Dir(d.doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".tmp") {
				t.Fatalf("left over: %s", e.Name())
			}
		}
	})
}

func TestCommit_KeepsTheFileMode(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	if err := os.Chmod(d.doc, 0o640); err != nil {
		t.Fatal(err)
	}
	d.rawCommit("# New\n")
	st, err := os.Stat(d.doc)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", st.Mode().Perm())
	}
}

func TestCommit_ThroughASymlink(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t, withSymlinkedDoc())
	link := d.doc
	d.rawCommit("# Through the link\n")
	t.Run("the_link_stays_a_link", func(t *testing.T) {
		st, err := os.Lstat(link)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("mode %v: the symlink was replaced", st.Mode())
		}
		if dest, _ := os.Readlink(link); dest != filepath.Join("real", "notes.md") {
			t.Fatalf("link points at %q", dest)
		}
	})
	t.Run("its_target_gets_the_text", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(link), "real", "notes.md"))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != "# Through the link\n" {
			t.Fatalf("target holds %q", b)
		}
	})
}

func TestCommit_SectionEditKeepsEveryOtherByte(t *testing.T) {
	t.Parallel()
	const (
		head = "# Überblick 🌍\r\n\r\nEinleitung mit «Zitat»\r\n\r\n"
		sec  = "## Zielé\r\n\r\nalt\r\n\r\n"
		tail = "## Риски\r\n\r\nничего\t \r\n\r\n### 深い\r\n\r\n末尾\r\n"
	)
	d := newDocRoom(t, withDocText(head+sec+tail))
	a := d.join("a", agentCaps...)
	repl := "## Zielé\r\n\r\nneu — besser\r\n\r\n"
	pr := d.mustPropose(a, "Zielé", repl)
	t.Run("the_section_is_addressed_by_its_unicode_path", func(t *testing.T) {
		if pr.Change.Section != "Überblick 🌍/Zielé" {
			t.Fatalf("section %q", pr.Change.Section)
		}
	})
	d.mustApprove(pr.ProposalID)
	if _, err := d.commitProposal(a, pr.ProposalID); err != nil {
		t.Fatal(err)
	}
	t.Run("bytes_outside_the_section_are_unchanged", func(t *testing.T) {
		if got := d.fileText(); got != head+repl+tail {
			t.Fatalf("file %q\nwant %q", got, head+repl+tail)
		}
	})
	t.Run("content_without_a_line_ending_gets_the_files_crlf", func(t *testing.T) {
		pr := d.mustPropose(a, "Zielé", "## Zielé\r\n\r\nohne Ende")
		d.mustApprove(pr.ProposalID)
		if _, err := d.commitProposal(a, pr.ProposalID); err != nil {
			t.Fatal(err)
		}
		if got, want := d.fileText(), head+"## Zielé\r\n\r\nohne Ende\r\n"+tail; got != want {
			t.Fatalf("file %q\nwant %q", got, want)
		}
	})
}

func TestCommit_HeadingsInFencedCodeAreNotRegions(t *testing.T) {
	t.Parallel()
	const doc = "# Title\n\n```md\n# Inside\n## Deeper\n```\n\n## Real\n\ntext\n"
	d := newDocRoom(t, withDocText(doc))
	a := d.join("a", agentCaps...)
	for _, sel := range []string{"Inside", "Title/Inside", "Deeper"} {
		t.Run("propose_targeting_"+sel+"_is_invalid_region", func(t *testing.T) {
			_, err := d.propose(a, room.ProposeInput{Target: sel, BaseVersion: 1, Change: room.ChangeInput{Content: refOf("x")}})
			wantKind(t, err, room.KindInvalidRegion)
		})
		t.Run("checkout_of_"+sel+"_is_invalid_region", func(t *testing.T) {
			_, err := d.checkout(a, sel, nil)
			wantKind(t, err, room.KindInvalidRegion)
		})
	}
	t.Run("replacing_the_real_section_keeps_the_fence", func(t *testing.T) {
		pr := d.mustPropose(a, "Real", "## Real\n\nnew\n")
		d.mustApprove(pr.ProposalID)
		if _, err := d.commitProposal(a, pr.ProposalID); err != nil {
			t.Fatal(err)
		}
		if got := d.fileText(); got != "# Title\n\n```md\n# Inside\n## Deeper\n```\n\n## Real\n\nnew\n" {
			t.Fatalf("file %q", got)
		}
	})
}

// An edit made in an editor after the proposal was approved becomes a
// version first; the commit then refuses with stale_version. Nothing is lost.
func TestCommit_ExternalEditBetweenReadAndCommit(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	pr := d.mustPropose(a, "Goals", goalsEdit)
	d.mustApprove(pr.ProposalID)
	external := testDoc + "\n## Added in an editor\n\nby hand\n"
	if err := os.WriteFile(d.doc, []byte(external), 0o644); err != nil {
		t.Fatal(err)
	}
	mark := d.lastEventID()
	_, err := d.commitProposal(a, pr.ProposalID)
	t.Run("the_commit_is_stale_version", func(t *testing.T) {
		wantKind(t, err, room.KindStaleVersion)
		if errField(t, err, "current_version") != int64(2) || errField(t, err, "base_version") != int64(1) {
			t.Fatalf("fields %v", room.AsError(err).Fields)
		}
	})
	t.Run("the_external_text_is_a_version_without_participant", func(t *testing.T) {
		v := d.versionAt(2)
		if v.Content != external || v.Source != "external" || v.Participant != nil {
			t.Fatalf("version 2 %+v", v)
		}
	})
	t.Run("events_are_the_external_version_then_the_conflict", func(t *testing.T) {
		evs := d.eventsAfter(mark)
		if got := types(evs); !slices.Equal(got, []string{"change.committed", "proposal.conflicted"}) {
			t.Fatalf("events %v", got)
		}
		var pl map[string]any
		json.Unmarshal([]byte(evs[0].Payload), &pl)
		if v, ok := pl["participant_id"]; !ok || v != nil {
			t.Fatalf("payload %v", pl)
		}
	})
	t.Run("the_file_keeps_the_external_text_and_the_proposal_is_conflicted", func(t *testing.T) {
		if d.fileText() != external || d.proposalStatus(pr.ProposalID) != "conflicted" {
			t.Fatalf("file %q, status %s", d.fileText(), d.proposalStatus(pr.ProposalID))
		}
	})
	t.Run("the_diff_leads_from_the_external_text_to_the_attempted_one", func(t *testing.T) {
		got, perr := applyUnifiedDiff(external, errField(t, err, "diff").(string))
		if perr != nil {
			t.Fatal(perr)
		}
		if want := strings.Replace(testDoc, "## Goals\n\nship it\n\n", goalsEdit, 1); got != want {
			t.Fatalf("patched %q, want %q", got, want)
		}
	})
}

// A crash between the file write and COMMIT (the hook fails the command after
// the rename): the command rolls back, the file keeps the text, and the next
// open records it as an external edit.
func TestCommit_CrashBetweenFileWriteAndCommit(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	pr := d.mustPropose(a, "Goals", goalsEdit)
	d.mustApprove(pr.ProposalID)
	want := strings.Replace(testDoc, "## Goals\n\nship it\n\n", goalsEdit, 1)
	crash := errors.New("simulated crash")
	room.SetAfterFileWrite(d.eng, func() error { return crash })
	before, mark := d.docDump(), d.lastEventID()
	_, err := d.commitProposal(a, pr.ProposalID)
	t.Run("the_command_fails", func(t *testing.T) {
		wantKind(t, err, room.KindInternal)
	})
	t.Run("the_file_holds_the_new_text", func(t *testing.T) {
		if d.fileText() != want {
			t.Fatalf("file %q", d.fileText())
		}
	})
	t.Run("nothing_in_the_sidecar_changed", func(t *testing.T) {
		after := d.docDump()
		// the dump ends with the file's text, which did change
		if strings.TrimSuffix(after, want) != strings.TrimSuffix(before, testDoc) || d.lastEventID() != mark {
			t.Fatalf("state changed:\nbefore %s\nafter  %s", before, after)
		}
		if d.proposalStatus(pr.ProposalID) != "approved" {
			t.Fatal("the proposal moved")
		}
	})
	d.restart()
	t.Run("after_restart_the_text_is_an_external_version", func(t *testing.T) {
		v := d.versionAt(d.version())
		if v.Version != 2 || v.Content != want || v.Source != "external" || v.Participant != nil {
			t.Fatalf("latest version %+v", v)
		}
		evs := d.eventsAfter(mark)
		i := slices.Index(types(evs), "change.committed")
		if i < 0 {
			t.Fatalf("events %v", types(evs))
		}
		var pl map[string]any
		json.Unmarshal([]byte(evs[i].Payload), &pl)
		if v, ok := pl["participant_id"]; !ok || v != nil || pl["version"] != float64(2) {
			t.Fatalf("payload %v", pl)
		}
	})
}

func TestRawCommit(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	admin := d.join("admin", room.CapAdmin)
	cases := []struct {
		name string
		who  room.Principal
		in   room.CommitInput
		kind room.Kind
	}{
		{"without_admin_is_permission_denied", a, room.CommitInput{BaseVersion: refOf(int64(1)), Content: refOf("x")}, room.KindPermissionDenied},
		{"without_base_version_is_invalid_request", admin, room.CommitInput{Content: refOf("x")}, room.KindInvalidRequest},
		{"without_content_is_invalid_request", admin, room.CommitInput{BaseVersion: refOf(int64(1))}, room.KindInvalidRequest},
		{"base_in_the_future_is_invalid_request", admin, room.CommitInput{BaseVersion: refOf(int64(9)), Content: refOf("x")}, room.KindInvalidRequest},
		{"base_zero_is_version_not_found", admin, room.CommitInput{BaseVersion: refOf(int64(0)), Content: refOf("x")}, room.KindVersionNotFound},
		{"unknown_target_is_invalid_region", admin, room.CommitInput{BaseVersion: refOf(int64(1)), Content: refOf("x"), Target: "Nope"}, room.KindInvalidRegion},
		{"content_not_utf8_is_invalid_request", admin, room.CommitInput{BaseVersion: refOf(int64(1)), Content: refOf("\xc3")}, room.KindInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, mark := d.docDump(), d.lastEventID()
			_, err := d.commit(c.who, c.in)
			wantKind(t, err, c.kind)
			if d.docDump() != before || d.lastEventID() != mark {
				t.Fatal("a refused commit changed state")
			}
		})
	}
	t.Run("a_target_replaces_only_that_region", func(t *testing.T) {
		res, err := d.commit(admin, room.CommitInput{BaseVersion: refOf(int64(1)), Summary: "risks", Target: "section:Risks",
			Content: refOf("## Risks\n\nplenty\n")})
		if err != nil {
			t.Fatal(err)
		}
		if res.Target == nil || *res.Target != "Idea/Risks" || res.Version != 2 || res.Summary != "risks" {
			t.Fatalf("result %+v", res)
		}
		if want := strings.Replace(testDoc, "none yet", "plenty", 1); d.fileText() != want {
			t.Fatalf("file %q", d.fileText())
		}
		if v := d.versionAt(2); v.Source != "raw_commit" || strOf(v.Participant) != admin.ParticipantID {
			t.Fatalf("version %+v", v)
		}
	})
	t.Run("a_stale_base_is_stale_version_and_changes_nothing", func(t *testing.T) {
		before, mark := d.docDump(), d.lastEventID()
		_, err := d.commit(admin, room.CommitInput{BaseVersion: refOf(int64(1)), Summary: "late", Content: refOf("# Late\n")})
		wantKind(t, err, room.KindStaleVersion)
		if d.docDump() != before || d.lastEventID() != mark {
			t.Fatal("a stale raw commit changed state")
		}
		diff := errField(t, err, "diff").(string)
		if !strings.HasPrefix(diff, "--- v2\n+++ attempted@v1\n") {
			t.Fatalf("diff %q", diff)
		}
		if got, _ := applyUnifiedDiff(d.fileText(), diff); got != "# Late\n" {
			t.Fatalf("patched %q", got)
		}
		changes := errField(t, err, "changes").([]room.VersionChange)
		if len(changes) != 1 || changes[0].Version != 2 || changes[0].Summary != "risks" || strOf(changes[0].ParticipantID) != admin.ParticipantID {
			t.Fatalf("changes %+v", changes)
		}
	})
	t.Run("stale_version_lists_at_most_ten_changes", func(t *testing.T) {
		for i := range 11 {
			d.rawCommit(strings.Repeat("line\n", i+1))
		}
		_, err := d.commit(admin, room.CommitInput{BaseVersion: refOf(int64(1)), Content: refOf("x\n")})
		changes := errField(t, err, "changes").([]room.VersionChange)
		if len(changes) != 10 || changes[0].Version != 2 || changes[9].Version != 11 {
			t.Fatalf("changes %+v", changes)
		}
	})
}

// A committed change notifies the document resource and exactly the sections
// whose text changed (Idea contains Goals, so both changed; Risks did not).
func TestCommit_NotifiesTheDocumentAndTheChangedSections(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	a := d.join("a", agentCaps...)
	pr := d.mustPropose(a, "Goals", goalsEdit)
	d.mustApprove(pr.ProposalID)
	from := d.pub.batchCount()
	if _, err := d.commitProposal(a, pr.ProposalID); err != nil {
		t.Fatal(err)
	}
	d.barrier()
	got := d.pub.resourcesSince(from)
	want := []string{d.eng.DocumentURI(), d.eng.SectionURI("Idea"), d.eng.SectionURI("Idea/Goals")}
	if !slices.Equal(got, want) {
		t.Fatalf("resources %v, want %v", got, want)
	}
	t.Run("a_refused_commit_notifies_nothing", func(t *testing.T) {
		from := d.pub.batchCount()
		_, err := d.commitProposal(a, pr.ProposalID)
		wantKind(t, err, room.KindProposalConflict)
		d.barrier()
		if got := d.pub.resourcesSince(from); len(got) != 0 {
			t.Fatalf("resources %v", got)
		}
	})
}

func TestBootstrap_RemovesTemporaryFilesAKilledWriterLeft(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "idea.md")
	if err := os.WriteFile(doc, []byte("# Idea\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(dir, ".idea.md.123456.tmp")
	other := filepath.Join(dir, ".other.md.123456.tmp")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, []byte("half a write"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	eng, err := room.NewEngine(doc, room.Defaults())
	if err != nil {
		t.Fatal(err)
	}
	st, err := room.OpenStore(ctx, room.SidecarPath(eng.DocPath), false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := actor.Open(ctx, actor.Config{Engine: eng, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(ctx)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatal("the killed writer's temporary file is still there")
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatal("a temporary file of another document was removed")
	}
}
