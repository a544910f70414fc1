package room

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/commonroom/ce/room/markdown"
)

// OutlineEntry is one heading in a summary.
type OutlineEntry struct {
	Title string `json:"title"`
	Level int    `json:"level"`
	Line  int    `json:"line"`
	Path  string `json:"path"`
}

// SummaryInput bounds a summary. Zero values take the defaults (20 lines,
// 2,048 bytes, every depth).
type SummaryInput struct {
	MaxLines int `json:"max_lines,omitempty" jsonschema:"lines of excerpt (default 20)" schema:"minimum=0"`
	MaxBytes int `json:"max_bytes,omitempty" jsonschema:"bytes of excerpt (default 2048)" schema:"minimum=0"`
	MaxDepth int `json:"max_depth,omitempty" jsonschema:"deepest heading level in the outline" schema:"minimum=0"`
}

// Summary is a bounded first look at the document.
type Summary struct {
	WorkspaceID string         `json:"workspace_id"`
	Version     int64          `json:"version"`
	Outline     []OutlineEntry `json:"outline"`
	Excerpt     string         `json:"excerpt"`
	Truncated   bool           `json:"truncated"`
}

// Summary returns the first ten outline entries and an excerpt.
func (e *Engine) Summary(ctx context.Context, q Querier, p Principal, in SummaryInput) (Summary, error) {
	if err := p.Require(CapRead); err != nil {
		return Summary{}, err
	}
	if in.MaxLines < 0 || in.MaxBytes < 0 || in.MaxDepth < 0 {
		return Summary{}, Errorf(KindInvalidRequest, "max_lines, max_bytes and max_depth must not be negative")
	}
	d, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return Summary{}, err
	}
	lines, bytes := orDefault(in.MaxLines, 20), orDefault(in.MaxBytes, 2048)
	out := Summary{WorkspaceID: e.WorkspaceID, Version: d.Version, Outline: []OutlineEntry{}}
	for _, r := range d.Regions {
		if in.MaxDepth > 0 && r.Level > in.MaxDepth {
			continue
		}
		if len(out.Outline) == 10 {
			break
		}
		out.Outline = append(out.Outline, OutlineEntry{Title: r.Title, Level: r.Level, Line: r.Line, Path: r.Path})
	}
	out.Excerpt, out.Truncated = markdown.Truncate(d.Content, lines, bytes)
	return out, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// RegionsResult is the answer to a regions read: an object, so an MCP tool
// result can carry it as structured content.
type RegionsResult struct {
	Regions []Region `json:"regions"`
}

// Regions lists the document's headings.
func (e *Engine) Regions(ctx context.Context, q Querier, p Principal, _ Empty) (RegionsResult, error) {
	rs, err := e.regions(ctx, q, p)
	return RegionsResult{Regions: rs}, err
}

func (e *Engine) regions(ctx context.Context, q Querier, p Principal) ([]Region, error) {
	if err := p.Require(CapRead); err != nil {
		return nil, err
	}
	d, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return nil, err
	}
	return nonNil(d.Regions), nil
}

// ReadInput selects and bounds a read. An empty Section is the whole document.
type ReadInput struct {
	Section  string `json:"section,omitempty" jsonschema:"a heading title or path (e.g. \"Plan/Risks\"); omit for the whole document"`
	MaxLines int    `json:"max_lines,omitempty" jsonschema:"at most this many lines" schema:"minimum=0"`
	MaxBytes int    `json:"max_bytes,omitempty" jsonschema:"at most this many bytes (cut on a character boundary)" schema:"minimum=0"`
	// Offset is where the read starts: a byte offset into the section's (or
	// the document's) text, as a previous answer's NextOffset gives it. An
	// offset inside a character is moved back to that character's start.
	Offset int `json:"offset,omitempty" jsonschema:"start this many bytes into the section (a truncated answer's next_offset)" schema:"minimum=0"`
}

// ReadResult is a bounded piece of the current version.
type ReadResult struct {
	WorkspaceID string  `json:"workspace_id"`
	Version     int64   `json:"version"`
	Section     *string `json:"section"`
	Content     string  `json:"content"`
	Truncated   bool    `json:"truncated"`
	// Offset is where Content starts in the section's text, when not 0.
	Offset int `json:"offset,omitempty"`
	// NextOffset is set when Truncated: read again with offset=NextOffset
	// (same section, same version) for what follows. When the page was cut
	// after a line (max_lines), the line ending dropped from the page is
	// skipped, so the next page starts on the next line.
	NextOffset *int `json:"next_offset,omitempty"`
}

// Read returns a section (or the document), bounded by lines then bytes,
// from Offset on. Without explicit bounds a read is still capped at the
// request body limit so one call can never return an unbounded answer;
// NextOffset says where to go on.
func (e *Engine) Read(ctx context.Context, q Querier, p Principal, in ReadInput) (ReadResult, error) {
	if err := p.Require(CapRead); err != nil {
		return ReadResult{}, err
	}
	if in.MaxLines < 0 || in.MaxBytes < 0 {
		return ReadResult{}, Errorf(KindInvalidRequest, "max_lines and max_bytes must not be negative")
	}
	if in.Offset < 0 {
		return ReadResult{}, Errorf(KindInvalidRequest, "offset must not be negative").With("field", "offset")
	}
	d, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return ReadResult{}, err
	}
	text := d.Content
	r, whole, err := d.FindSection(in.Section)
	if err != nil {
		return ReadResult{}, err
	}
	if !whole {
		text = d.Content[r.Start:r.End]
	}
	if in.Offset > len(text) {
		return ReadResult{}, Errorf(KindInvalidRequest, "offset %d is past the end of the text (%d bytes)", in.Offset, len(text)).
			With("field", "offset")
	}
	maxBytes := in.MaxBytes
	if maxBytes == 0 || int64(maxBytes) > e.Limits.MaxBodyBytes {
		maxBytes = int(e.Limits.MaxBodyBytes)
	}
	out := ReadResult{WorkspaceID: e.WorkspaceID, Version: d.Version, Offset: runeStart(text, in.Offset)}
	if in.Section != "" {
		s := in.Section
		out.Section = &s
	}
	rest := text[out.Offset:]
	lines, lineCut := markdown.Truncate(rest, in.MaxLines, 0)
	content, _ := markdown.Truncate(lines, 0, maxBytes)
	out.Truncated = len(content) < len(rest)
	if out.Truncated {
		next := out.Offset + len(content)
		if lineCut && len(content) == len(lines) {
			// The page ends where a line did; its line ending was dropped.
			next += strings.IndexByte(rest[len(lines):], '\n') + 1
		}
		out.NextOffset = &next
	}
	if len(content) < len(d.Content) && e.docs.get(d.Version) != d {
		// This read parsed the document itself (a read racing another on a
		// new version): a piece of its private copy would keep all of it in
		// memory for as long as the answer takes to send. A piece of the
		// cached document costs nothing more than the cache already holds.
		content = strings.Clone(content)
	}
	out.Content = content
	return out, nil
}

// runeStart moves i back to the start of the character it falls in.
func runeStart(s string, i int) int {
	for back := 0; i > 0 && i < len(s) && back < utf8.UTFMax-1 && !utf8.RuneStart(s[i]); back++ {
		i--
	}
	return i
}

// DiffResult is the unified diff from one version to the current one.
type DiffResult struct {
	WorkspaceID    string `json:"workspace_id"`
	BaseVersion    int64  `json:"base_version"`
	CurrentVersion int64  `json:"current_version"`
	Diff           string `json:"diff"`
	// DiffTruncated is set when the diff was cut at the response bound
	// (the request body limit, on a line boundary).
	DiffTruncated bool `json:"diff_truncated,omitempty"`
}

// DiffInput names the version a diff starts from.
type DiffInput struct {
	BaseVersion int64 `json:"base_version" jsonschema:"the version you read before" schema:"required,minimum=1" query:",required"`
}

// Diff returns the unified diff from v<base> to v<current>.
func (e *Engine) Diff(ctx context.Context, q Querier, p Principal, in DiffInput) (DiffResult, error) {
	base := in.BaseVersion
	if err := p.Require(CapRead); err != nil {
		return DiffResult{}, err
	}
	if base < 1 {
		return DiffResult{}, Errorf(KindVersionNotFound, "version %d does not exist", base).With("base_version", base)
	}
	cur, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return DiffResult{}, err
	}
	out := DiffResult{WorkspaceID: e.WorkspaceID, BaseVersion: base, CurrentVersion: cur.Version}
	if base == cur.Version {
		return out, nil
	}
	b, err := e.versionRow(ctx, q, base)
	if err != nil {
		return DiffResult{}, err
	}
	out.Diff, out.DiffTruncated = e.unifiedDiff(b.content, cur.Content, fmt.Sprintf("v%d", base), fmt.Sprintf("v%d", cur.Version))
	return out, nil
}

// Changes lists the versions after FromVersion, oldest first.
type Changes struct {
	WorkspaceID string          `json:"workspace_id"`
	FromVersion int64           `json:"from_version"`
	ToVersion   int64           `json:"to_version"` // the current version
	Changes     []VersionChange `json:"changes"`
}

// ChangesInput selects the versions ChangesSince lists.
type ChangesInput struct {
	Version int64 `json:"version" jsonschema:"list the versions after this one" schema:"required,minimum=0" query:",required"`
	Limit   int   `json:"limit,omitempty" jsonschema:"at most this many (default 20, at most 200)" schema:"minimum=0"`
	// MaxItems is the plain HTTP route's other name for a smaller limit
	// (the bounds /protocol advertises); the tool has only limit.
	MaxItems int `json:"-" query:"max_items"`
}

// ChangesSince lists up to limit versions after version (default 20, bounded
// by the list limit). Version 0 lists from the first version; a version past
// the current one is version_not_found.
func (e *Engine) ChangesSince(ctx context.Context, q Querier, p Principal, in ChangesInput) (Changes, error) {
	version, limit := in.Version, in.Limit
	if in.MaxItems > 0 && (limit == 0 || in.MaxItems < limit) {
		limit = in.MaxItems
	}
	if err := p.Require(CapRead); err != nil {
		return Changes{}, err
	}
	if version < 0 {
		return Changes{}, invalid("version", "version must not be negative")
	}
	cur, err := currentVersion(ctx, q)
	if err != nil {
		return Changes{}, err
	}
	if version > cur {
		return Changes{}, Errorf(KindVersionNotFound, "version %d does not exist; the document is at version %d", version, cur).
			With("base_version", version).With("current_version", cur)
	}
	list, err := versionChanges(ctx, q, version, e.boundLimit(limit, 20))
	if err != nil {
		return Changes{}, err
	}
	return Changes{WorkspaceID: e.WorkspaceID, FromVersion: version, ToVersion: cur, Changes: list}, nil
}
