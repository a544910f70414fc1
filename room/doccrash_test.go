package room_test

// A room killed (SIGKILL) in the middle of a commit's file write. The room
// runs in a child process — this test binary re-run as
// TestDocCrashHelperProcess, with the real engine, store and actor — which
// kills itself at a named point of the guarded replace (the swap seam), so
// nothing of the write's clean-up runs; the parent then opens the room
// again on the same files, as ce serve does after a crash.

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/commonroom/ce/room"
)

const (
	dcChildDoc   = "CE_DOC_CRASH_TEST_DOC"
	dcChildStage = "CE_DOC_CRASH_TEST_STAGE"      // where the child kills itself
	dcChildSave  = "CE_DOC_CRASH_TEST_SAVE"       // "1": an editor saves at the swap stage first
	dcChildNoX   = "CE_DOC_CRASH_TEST_NOEXCHANGE" // "1": the fallback without RENAME_EXCHANGE
)

const (
	dcCommitted = "# Committed\n\nby the room\n"
	dcSaved     = testDoc + "saved in an editor\n"
)

// TestDocCrashHelperProcess is the child: it does nothing unless the
// parent started it. It opens the room, arms the seam and commits; the
// seam kills the process.
func TestDocCrashHelperProcess(t *testing.T) {
	doc := os.Getenv(dcChildDoc)
	if doc == "" {
		return
	}
	stage, save := os.Getenv(dcChildStage), os.Getenv(dcChildSave) == "1"
	e := envAt(t, doc)
	e.open()
	d := docRoom{e}
	if _, err := do(e, func(eng *room.Engine, tx *room.Tx) (none, error) {
		room.SetNoExchange(eng, os.Getenv(dcChildNoX) == "1")
		room.SetSwapHook(eng, func(s string) {
			if s == "swap" && save {
				saveOver(t, doc, dcSaved)
			}
			if s == stage {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		})
		return none{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	d.rawCommit(dcCommitted)
	t.Fatalf("the commit finished: the seam never reached %q", stage)
}

// TestCommit_KilledDuringTheFileWrite: wherever the write is killed, the
// restarted room loses no text. Killed before the swap, the file keeps its
// text and the room's temporary file is removed. Killed after the swap
// (the new text at the document's name, the replaced file under the
// temporary name, the sidecar not committed), the new text becomes an
// outside version, as after any crash between the file write and COMMIT;
// and if an editor saved between the room's check and the swap, that save
// is in the replaced file, and becomes a version before it is removed.
func TestCommit_KilledDuringTheFileWrite(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		stage    string
		save     bool
		noX      bool
		wantFile string
		want     []string // the versions' texts after the restart, from version 1
	}{
		{"killed_before_the_swap_the_file_keeps_its_text", "swap", false, false, testDoc, []string{testDoc}},
		{"killed_after_the_swap_the_new_text_is_an_outside_version", "swapped", false, false, dcCommitted, []string{testDoc, dcCommitted}},
		{"killed_after_the_swap_an_editor_save_that_slipped_in_is_a_version", "swapped", true, false, dcCommitted, []string{testDoc, dcSaved, dcCommitted}},
		{"without_exchange_killed_before_the_rename_the_file_keeps_its_text", "swap", false, true, testDoc, []string{testDoc}},
		{"without_exchange_killed_after_the_rename_the_new_text_is_an_outside_version", "swapped", false, true, dcCommitted, []string{testDoc, dcCommitted}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			doc := filepath.Join(t.TempDir(), "idea.md")
			if err := os.WriteFile(doc, []byte(testDoc), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestDocCrashHelperProcess$", "-test.count=1", "-test.timeout=2m")
			flag := func(on bool) string {
				if on {
					return "1"
				}
				return "0"
			}
			cmd.Env = append(os.Environ(), dcChildDoc+"="+doc, dcChildStage+"="+c.stage, dcChildSave+"="+flag(c.save), dcChildNoX+"="+flag(c.noX))
			out, err := cmd.CombinedOutput()
			if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !st.Signaled() || st.Signal() != syscall.SIGKILL {
				t.Fatalf("the child was not killed at %q (%v):\n%s", c.stage, err, out)
			}

			e := envAt(t, doc)
			e.open()
			t.Cleanup(e.close)
			d := docRoom{e}
			t.Run("the_file_holds_what_it_should", func(t *testing.T) {
				if got := d.fileText(); got != c.wantFile {
					t.Fatalf("file %q, want %q", got, c.wantFile)
				}
			})
			t.Run("no_text_is_lost", func(t *testing.T) {
				if got := d.versionTexts(1); !slices.Equal(got, c.want) {
					t.Fatalf("versions %q, want %q", got, c.want)
				}
			})
			t.Run("no_temporary_file_is_left", func(t *testing.T) { noTempFiles(t, doc) })
		})
	}
}
