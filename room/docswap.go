package room

import (
	"errors"
	"hash/maphash"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// The guarded replacement of the document (issue 13 item 1). A commit must
// never lose an edit made outside ce — an editor's save (write a temporary
// file, rename it over) or an append — that lands while the commit writes.
// So the document is replaced only if it still holds the text the commit
// was based on, and whatever leaves the document's name is read after it
// left: if it is not that text, it is an outside edit, handed back to the
// caller to record as a version.
//
// On Linux the replacement is renameat2(RENAME_EXCHANGE): the new text and
// the document swap names in one step, so the file that was the document
// still exists (under the temporary name) and is read once more after the
// swap. An edit that slipped in between the check and the swap is found
// there, and the swap is undone. A writer that opened the old file before
// the swap and writes to it after that read (an appender: open, write,
// close) is caught by looking at the old file once more, through the
// descriptor still held, after it was unlinked; and since such a writer
// may be slower still (descheduled between its open and its write), the
// last few replaced files stay open and are looked at again before every
// later replacement and sync (see checkRetired). What remains is a writer
// that holds the old file open across all of that.

// errNoExchange says the atomic exchange is not available here.
var errNoExchange = errors.New("RENAME_EXCHANGE is not supported")

// swapResult is what one guarded replacement found and did.
type swapResult struct {
	// placed: the document's name now holds the new text.
	placed bool
	// outside lists texts found at the document's name that were neither
	// the expected one nor ours, oldest first: edits made outside ce. The
	// caller records each as a version, so none is lost.
	outside []string
	// stamp is the new file's identity as written (before anyone else
	// could touch it), so the writer never takes its own write for an
	// outside edit — and never takes an append to it for its own.
	stamp fileStamp
	// syncErr is a failed fsync of the directory after the new text was
	// placed; the caller reports it once the undo is registered.
	syncErr error
}

// hook runs the tests' seam at a named point of a replacement.
func (g *guardedFile) hook(stage string) {
	if h := g.swapHook; h != nil {
		h(stage)
	}
}

// replace puts want at the document's name if the document holds expect.
// It never leaves an unread text behind: a text found instead of expect,
// or left in the old file after the swap, is returned in outside. With
// placed false and nothing outside, the document changed under the check in
// a way only a new attempt can see (it vanished, or the fallback's check
// failed): try again.
func (g *guardedFile) replace(expect, want string) (swapResult, error) {
	var res swapResult
	path := g.name()
	if res.outside = g.checkRetired(); len(res.outside) > 0 {
		return res, nil // an old file rewritten in place: record it, then look again
	}
	g.hook("read")
	old, oldInfo, err := openDocFile(path)
	missing := errors.Is(err, fs.ErrNotExist)
	if err != nil && !missing {
		if AsError(err) != nil {
			return res, docReplaced(path) // not a regular file any more
		}
		return res, fileError("cannot read the document", err)
	}
	if !missing {
		defer func() {
			if old != nil {
				old.Close()
			}
		}()
		seen, err := readAllAt(old)
		if err != nil {
			return res, fileError("cannot read the document", err)
		}
		g.meta = metaOf(oldInfo)
		if seen != expect {
			res.outside = append(res.outside, seen)
			return res, nil
		}
	}
	tmp, mine, err := g.writeTemp(want)
	if err != nil {
		return res, err
	}
	defer func() {
		if mine != nil {
			mine.Close()
		}
	}()
	mineInfo, err := mine.Stat()
	if err != nil {
		os.Remove(tmp)
		return res, fileError("cannot write the document", err)
	}
	res.stamp = stampOf(mineInfo)
	g.hook("swap")
	if missing {
		return g.createDoc(tmp, res)
	}
	err = errNoExchange
	if !g.noExchange {
		err = exchangeFiles(tmp, path)
	}
	switch {
	case errors.Is(err, errNoExchange):
		res, err = g.renameChecked(tmp, old, oldInfo, expect, res)
		if res.placed {
			old = nil // retired: the list keeps it open
		}
		return res, err
	case errors.Is(err, fs.ErrNotExist):
		os.Remove(tmp) // the document vanished after the read: look again
		return res, nil
	case err != nil:
		os.Remove(tmp)
		return res, fileError("cannot replace the document", err)
	}
	// tmp now names the file that was the document until the swap.
	gone, goneInfo, goneText, err := readAt(tmp)
	if err != nil {
		// Our text is in place, but what it replaced cannot be read: put
		// that file back rather than delete a text nobody has seen.
		if xerr := exchangeFiles(tmp, path); xerr == nil {
			os.Remove(tmp)
			if AsError(err) != nil {
				// Not a regular file: something put at the name in the
				// window (a symlink, a FIFO), now back there untouched.
				return res, docReplaced(path)
			}
		}
		return res, fileError("cannot read back the replaced document", err)
	}
	g.hook("swapped")
	if goneText != expect {
		// An edit slipped in between the check and the swap.
		gone.Close()
		res.outside = append(res.outside, goneText)
		ours := newRetired(mine, mineInfo, want)
		mine = nil // swapBack retires it
		return g.swapBack(tmp, ours, res)
	}
	if err := os.Remove(tmp); err != nil {
		gone.Close()
		return res, fileError("cannot remove the replaced document", err)
	}
	res.placed = true
	res.syncErr = g.syncDir()
	r := newRetired(gone, goneInfo, goneText)
	if late, _, ok := r.look(); ok {
		res.outside = append(res.outside, late)
	}
	g.retire(r)
	return res, nil
}

// maxReplaceAttempts bounds how often one commit re-applies itself to
// outside edits that keep landing while it writes; past it the commit
// answers stale_version (the edits are versions by then).
const maxReplaceAttempts = 8

// restore puts prev back where the file holds ours (the text a commit
// wrote and will not commit), through the same guard as a commit: if the
// file no longer holds ours, an outside edit is there and stays (the next
// sync records it); a text written to our file after we checked it is put
// in the file instead of prev, since no version holds it.
func (g *guardedFile) restore(ours, prev string) error {
	expect, want := ours, prev
	for range maxReplaceAttempts {
		res, err := g.replace(expect, want)
		if err != nil {
			return err
		}
		switch {
		case !res.placed && len(res.outside) > 0:
			return nil // someone else's text is there: leave it
		case !res.placed:
			continue
		case len(res.outside) == 0:
			return nil
		}
		expect, want = want, res.outside[len(res.outside)-1]
	}
	return Errorf(KindInternal, "the document kept changing while ce put its previous text back; the next sync records what it holds")
}

// retiredFile is a file a replacement took off the document's name, kept
// open for a while: a writer that opened it before the swap (an appender:
// open, write, close) may still write to it. It keeps the size and a hash
// of what it held at the last look, not the text, so a large document is
// not held several times over. The hash is maphash with a seed chosen at
// start: fast, and not something an outside writer can aim a collision at.
type retiredFile struct {
	f    *os.File
	info fs.FileInfo // fstat at the last look, taken before its read
	size int         // bytes read at the last look
	sum  uint64
}

var retiredSeed = maphash.MakeSeed()

func newRetired(f *os.File, info fs.FileInfo, text string) retiredFile {
	return retiredFile{f: f, info: info, size: len(text), sum: maphash.String(retiredSeed, text)}
}

// maxRetired is how many replaced files stay open for a later look.
const maxRetired = 4

// A file that still has another name (a hard link) is not kept: it is not
// lost, and writes through that name belong to that file, not the document.
func (g *guardedFile) retire(r retiredFile) {
	if st, err := r.f.Stat(); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Nlink > 0 {
			r.f.Close()
			return
		}
	}
	if len(g.retired) == maxRetired {
		g.retired[0].f.Close()
		g.retired = slices.Delete(g.retired, 0, 1)
	}
	g.retired = append(g.retired, r)
}

// look returns what the file holds if it changed since the last look, and
// whether the change only appended to it (then the new bytes are
// text[appendedFrom:]).
func (r *retiredFile) look() (text string, appendedFrom int, changed bool) {
	st, err := r.f.Stat()
	if err != nil {
		return "", 0, false
	}
	if st.Size() == r.info.Size() && st.Size() == int64(r.size) && st.ModTime().Equal(r.info.ModTime()) {
		return "", 0, false
	}
	text, err = readAllAt(r.f)
	if err != nil {
		return "", 0, false
	}
	r.info = st
	appendedFrom = -1
	if len(text) >= r.size && maphash.String(retiredSeed, text[:r.size]) == r.sum {
		if len(text) == r.size {
			return "", 0, false // rewritten with the same bytes
		}
		appendedFrom = r.size
	}
	r.size, r.sum = len(text), maphash.String(retiredSeed, text)
	return text, appendedFrom, true
}

// checkRetired looks again at the files recent replacements took off the
// document's name. Bytes appended to one since are appended to the
// document, where their writer meant them to go, so the next read records
// them as an outside edit; a file changed otherwise is returned whole, to
// be recorded as an outside text as it stands.
func (g *guardedFile) checkRetired() []string {
	var rewritten []string
	for i := range g.retired {
		if text, ok := g.settle(&g.retired[i]); ok {
			rewritten = append(rewritten, text)
		}
	}
	return rewritten
}

// settle looks at a file that left the document's name: bytes appended
// to it since the last look are appended to the document; a file changed
// otherwise is returned whole (ok) for the caller to record.
func (g *guardedFile) settle(r *retiredFile) (string, bool) {
	text, from, ok := r.look()
	if !ok {
		return "", false
	}
	if from >= 0 && appendToDoc(g.name(), text[from:]) == nil {
		return "", false
	}
	return text, true
}

// appendToDoc appends text to the document in place.
func appendToDoc(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return errors.New("the document is not a regular file")
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// swapBack undoes a swap that took out an outside edit: the edit goes back
// to the document's name and our file leaves it. Our file was the document
// for a moment, so a writer may have appended to it meanwhile (or may
// still, through a descriptor opened then): it is kept open like a
// replaced file, and what was written to it goes to the document. If
// someone replaced our file in that moment, that text is read, recorded
// and put back at the name instead.
func (g *guardedFile) swapBack(tmp string, ours retiredFile, in swapResult) (swapResult, error) {
	res, path := in, g.name()
	if err := exchangeFiles(tmp, path); err != nil {
		// Our text stays in place; the outside edit is read and will be
		// recorded, and the caller replaces again from our text.
		ours.f.Close()
		os.Remove(tmp)
		res.placed = true
		return res, nil
	}
	// Our file has left the name: what was written to it while it was the
	// document goes to the document now, and later writes at the next look.
	// It is retired as settle leaves it (a closure, not the value deferred
	// before the look): retired as it was, bytes appended to it would be
	// found again at the next look and appended to the document twice.
	defer func() { g.retire(ours) }()
	if text, ok := g.settle(&ours); ok {
		res.outside = append(res.outside, text)
	}
	back, err := os.Lstat(tmp)
	if err == nil && os.SameFile(back, ours.info) {
		os.Remove(tmp)
		return res, nil
	}
	// Not ours: a save replaced our text meanwhile. It is the newest text;
	// read it and put it at the name.
	f, _, text, err := readAt(tmp)
	if err != nil {
		return res, fileError("cannot read back an outside edit", err)
	}
	f.Close()
	res.outside = append(res.outside, text)
	if err := os.Rename(tmp, path); err != nil {
		return res, fileError("cannot put an outside edit back", err)
	}
	return res, nil
}

// renameChecked is the replacement where RENAME_EXCHANGE is not available
// (another kernel, or a filesystem without it): check that the name still
// holds the file that was read, unchanged, then rename over it. The window
// that remains is between that check and the rename: an editor's save
// landing there is replaced unseen. A write to the old file is still
// caught by reading it once more after the rename.
func (g *guardedFile) renameChecked(tmp string, old *os.File, oldInfo fs.FileInfo, read string, res swapResult) (swapResult, error) {
	path := g.name()
	now, err := os.Lstat(path)
	same := err == nil && os.SameFile(now, oldInfo)
	if same {
		if st, err := old.Stat(); err != nil || st.Size() != oldInfo.Size() || !st.ModTime().Equal(oldInfo.ModTime()) {
			same = false
		}
	}
	if !same {
		os.Remove(tmp) // changed since the read: the next attempt reads it
		return res, nil
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return res, fileError("cannot replace the document", err)
	}
	g.hook("swapped")
	res.placed = true
	res.syncErr = g.syncDir()
	r := newRetired(old, oldInfo, read)
	if late, _, ok := r.look(); ok {
		res.outside = append(res.outside, late)
	}
	g.retire(r)
	return res, nil
}

// createDoc puts the new file at the document's name when there is no
// document (it was deleted): link(2) fails rather than replace a file
// created meanwhile, which the next attempt then reads.
func (g *guardedFile) createDoc(tmp string, res swapResult) (swapResult, error) {
	path := g.name()
	err := os.Link(tmp, path)
	switch {
	case err == nil:
		os.Remove(tmp)
	case errors.Is(err, fs.ErrExist):
		os.Remove(tmp)
		return res, nil
	default:
		// A filesystem without hard links: a plain rename, which would
		// replace a file created in the instant since the check.
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return res, fileError("cannot create the document", err)
		}
	}
	res.placed = true
	res.syncErr = g.syncDir()
	return res, nil
}

// writeTemp writes text to a new temporary file beside the document with the
// document's owner, group and mode (as last read), synced, and returns its
// name and the open file. It fails rather than change the owner.
func (g *guardedFile) writeTemp(text string) (string, *os.File, error) {
	path := g.name()
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", nil, fileError("cannot create a temporary file beside the document", err)
	}
	name := f.Name()
	fail := func(msg string, err error) (string, *os.File, error) {
		f.Close()
		os.Remove(name)
		return "", nil, fileError(msg, err)
	}
	// The file carries its own inode in its name (tempTagged): after a
	// crash, a temporary file whose inode is another one is the document
	// the exchange took off its name, and is read before it is removed.
	if st, err := f.Stat(); err == nil {
		if sys, ok := st.Sys().(*syscall.Stat_t); ok {
			tagged := tempTagged(name, sys.Ino)
			if err := os.Rename(name, tagged); err != nil {
				return fail("cannot create a temporary file beside the document", err)
			}
			name = tagged
		}
	}
	if _, err := f.WriteString(text); err != nil {
		return fail("cannot write the document", err)
	}
	m := g.meta
	if !m.known {
		m = docMeta{mode: 0o644, uid: uint32(os.Geteuid()), gid: uint32(os.Getegid())}
	}
	// Owner first: a chown by anyone but root clears setuid and setgid.
	if st, err := f.Stat(); err == nil {
		if cur := metaOf(st); cur.uid != m.uid || cur.gid != m.gid {
			if err := f.Chown(int(m.uid), int(m.gid)); err != nil {
				return fail("cannot give the new document the old one's owner and group", err)
			}
		}
	}
	if err := f.Chmod(m.mode); err != nil {
		return fail("cannot give the new document the old one's mode", err)
	}
	if err := f.Sync(); err != nil {
		return fail("cannot write the document", err)
	}
	return name, f, nil
}

// readAt opens a file that has just left the document's name and reads it.
func readAt(path string) (*os.File, fs.FileInfo, string, error) {
	f, fi, err := openDocFile(path)
	if err != nil {
		return nil, nil, "", err
	}
	text, err := readAllAt(f)
	if err != nil {
		f.Close()
		return nil, nil, "", err
	}
	return f, fi, text, nil
}

// syncDir makes a rename in the document's directory durable, through
// the descriptor held.
func (g *guardedFile) syncDir() error {
	if g.dir == nil {
		return nil
	}
	return g.dir.sync()
}
