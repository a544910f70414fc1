// Package markdown finds the heading-delimited regions of a Markdown file and
// edits one region without touching the bytes around it. It is the part of
// the room domain that knows Markdown syntax, kept apart so that it depends
// on nothing of the room (only goldmark) and can be read and fuzzed alone.
package markdown

import (
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Region is one heading-delimited span of the document. Participants address
// parts of the shared Markdown file by heading rather than by byte range, so
// that a selector stays meaningful while other people edit around it; Region
// is the resolved form of such a selector against one version of the text.
type Region struct {
	Region string `json:"region"` // equals Path (kept as its own field for the wire format)
	Title  string `json:"title"`
	Level  int    `json:"level"`
	Line   int    `json:"line"`
	Path   string `json:"path"`
	Start  int    `json:"-"` // byte offset of the heading's first line
	End    int    `json:"-"` // byte offset where the region ends (exclusive)
}

// Workspace is the canonical target for the whole document, so that
// leases and reads over the whole file share one spelling with region paths.
const Workspace = "workspace"

// mdAsciiSpace is what surrounds a title and is not part of it. Only ASCII
// whitespace is trimmed so that a title keeps any non-ASCII bytes the user
// wrote (a no-break space is content, not layout).
const mdAsciiSpace = " \t\r\n\v\f"

// mdMaxNesting is how many block quotes and lists may nest inside each other
// before a further marker is read as plain text (markdown-it has the same
// kind of cap). goldmark spends time or memory proportional to the line for
// every container it opens on that line, so without a cap a single 128 KiB
// line of ">" takes 8 s, of "- " 7 s, and of ">\t" allocates 4.5 GB.
// Real documents nest a handful of levels, and anything this deep is inside
// a top-level container, where no region starts.
const mdMaxNesting = 32

// mdHeadingParser finds block structure only. Titles are taken from the raw
// source, so inline parsing (emphasis, links, code spans) would be wasted
// work and is the part of CommonMark with the worst pathological inputs;
// leaving it out keeps parsing linear. Link reference definitions stay,
// because they decide whether a paragraph followed by "===" is a setext
// heading. Parsers are safe for concurrent use once built: Parse keeps its
// per-call state in the parser.Context it creates.
var mdHeadingParser = parser.NewParser(
	parser.WithBlockParsers(mdBlockParsers()...),
	parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
	parser.WithParagraphTransformers(util.Prioritized(mdDropParagraph{}, 1000)),
)

// mdDropParagraph takes paragraphs out of the tree once nothing can
// change them any more. Regions need only the headings, and left in, every
// paragraph line became a text node in goldmark's inline pass: about half
// the bytes a parse allocated, 6.5 per input byte for prose (issue 17).
// A paragraph is dropped when the next paragraph is closed, not when it
// is closed itself: a setext underline closes the paragraph above it and
// then makes a heading of it, and a transformer that removed it there
// would tell goldmark the paragraph was consumed. By the time a later
// paragraph closes, the earlier one has been closed for at least a line
// and no block parser looks at it again. FuzzParseRegions checks that the
// regions are those of the full tree.
type mdDropParagraph struct{}

// mdLastParagraph is the per-parse context key of the paragraph most
// recently closed, the one mdDropParagraph drops next.
var mdLastParagraph = parser.NewContextKey()

func (mdDropParagraph) Transform(node *ast.Paragraph, _ text.Reader, pc parser.Context) {
	if prev, ok := pc.Get(mdLastParagraph).(*ast.Paragraph); ok && prev != node {
		if p := prev.Parent(); p != nil {
			p.RemoveChild(p, prev)
		}
	}
	pc.Set(mdLastParagraph, node)
}

// mdBlockParsers is parser.DefaultBlockParsers (same parsers, same
// priorities) with the two container parsers capped at mdMaxNesting.
// TestMarkdownBlockParsersMatchGoldmark notices if goldmark's set changes.
func mdBlockParsers() []util.PrioritizedValue {
	return []util.PrioritizedValue{
		util.Prioritized(parser.NewSetextHeadingParser(), 100),
		util.Prioritized(parser.NewThematicBreakParser(), 200),
		util.Prioritized(mdNestingCap{parser.NewListParser()}, 300),
		util.Prioritized(parser.NewListItemParser(), 400),
		util.Prioritized(parser.NewCodeBlockParser(), 500),
		util.Prioritized(parser.NewATXHeadingParser(), 600),
		util.Prioritized(parser.NewFencedCodeBlockParser(), 700),
		util.Prioritized(mdNestingCap{parser.NewBlockquoteParser()}, 800),
		util.Prioritized(parser.NewHTMLBlockParser(), 900),
		util.Prioritized(parser.NewParagraphParser(), 1000),
	}
}

// mdNestingCap refuses to open a container inside mdMaxNesting others.
type mdNestingCap struct{ parser.BlockParser }

// Open opens the container unless parent is already too deeply nested.
func (c mdNestingCap) Open(parent ast.Node, reader text.Reader, pc parser.Context) (ast.Node, parser.State) {
	depth := 0
	for n := parent; n != nil; n = n.Parent() {
		if k := n.Kind(); k == ast.KindBlockquote || k == ast.KindList {
			if depth++; depth >= mdMaxNesting {
				return nil, parser.NoChildren
			}
		}
	}
	return c.BlockParser.Open(parent, reader, pc)
}

// ParseRegions returns the regions of text in document order. It never
// panics, and its time and memory are linear in len(text).
//
// Regions are how participants address parts of the file, so they must
// follow CommonMark exactly (a "#" line in a code block is not a section)
// and must be cheap enough to recompute on every version. Only headings
// that are direct children of the document start a region: a heading inside
// a list item or block quote is part of that container. Headings whose title
// is empty are ignored entirely: they neither start nor end a region and are
// nobody's ancestor.
//
// The memory constant is goldmark's syntax tree: about 7 bytes allocated
// per input byte for ordinary prose, but up to about 260 for input made of
// nothing except tiny blocks ("a\n=\n" repeated), so callers that accept
// untrusted documents should bound their size (see
// TestParseRegionsAllocationBound). If the parser ever panics on some
// input, the document is treated as having no regions (the whole document
// stays addressable) rather than taking the caller down.
func ParseRegions(text string) (regions []Region) {
	defer func() {
		if recover() != nil {
			regions = nil
		}
	}()
	return parseRegions(text)
}

// parseRegions is ParseRegions without the panic guard, so that tests and
// the fuzz target see parser panics instead of an empty result.
func parseRegions(src string) []Region {
	if len(src) == 0 {
		return nil
	}
	doc := mdHeadingParser.Parse(text.NewReader([]byte(src)))

	count := 0
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if n.Kind() == ast.KindHeading {
			count++
		}
	}
	if count == 0 {
		return nil
	}
	regions := make([]Region, 0, count)
	// open holds the indexes of the regions whose span is still open,
	// outermost first; their titles form the path of the next heading.
	// Levels are 1..6 and strictly increase along open, so it stays short.
	var open []int
	var titles []string
	line, lineAt := 1, 0 // line number of byte offset lineAt

	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		h, ok := n.(*ast.Heading)
		if !ok {
			continue
		}
		title, first, ok := mdHeadingTitle(h.Lines(), src)
		if !ok {
			continue
		}
		start := strings.LastIndexByte(src[:first], '\n') + 1
		if len(regions) > 0 && start <= regions[len(regions)-1].Start {
			// Cannot happen for top-level blocks; refuse rather than
			// produce overlapping or unordered spans.
			continue
		}
		line += strings.Count(src[lineAt:start], "\n")
		lineAt = start

		for len(open) > 0 && regions[open[len(open)-1]].Level >= h.Level {
			regions[open[len(open)-1]].End = start
			open = open[:len(open)-1]
		}
		path := title
		if len(open) > 0 {
			titles = titles[:0]
			for _, i := range open {
				titles = append(titles, regions[i].Title)
			}
			titles = append(titles, title)
			path = strings.Join(titles, "/")
		}

		open = append(open, len(regions))
		regions = append(regions, Region{
			Region: path,
			Title:  title,
			Level:  h.Level,
			Line:   line,
			Path:   path,
			Start:  start,
		})
	}
	for _, i := range open {
		regions[i].End = len(src)
	}
	if len(regions) == 0 {
		return nil
	}
	return regions
}

// mdHeadingTitle returns the raw source title of a heading and the byte offset
// of its first content line. ok is false when the heading has no title.
// A one-line title is a substring of src, so it costs no allocation.
func mdHeadingTitle(lines *text.Segments, src string) (title string, first int, ok bool) {
	if lines == nil || lines.Len() == 0 {
		return "", 0, false
	}
	var b strings.Builder
	first = -1
	for i := range lines.Len() {
		seg := lines.At(i)
		if seg.Start < 0 || seg.Stop > len(src) || seg.Start > seg.Stop {
			return "", 0, false
		}
		if first < 0 {
			first = seg.Start
		}
		part := strings.Trim(src[seg.Start:seg.Stop], mdAsciiSpace)
		if part == "" {
			continue
		}
		if title == "" {
			title = part
			continue
		}
		if b.Len() == 0 {
			b.WriteString(title)
		}
		b.WriteByte(' ')
		b.WriteString(part)
	}
	if b.Len() > 0 {
		title = b.String()
	}
	return title, first, title != ""
}

// WholeDocument reports whether selector names the whole document ("", "workspace", "*").
// Callers need it to decide between a region lookup and a whole-file
// operation before they parse anything.
func WholeDocument(selector string) bool {
	return selector == "" || selector == Workspace || selector == "*"
}

// FindRegion returns the first region matching selector, and false if none does.
// (Callers turn "not found" into their own error.)
//
// A selector matches by title, by path, or by either prefixed with
// "section:", so people can name a section the way they see it and tools
// can name it unambiguously. Duplicate titles resolve to the first one in
// document order, which is stable while the text above is unchanged.
// Whole-document selectors never match a region, even one titled
// "workspace" or "*", so that they mean the same thing everywhere; such a
// heading is still reachable as "section:workspace".
func FindRegion(regions []Region, selector string) (Region, bool) {
	if WholeDocument(selector) {
		return Region{}, false
	}
	bare, prefixed := strings.CutPrefix(selector, "section:")
	for _, r := range regions {
		if r.Title == selector || r.Path == selector {
			return r, true
		}
		if prefixed && (r.Title == bare || r.Path == bare) {
			return r, true
		}
	}
	return Region{}, false
}

// ReplaceRegion returns text with text[r.Start:r.End] replaced by replacement.
// If replacement is non-empty, does not end in a newline, and the region is followed by more text,
// a line ending is appended to it: "\r\n" if the region's heading line ends in "\r\n", else "\n".
// Everything outside [r.Start, r.End) is kept byte for byte.
//
// This is how a participant's edit of one section lands without disturbing
// anybody else's bytes, including the file's line-ending style. r must come
// from ParseRegions(text); offsets outside text are clamped to it so that a
// stale region cannot crash the caller.
func ReplaceRegion(text string, r Region, replacement string) string {
	start := min(max(r.Start, 0), len(text))
	end := min(max(r.End, start), len(text))
	if replacement != "" && !strings.HasSuffix(replacement, "\n") && end < len(text) {
		replacement += mdLineEnding(text[start:end])
	}
	var b strings.Builder
	b.Grow(start + len(replacement) + len(text) - end)
	b.WriteString(text[:start])
	b.WriteString(replacement)
	b.WriteString(text[end:])
	return b.String()
}

// mdLineEnding returns the line ending of the first line of span.
func mdLineEnding(span string) string {
	if i := strings.IndexByte(span, '\n'); i > 0 && span[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// Truncate bounds text for a bounded read: first to at most maxLines lines (lines are
// split on "\n"; the kept part keeps its line endings except that the last kept line's
// trailing newline is dropped when lines were cut), then to at most maxBytes bytes, cut on a
// UTF-8 rune boundary. A limit <= 0 means no limit. It reports whether anything was cut.
//
// A "\n" ends a line rather than starting one, so "a\nb\n" is two lines and
// fits maxLines 2 untouched. The dropped line ending is the whole "\r\n" in a
// CRLF file. The result is always a prefix of text, so truncated is exactly
// "the result is shorter". Invalid UTF-8 is cut at the byte limit as is; a
// valid multi-byte rune is never split.
func Truncate(text string, maxLines, maxBytes int) (string, bool) {
	out := text
	if maxLines > 0 {
		at := 0
		for range maxLines {
			i := strings.IndexByte(out[at:], '\n')
			if i < 0 {
				at = len(out)
				break
			}
			at += i + 1
		}
		if at < len(out) {
			out = strings.TrimSuffix(out[:at], "\n")
			out = strings.TrimSuffix(out, "\r")
		}
	}
	if maxBytes > 0 && len(out) > maxBytes {
		out = out[:mdRuneCut(out, maxBytes)]
	}
	return out, len(out) < len(text)
}

// mdRuneCut returns the largest cut <= n that does not split a valid UTF-8
// encoded rune of s. It requires 0 < n < len(s).
func mdRuneCut(s string, n int) int {
	if utf8.RuneStart(s[n]) {
		return n
	}
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if !utf8.RuneStart(s[i]) {
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return n // invalid bytes: nothing valid to protect
		}
		if i+size > n {
			return i
		}
		return n
	}
	return n
}

// Overlaps reports whether two canonical targets (region paths, or "workspace" for the
// whole document) overlap: equal, one is an ancestor path of the other (prefix followed by "/"),
// or either is "workspace". Used for lease conflicts.
//
// Any whole-document selector ("", "*") counts as "workspace" here too:
// for a lease check, reporting a conflict is the safe mistake.
func Overlaps(a, b string) bool {
	if WholeDocument(a) || WholeDocument(b) || a == b {
		return true
	}
	return mdIsAncestor(a, b) || mdIsAncestor(b, a)
}

func mdIsAncestor(parent, child string) bool {
	return len(child) > len(parent) && child[len(parent)] == '/' && strings.HasPrefix(child, parent)
}
