package cli

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// roomFilesPattern is the one .gitignore line that covers every file a room
// keeps beside its document: the sidecar and its -wal/-shm, the writer
// lock, the operator credential, the transport's state directory.
const roomFilesPattern = "*.commonroom.*"

// gitCheckTimeout bounds asking git whether the room's files are ignored;
// serve goes on without the warning past it.
const gitCheckTimeout = 3 * time.Second

// gitWarning says, when docPath lies in a git work tree that does not
// ignore the room's files, that one `git add -A` would commit the sidecar
// (the room's whole history and its participants' work) and the operator
// credential, and which line to add to .gitignore. "" when there is nothing
// to say: no work tree, the files ignored, or git could not tell.
func gitWarning(ctx context.Context, docPath string) string {
	dir := filepath.Dir(docPath)
	root := gitWorkTree(dir)
	if root == "" {
		return ""
	}
	if ignored, known := gitIgnores(ctx, dir, filepath.Base(docPath)+".commonroom.db"); !known || ignored {
		return ""
	}
	return "this file is in a git work tree (" + root + ") that does not ignore the room's files: `git add -A` would commit " +
		"the sidecar (the room's history) and the operator credential. Add this line to " + filepath.Join(root, ".gitignore") +
		":\n  " + roomFilesPattern
}

// gitWorkTree is the nearest directory at or above dir that holds .git (a
// directory, or a file for a linked work tree), or "".
func gitWorkTree(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// gitIgnores asks git whether name (in dir) is ignored; known is false when
// git is not installed or does not answer in time.
func gitIgnores(ctx context.Context, dir, name string) (ignored, known bool) {
	git, err := exec.LookPath("git")
	if err != nil {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, gitCheckTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, git, "-C", dir, "check-ignore", "-q", "--", name)
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0")
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true, true // exit 0: ignored
	case errors.As(err, &ee) && ee.ExitCode() == 1:
		return false, true // exit 1: not ignored
	default:
		return false, false // 128: not a repository after all, a broken one, or killed
	}
}

// indentNote lays a multi-line note under the banner's "Warning:" label.
func indentNote(n string) string {
	return strings.ReplaceAll(n, "\n", "\n             ")
}
