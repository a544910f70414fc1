package room_test

import (
	"os"
	"testing"

	"github.com/commonroom/ce/room"
)

// Scenarios of the file write the code already handled, whose tests were
// missing (the adversarial review of the document file path).

// TestCommit_DocumentDeletedWhileServing: a sync of a deleted document
// records nothing (never an empty version), and the next commit puts the
// file back with its text, keeping the mode the file had.
func TestCommit_DocumentDeletedWhileServing(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	must(t, os.Chmod(d.doc, 0o640))
	d.sweep() // the room reads the mode with the file
	d.rawCommit(testDoc + "one\n")
	must(t, os.Remove(d.doc))
	d.sweep()
	if v := d.version(); v != 2 {
		t.Fatalf("version %d after a sync of the deleted file, want 2", v)
	}
	d.rawCommit("# Back\n")
	if got := d.fileText(); got != "# Back\n" {
		t.Fatalf("file %q", got)
	}
	if st, err := os.Stat(d.doc); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v (%v), want 0640", st.Mode().Perm(), err)
	}
	noTempFiles(t, d.doc)
}

// TestCommit_KeepsAModeChangedWhileServing: the mode a commit gives the new
// file is the one the file has when the commit reads it, not the one it
// had when the room opened.
func TestCommit_KeepsAModeChangedWhileServing(t *testing.T) {
	t.Parallel()
	d := newDocRoom(t)
	must(t, os.Chmod(d.doc, 0o600))
	d.rawCommit("# New\n")
	if st, err := os.Stat(d.doc); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}

// TestCommit_KeepsABOMAndBytesThatAreNotUTF8: the file is bytes. A byte
// order mark, CRLF line ends and bytes that are not UTF-8 outside the
// section a commit replaces stay as they were, and an outside edit that
// adds such bytes is recorded byte for byte.
func TestCommit_KeepsABOMAndBytesThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	const (
		head = "\ufeff# Title\r\n\r\nLatin-1: caf\xe9, a stray \xff\xfe\r\n\r\n"
		tail = "## Risks\r\n\r\nnone \x80\r\n"
	)
	d := newDocRoom(t, withDocText(head+"## Goals\r\n\r\nold\r\n\r\n"+tail))
	if v := d.versionAt(1); v.Content != head+"## Goals\r\n\r\nold\r\n\r\n"+tail {
		t.Fatalf("version 1 %q", v.Content)
	}
	res, err := d.commit(d.op(), room.CommitInput{BaseVersion: refOf(int64(1)), Summary: "goals", Target: "Goals",
		Content: refOf("## Goals\r\n\r\nnew\r\n\r\n")})
	if err != nil {
		t.Fatal(err)
	}
	want := head + "## Goals\r\n\r\nnew\r\n\r\n" + tail
	if got := d.fileText(); got != want || d.versionAt(res.Version).Content != want {
		t.Fatalf("file %q, want %q", got, want)
	}
	outside := want + "more \xc3(\r\n"
	must(t, os.WriteFile(d.doc, []byte(outside), 0o644))
	d.sweep()
	if v := d.versionAt(d.version()); v.Content != outside || v.Source != "external" {
		t.Fatalf("latest version %+v, want the outside bytes as they are", v)
	}
}
