package markdown

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark/parser"
)

// FuzzParseRegions checks the invariants every caller relies on: parsing
// never panics (parseRegions has no recover, so a goldmark panic fails
// here), regions are ordered, non-empty spans of the text that start at a
// line start, replacing a region by itself is the identity, and Truncate
// keeps valid UTF-8 valid. Seeds live in testdata/fuzz/FuzzParseRegions.
func FuzzParseRegions(f *testing.F) {
	f.Add("# A\n## B\ntext\n# C\n", 2, 10)
	f.Add("Title\r\n===\r\n\r\n## Ünïcödé 見出し\r\nbody\r\n", 3, 7)
	f.Add("```\n# no\n```\n    # no\n<div>\n# no\n</div>\n\n# yes", 0, 0)
	f.Add("> # q\n- # l\n#\n# #\n## x ##\n", -1, 1)
	f.Fuzz(func(t *testing.T, text string, maxLines, maxBytes int) {
		regions := parseRegions(text)
		if full := regionsOfFullTree(text); !reflect.DeepEqual(regions, full) {
			t.Fatalf("regions %+v, but the full syntax tree gives %+v", regions, full)
		}
		prevStart := -1
		for i, r := range regions {
			if r.Start <= prevStart {
				t.Fatalf("region %d starts at %d, not after %d", i, r.Start, prevStart)
			}
			prevStart = r.Start
			if r.Start < 0 || r.Start >= r.End || r.End > len(text) {
				t.Fatalf("region %d has span [%d,%d) in text of %d bytes", i, r.Start, r.End, len(text))
			}
			if r.Start > 0 && text[r.Start-1] != '\n' {
				t.Fatalf("region %d starts mid-line at %d", i, r.Start)
			}
			if r.End < len(text) && text[r.End-1] != '\n' {
				t.Fatalf("region %d ends mid-line at %d", i, r.End)
			}
			if r.Line < 1 || r.Line != strings.Count(text[:r.Start], "\n")+1 {
				t.Fatalf("region %d at byte %d has line %d", i, r.Start, r.Line)
			}
			if r.Level < 1 || r.Level > 6 {
				t.Fatalf("region %d has level %d", i, r.Level)
			}
			if r.Title == "" || strings.Trim(r.Title, mdAsciiSpace) != r.Title {
				t.Fatalf("region %d has untrimmed or empty title %q", i, r.Title)
			}
			if r.Region != r.Path || !strings.HasSuffix(r.Path, r.Title) {
				t.Fatalf("region %d: region %q, path %q, title %q", i, r.Region, r.Path, r.Title)
			}
			selector := r.Path
			if WholeDocument(selector) {
				selector = "section:" + selector // "# *" is only reachable this way
			}
			if _, ok := FindRegion(regions, selector); !ok {
				t.Fatalf("region %d: its own path %q not found", i, selector)
			}
			if got := ReplaceRegion(text, r, text[r.Start:r.End]); got != text {
				t.Fatalf("region %d: replacing [%d,%d) by itself changed the text", i, r.Start, r.End)
			}
		}

		out, truncated := Truncate(text, maxLines, maxBytes)
		if !strings.HasPrefix(text, out) {
			t.Fatalf("Truncate result %q is not a prefix", out)
		}
		if truncated != (len(out) < len(text)) {
			t.Fatalf("Truncate reported truncated=%v for %d of %d bytes", truncated, len(out), len(text))
		}
		if maxBytes > 0 && len(out) > maxBytes {
			t.Fatalf("Truncate kept %d bytes, limit %d", len(out), maxBytes)
		}
		if maxLines > 0 && strings.Count(strings.TrimSuffix(out, "\n"), "\n") >= maxLines {
			t.Fatalf("Truncate kept more than %d lines: %q", maxLines, out)
		}
		if utf8.ValidString(text) && !utf8.ValidString(out) {
			t.Fatalf("Truncate made invalid UTF-8 from valid input: %q", out)
		}
	})
}

// mdFullTreeParser is mdHeadingParser without mdDropParagraph: the tree
// with every paragraph in it, as goldmark builds it.
var mdFullTreeParser = parser.NewParser(
	parser.WithBlockParsers(mdBlockParsers()...),
	parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
)

// regionsOfFullTree is parseRegions on the full tree.
func regionsOfFullTree(src string) []Region {
	saved := mdHeadingParser
	defer func() { mdHeadingParser = saved }()
	mdHeadingParser = mdFullTreeParser
	return parseRegions(src)
}
