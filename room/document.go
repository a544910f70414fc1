package room

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/commonroom/ce/room/markdown"
)

// fileStamp is the cheap identity of the file on disk. When it changes, the
// writer reads the file and records an out-of-band edit as a new version.
type fileStamp struct {
	size  int64
	mtime int64
	inode uint64
}

func statDoc(path string) (fileStamp, error) {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	fs := fileStamp{size: st.Size(), mtime: st.ModTime().UnixNano()}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fs.inode = sys.Ino
	}
	return fs, nil
}

// readDoc reads the document and its stamp through one descriptor, the
// stamp taken first: an edit during the read shows as a changed stamp
// later, never as a stamp that hides it. A path that is no longer a
// regular file is refused without blocking on it.
func readDoc(path string) (string, fileStamp, error) {
	f, fi, err := openDocFile(path)
	if err != nil {
		if AsError(err) != nil {
			return "", fileStamp{}, err
		}
		return "", fileStamp{}, Errorf(KindInternal, "cannot read the document").wrap(err)
	}
	defer f.Close()
	text, err := readAllAt(f)
	if err != nil {
		return "", fileStamp{}, Errorf(KindInternal, "cannot read the document").wrap(err)
	}
	return text, stampOf(fi), nil
}

func (e *Error) wrap(cause error) *Error { e.cause = cause; return e }

// FileChanged reports whether the document on disk may differ from the last
// version the writer recorded. Readers call it; when it says yes they ask the
// writer to sync, because reads never write. It looks at the document's
// path, as the user does, with one stat (it is on every read's path): when
// the directory has moved, that shows a change, and the writer's sync
// finds the directory away (SyncFile) and remembers what the path shows,
// so reads stop asking until the path changes again (the directory coming
// back does).
func (e *Engine) FileChanged() bool {
	last := e.stamp.Load()
	st, err := statDoc(e.DocPath)
	if err != nil {
		st = fileStamp{} // a vanished file: a change only if it was there before
	}
	return last == nil || *last != st
}

// SyncFile records an out-of-band edit of the file as a new version with no
// participant (the file wins over the sidecar). The file is not rewritten,
// except that bytes a slow appender wrote to a file a commit had already
// replaced are appended to it first (see checkRetired), so they are
// recorded too.
//
// While the document's directory is not where the room opened it
// (DocAway), it reads nothing and records nothing, and answers the
// unavailable error: a commit, a proposal or a checkout based on the file
// says why it cannot go on, and the sweeper and reads, which can do without
// the file, go on (errors.Is(err, ErrDocMoved)). An edit made meanwhile in
// the moved directory is recorded by the first sync after it is back.
func (e *Engine) SyncFile(tx *Tx) error {
	if err := e.DocAway(); err != nil {
		// What the path shows now becomes the stamp at once (a cache, not
		// state that a rollback must undo), so FileChanged stops sending
		// every read here until the path shows something else.
		st, serr := statDoc(e.DocPath)
		if serr != nil {
			st = fileStamp{}
		}
		e.stamp.Store(&st)
		return err
	}
	// A file a commit replaced may have been written to since by a writer
	// that had it open: appends are moved to the document (and recorded
	// below), anything else becomes a version of its own.
	for _, text := range e.file.checkRetired() {
		if err := e.recordExternal(tx, text); err != nil {
			return err
		}
	}
	st, err := statDoc(e.docName())
	if err != nil {
		// The file was removed or is unreadable: keep the sidecar as it is and
		// look again when it changes; never turn a missing file into an empty version.
		tx.after = append(tx.after, func() { e.stamp.Store(&fileStamp{}) })
		return nil
	}
	if last := e.stamp.Load(); last != nil && *last == st {
		return nil
	}
	content, read, err := readDoc(e.docName())
	if err != nil {
		// Something that is not a regular file at the name (a symlink, a
		// FIFO, a directory) is not read: what the path shows is
		// remembered, so reads stop asking for a sync on every request
		// until it changes. Any other failure (internal: the file could
		// not be opened or read) is tried again next time.
		seen := fileStamp{}
		if ErrorKind(err) == KindInvalidRequest { // notRegular's answer
			seen = st
		}
		tx.after = append(tx.after, func() { e.stamp.Store(&seen) })
		return nil
	}
	st = read
	if err := e.recordExternal(tx, content); err != nil {
		return err
	}
	tx.after = append(tx.after, func() { e.stamp.Store(&st) })
	return nil
}

// recordExternal records text as a version with no participant (an edit
// made outside ce) unless the current version already holds it.
func (e *Engine) recordExternal(tx *Tx, text string) error {
	// Only the current version's hash is needed to tell: opening a room on
	// an unchanged large document no longer rebuilds and parses the stored
	// version beside the file's text (issue 17); the first read does.
	var hash string
	err := tx.q.QueryRowContext(tx.ctx, `SELECT content_sha256 FROM versions ORDER BY version DESC LIMIT 1`).Scan(&hash)
	if errors.Is(err, sql.ErrNoRows) {
		return Errorf(KindVersionNotFound, "the room has no version yet")
	}
	if err != nil {
		return Internal(err)
	}
	if hash == contentHash(text) {
		return nil
	}
	_, err = e.addVersion(tx, text, "external substrate edit", "external", "", "")
	return err
}

type versionRow struct {
	version int64
	content string
	hash    string
}

func currentVersion(ctx context.Context, q Querier) (int64, error) {
	var v sql.NullInt64
	if err := q.QueryRowContext(ctx, `SELECT MAX(version) FROM versions`).Scan(&v); err != nil {
		return 0, Internal(err)
	}
	return v.Int64, nil
}

// versionRow reads one version (0 = the current one), rebuilt from its
// chunks and checked against its hash (see readVersion).
func (e *Engine) versionRow(ctx context.Context, q Querier, version int64) (versionRow, error) {
	r, err := readVersion(ctx, q, version)
	if errors.Is(err, sql.ErrNoRows) {
		return r, versionMissing(ctx, q, version)
	}
	if err != nil && AsError(err) == nil {
		return r, Internal(err)
	}
	return r, err
}

// addVersion appends a version, records change.committed, and notes which
// resources changed. source is bootstrap|raw_commit|proposal|external.
func (e *Engine) addVersion(tx *Tx, content, summary, source, participantID, proposalID string) (int64, error) {
	prev, err := e.CurrentDoc(tx.ctx, tx.q) // usually already parsed and cached
	if err != nil {
		return 0, err
	}
	v := prev.Version + 1
	hash := contentHash(content)
	if err := tx.insertVersion(v, content, hash, summary, source, participantID, proposalID); err != nil {
		return 0, err
	}
	var pid any
	if participantID != "" {
		pid = participantID
	}
	if err := tx.emit("change.committed", refs{actor: participantID, version: v},
		map[string]any{"version": v, "summary": summary, "participant_id": pid}); err != nil {
		return 0, err
	}
	// Parse the new text once: for the section notices now, and as the
	// cached current version once the batch commits.
	next := &Doc{Version: v, Content: content, Hash: hash, Regions: markdown.ParseRegions(content)}
	tx.after = append(tx.after, func() { e.docs.put(next) })
	tx.resources = append(tx.resources, e.DocumentURI())
	for _, path := range changedSections(prev, next) {
		tx.resources = append(tx.resources, e.SectionURI(path))
	}
	return v, nil
}

// changedSections lists the region paths whose text differs between two
// versions, including regions that vanished or appeared.
func changedSections(before, after *Doc) []string {
	old := sectionTexts(before)
	cur := sectionTexts(after)
	var out []string
	seen := map[string]bool{}
	for _, p := range old.order {
		if t, ok := cur.text[p]; !ok || t != old.text[p] {
			out = append(out, p)
		}
		seen[p] = true
	}
	for _, p := range cur.order {
		if !seen[p] {
			out = append(out, p)
		}
	}
	return out
}

type sections struct {
	order []string
	text  map[string]string
}

func sectionTexts(d *Doc) sections {
	content := d.Content
	s := sections{text: map[string]string{}}
	for _, r := range d.Regions {
		if _, dup := s.text[r.Path]; dup {
			continue // first match wins, as for selectors
		}
		s.order = append(s.order, r.Path)
		s.text[r.Path] = content[r.Start:r.End]
	}
	return s
}

// Region is a heading-delimited span of the document as the room's reads
// return it. The parser lives in package markdown; the alias keeps the
// room's API (and its callers) spelling it room.Region.
type Region = markdown.Region

// Doc is one parsed version of the document. Versions never change, so a
// parsed one can be shared by every reader.
type Doc struct {
	Version int64
	Content string
	Hash    string
	Regions []Region
}

// docCache keeps the last few parsed versions: the current one, and for
// readers whose snapshot is a commit behind, the ones before it.
type docCache struct {
	mu   sync.Mutex
	docs []*Doc // by version, newest last; at most 4
}

// docCacheSpare bounds the text the cache keeps besides the newest
// version. A 200 MB document kept four copies of itself (issue 17); past
// this bound only the newest is kept, and a reader a commit behind
// rebuilds the version it needs.
const docCacheSpare = 64 << 20

func (c *docCache) get(v int64) *Doc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.docs {
		if d.Version == v {
			return d
		}
	}
	return nil
}

func (c *docCache) put(d *Doc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.docs = slices.DeleteFunc(c.docs, func(x *Doc) bool { return x.Version == d.Version })
	c.docs = append(c.docs, d)
	slices.SortFunc(c.docs, func(a, b *Doc) int { return cmp.Compare(a.Version, b.Version) })
	for len(c.docs) > 1 && (len(c.docs) > 4 || spareBytes(c.docs) > docCacheSpare) {
		c.docs = slices.Delete(c.docs, 0, 1) // clears the freed slot: no hidden reference to a large text
	}
}

// spareBytes is the text held by every cached version but the newest.
func spareBytes(docs []*Doc) int {
	n := 0
	for _, d := range docs[:len(docs)-1] {
		n += len(d.Content)
	}
	return n
}

// CurrentDoc returns the newest version, parsed. The cache is keyed by
// version and content hash, so a parse can never be served for other text
// (a version number can be reused after a rolled-back write).
func (e *Engine) CurrentDoc(ctx context.Context, q Querier) (*Doc, error) {
	var v int64
	var h string
	err := q.QueryRowContext(ctx, `SELECT version, content_sha256 FROM versions ORDER BY version DESC LIMIT 1`).Scan(&v, &h)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, Errorf(KindVersionNotFound, "the room has no version yet")
	}
	if err != nil {
		return nil, Internal(err)
	}
	if d := e.docs.get(v); d != nil && d.Hash == h {
		return d, nil
	}
	// Readers that miss the cache together share one read and one parse:
	// thirty concurrent first reads of a 20 MB document were thirty copies
	// of it and of its regions (issue 13 item 7). The key holds the hash,
	// so only the same text is ever shared.
	res, err, _ := e.parses.Do(strconv.FormatInt(v, 10)+":"+h, func() (any, error) {
		return e.parseVersion(ctx, q, v, h)
	})
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The caller that led the shared parse went away; parse for ourselves.
		return e.parseVersion(ctx, q, v, h)
	}
	if err != nil {
		return nil, err
	}
	return res.(*Doc), nil
}

// parseVersion reads and parses one version and caches it.
func (e *Engine) parseVersion(ctx context.Context, q Querier, v int64, h string) (*Doc, error) {
	if d := e.docs.get(v); d != nil && d.Hash == h {
		return d, nil
	}
	r, err := e.versionRow(ctx, q, v)
	if err != nil {
		return nil, err
	}
	d := &Doc{Version: r.version, Content: r.content, Hash: r.hash, Regions: markdown.ParseRegions(r.content)}
	e.docs.put(d)
	return d, nil
}

// FindSection resolves a selector against the document; the whole-document
// selectors return ok with a zero Region and whole=true.
func (d *Doc) FindSection(selector string) (r Region, whole bool, err error) {
	if err := checkSelector(selector); err != nil {
		return Region{}, false, err
	}
	if markdown.WholeDocument(selector) {
		return Region{}, true, nil
	}
	r, ok := markdown.FindRegion(d.Regions, selector)
	if !ok {
		return Region{}, false, Errorf(KindInvalidRegion, "section %q not found", selector).With("region", selector)
	}
	return r, false, nil
}

// DocumentURI names the whole document as an MCP resource (D18).
func (e *Engine) DocumentURI() string { return "commonroom://workspace/" + e.WorkspaceID }

// SectionURI names one region as an MCP resource (D18).
func (e *Engine) SectionURI(path string) string {
	return e.DocumentURI() + "/section/" + escapeURIComponent(path)
}

// SectionFromURI returns the section path a resource URI names, "" for the
// whole document, and ok=false for a URI that is not this room's.
func (e *Engine) SectionFromURI(uri string) (path string, ok bool) {
	doc := e.DocumentURI()
	if uri == doc {
		return "", true
	}
	rest, found := strings.CutPrefix(uri, doc+"/section/")
	if !found || rest == "" {
		return "", false
	}
	p, err := unescapeURIComponent(rest)
	if err != nil || p == "" {
		return "", false
	}
	return p, true
}

// escapeURIComponent percent-encodes everything but RFC 3986 unreserved
// characters, as RFC 6570 simple expansion of {path} does.
func escapeURIComponent(s string) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexd[c>>4])
		b.WriteByte(hexd[c&15])
	}
	return b.String()
}

func unescapeURIComponent(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("truncated escape")
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", errors.New("bad escape")
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
