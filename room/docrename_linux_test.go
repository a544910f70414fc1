//go:build linux

package room_test

import (
	"os"
	"testing"

	"github.com/commonroom/ce/room"
	"golang.org/x/sys/unix"
)

// fsImmutableFL is FS_IMMUTABLE_FL of linux/fs.h, which x/sys does not name.
const fsImmutableFL = 0x10

// setImmutable sets or clears the file's immutable attribute (chattr +i):
// then no rename may replace it, not even root's, as on a filesystem where
// rename-over fails. It skips where the filesystem has no such attribute.
func setImmutable(t *testing.T, path string, on bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Skipf("no file attributes here: %v", err)
	}
	if on {
		flags |= fsImmutableFL
	} else {
		flags &^= fsImmutableFL
	}
	if err := unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags)); err != nil {
		t.Skipf("cannot set the immutable attribute here: %v", err)
	}
}

// TestCommit_WhenTheDocumentCannotBeReplaced (already handled; the test
// was missing): where no rename may replace the document (here an
// immutable file; elsewhere a filesystem where rename-over fails), with
// RENAME_EXCHANGE and without, the commit fails, the file keeps its text,
// no temporary file is left, no version is made and the proposal stays
// approved; once the file can be replaced again the commit lands.
func TestCommit_WhenTheDocumentCannotBeReplaced(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name       string
		noExchange bool
	}{{"with_exchange_the_commit_fails_and_changes_nothing", false}, {"without_exchange_the_commit_fails_and_changes_nothing", true}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			d := newDocRoom(t)
			if c.noExchange {
				d.setNoExchange()
			}
			a := d.join("a", agentCaps...)
			pr := d.mustPropose(a, "Goals", goalsEdit)
			d.mustApprove(pr.ProposalID)
			setImmutable(t, d.doc, true)
			t.Cleanup(func() { setImmutable(t, d.doc, false) })
			before := d.docDump()
			_, err := d.commitProposal(a, pr.ProposalID)
			wantKind(t, err, room.KindInternal)
			if d.docDump() != before {
				t.Fatal("a commit that could not replace the file changed the file or the sidecar")
			}
			noTempFiles(t, d.doc)
			setImmutable(t, d.doc, false)
			if _, err := d.commitProposal(a, pr.ProposalID); err != nil {
				t.Fatalf("once the file can be replaced: %v", err)
			}
			if d.proposalStatus(pr.ProposalID) != "committed" || d.version() != 2 {
				t.Fatalf("status %s, version %d", d.proposalStatus(pr.ProposalID), d.version())
			}
		})
	}
}
