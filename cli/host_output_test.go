package cli

import (
	"strings"
	"testing"

	"github.com/commonroom/ce/room"
)

// TestTermSafe: what a participant wrote reaches the host's terminal inert.
func TestTermSafe(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain_text_unchanged", "writer → planner", "writer → planner"},
		{"escape_sequence_defused", "evil\x1b[2J\x1b]0;title\x07", "evil?[2J?]0;title?"},
		{"bidi_override_defused", "abc\u202edcba", "abc?dcba"},
		{"c1_control_defused", "a\u009bb", "a?b"},
		{"newline_and_tab_kept", "a\nb\tc", "a\nb\tc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := termSafe(tc.in); got != tc.want {
				t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// TestPartyNames: a name stands for its id; a shared name carries the id;
// an unnamed id is shown as it is.
func TestPartyNames(t *testing.T) {
	n := partyNames{"participant_a": "writer", "participant_b": "writer", "participant_c": "planner"}
	for _, tc := range []struct{ name, id, want string }{
		{"unique_name", "participant_c", "planner"},
		{"shared_name_carries_the_id", "participant_a", "writer (participant_a)"},
		{"unknown_id_as_is", "participant_z", "participant_z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := n.of(tc.id); got != tc.want {
				t.Errorf("of(%s) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
}

// TestPrintReviewed_WholeDocument: approving a whole-document replacement
// says so in capitals, never as a section edit.
func TestPrintReviewed_WholeDocument(t *testing.T) {
	var b strings.Builder
	p := room.Proposal{ProposalID: "proposal_1", ParticipantID: "participant_w", Scope: room.ScopeDocument, BaseVersion: 3,
		Status: room.ProposalApproved, Summary: "rewrite"}
	printReviewed(&b, "approved", p, 3, "notes.md", partyNames{"participant_w": "writer"})
	want := "approved proposal proposal_1 by writer: \"rewrite\"\n" +
		"  replaces THE WHOLE DOCUMENT (base v3)\n" +
		"next: commit it with `ce commit proposal_1 --workspace notes.md` (or a participant holding commit does)\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
