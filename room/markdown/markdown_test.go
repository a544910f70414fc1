package markdown

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/markdown")

// mdHead is the part of a Region a heading test cares about.
type mdHead struct {
	Title string
	Level int
	Line  int
	Path  string
}

func mdHeads(rs []Region) []mdHead {
	var out []mdHead
	for _, r := range rs {
		out = append(out, mdHead{r.Title, r.Level, r.Line, r.Path})
	}
	return out
}

func TestParseRegionsHeadings(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []mdHead
	}{
		{
			name: "atx levels lines and paths",
			text: "# One\ntext\n## Two\n### Three\n",
			want: []mdHead{{"One", 1, 1, "One"}, {"Two", 2, 3, "One/Two"}, {"Three", 3, 4, "One/Two/Three"}},
		},
		{
			name: "siblings share a parent and a later level-1 starts a new tree",
			text: "# A\n## B\n## C\n# D\n## B\n",
			want: []mdHead{{"A", 1, 1, "A"}, {"B", 2, 2, "A/B"}, {"C", 2, 3, "A/C"}, {"D", 1, 4, "D"}, {"B", 2, 5, "D/B"}},
		},
		{
			name: "skipped level has the nearest smaller level as parent",
			text: "# Top\n### Deep\n## Mid\n###### Six\n#### Four\n",
			want: []mdHead{{"Top", 1, 1, "Top"}, {"Deep", 3, 2, "Top/Deep"}, {"Mid", 2, 3, "Top/Mid"}, {"Six", 6, 4, "Top/Mid/Six"}, {"Four", 4, 5, "Top/Mid/Four"}},
		},
		{
			name: "document starting below level 1 has top-level regions at that level",
			text: "### Three\n## Two\n",
			want: []mdHead{{"Three", 3, 1, "Three"}, {"Two", 2, 2, "Two"}},
		},
		{
			name: "setext levels with line of first content line",
			text: "Title\n=====\n\nSub\n---\n",
			want: []mdHead{{"Title", 1, 1, "Title"}, {"Sub", 2, 4, "Title/Sub"}},
		},
		{
			name: "multi-line setext title joined with one space",
			text: "intro\n\n  First line  \n\tsecond line\n===\n",
			want: []mdHead{{"First line second line", 1, 3, "First line second line"}},
		},
		{
			name: "heading in backtick fence is not a region",
			text: "# Real\n```sh\n# not a heading\n```\n## After\n",
			want: []mdHead{{"Real", 1, 1, "Real"}, {"After", 2, 5, "Real/After"}},
		},
		{
			name: "heading in tilde fence is not a region",
			text: "~~~\n# nope\nNope\n===\n~~~\n# Yes\n",
			want: []mdHead{{"Yes", 1, 6, "Yes"}},
		},
		{
			name: "unclosed fence hides every later heading",
			text: "# A\n```\n# B\n",
			want: []mdHead{{"A", 1, 1, "A"}},
		},
		{
			name: "heading in indented code is not a region",
			text: "para\n\n    # code\n\n# Yes\n",
			want: []mdHead{{"Yes", 1, 5, "Yes"}},
		},
		{
			name: "hash line in html block is not a region",
			text: "<div>\n# inside html\n</div>\n\n# Outside\n",
			want: []mdHead{{"Outside", 1, 5, "Outside"}},
		},
		{
			name: "hash line in html comment is not a region",
			text: "<!--\n# hidden\n-->\n# Shown\n",
			want: []mdHead{{"Shown", 1, 4, "Shown"}},
		},
		{
			name: "headings in block quote and list item are not regions",
			text: "# A\n> # Quoted\n\n- # Listed\n\n1. Item\n   ## Nested\n\n## B\n",
			want: []mdHead{{"A", 1, 1, "A"}, {"B", 2, 9, "A/B"}},
		},
		{
			name: "empty headings skipped and not ancestors",
			text: "# A\n#\n## #\n###   ###\n## B\n",
			want: []mdHead{{"A", 1, 1, "A"}, {"B", 2, 5, "A/B"}},
		},
		{
			name: "closing hashes removed and spaces trimmed",
			text: "#   Spaced out   \n## Closed ##\n### Trailing #####   \n#### Not#closed#\n##### Escaped \\#\n",
			want: []mdHead{
				{"Spaced out", 1, 1, "Spaced out"},
				{"Closed", 2, 2, "Spaced out/Closed"},
				{"Trailing", 3, 3, "Spaced out/Closed/Trailing"},
				{"Not#closed#", 4, 4, "Spaced out/Closed/Trailing/Not#closed#"},
				{`Escaped \#`, 5, 5, `Spaced out/Closed/Trailing/Not#closed#/Escaped \#`},
			},
		},
		{
			name: "title is raw source not rendered",
			text: "## The *fast* path `x` [link](http://a)\n",
			want: []mdHead{{"The *fast* path `x` [link](http://a)", 2, 1, "The *fast* path `x` [link](http://a)"}},
		},
		{
			name: "up to three spaces of indentation still a heading",
			text: "   # Three\n    # Four\n",
			want: []mdHead{{"Three", 1, 1, "Three"}},
		},
		{
			name: "not headings: no space, seven hashes, link definition underline",
			text: "#hashtag\n####### seven\n\n[ref]: /url\n===\n",
			want: nil,
		},
		{
			name: "crlf lines counted like lf and no cr in titles",
			text: "# One\r\n\r\ntext\r\n## Two ##\r\nSet\r\n---\r\n",
			want: []mdHead{{"One", 1, 1, "One"}, {"Two", 2, 4, "One/Two"}, {"Set", 2, 5, "One/Set"}},
		},
		{
			name: "unicode titles kept byte for byte",
			text: "# Über\n## Ünïcödé 見出し\n",
			want: []mdHead{{"Über", 1, 1, "Über"}, {"Ünïcödé 見出し", 2, 2, "Über/Ünïcödé 見出し"}},
		},
		{
			name: "no-break space is content not trimmed",
			text: "# A\u00a0\n",
			want: []mdHead{{"A\u00a0", 1, 1, "A\u00a0"}},
		},
		{
			name: "empty text has no regions",
			text: "",
			want: nil,
		},
		{
			name: "last line without newline",
			text: "text\n# End",
			want: []mdHead{{"End", 1, 2, "End"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mdHeads(ParseRegions(tt.text))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseRegions(%q)\n got %+v\nwant %+v", tt.text, got, tt.want)
			}
		})
	}
}

func TestParseRegionsSpans(t *testing.T) {
	text := "preamble\n# A\na\n## A1\na1\n### A1x\nx\n## A2\na2\n# B\nb\n## B1\nb1"
	want := map[string]string{
		"A":        "# A\na\n## A1\na1\n### A1x\nx\n## A2\na2\n",
		"A/A1":     "## A1\na1\n### A1x\nx\n",
		"A/A1/A1x": "### A1x\nx\n",
		"A/A2":     "## A2\na2\n",
		"B":        "# B\nb\n## B1\nb1",
		"B/B1":     "## B1\nb1",
	}
	regions := ParseRegions(text)
	if len(regions) != len(want) {
		t.Fatalf("got %d regions, want %d: %+v", len(regions), len(want), regions)
	}
	for _, r := range regions {
		t.Run(r.Path+" spans its subtree", func(t *testing.T) {
			if got := text[r.Start:r.End]; got != want[r.Path] {
				t.Errorf("span %q, want %q", got, want[r.Path])
			}
			if r.Region != r.Path {
				t.Errorf("Region %q != Path %q", r.Region, r.Path)
			}
		})
	}
	t.Run("last region ends at end of text", func(t *testing.T) {
		if last := regions[len(regions)-1]; last.End != len(text) {
			t.Errorf("End = %d, want %d", last.End, len(text))
		}
	})
	t.Run("setext region starts at its first content line", func(t *testing.T) {
		text := "# A\nsome text\n\nTwo\nlines\n---\nbody\n"
		rs := ParseRegions(text)
		if len(rs) != 2 || text[rs[1].Start:rs[1].End] != "Two\nlines\n---\nbody\n" || text[rs[0].Start:rs[0].End] != text {
			t.Errorf("regions %+v", rs)
		}
	})
	t.Run("empty heading does not end a region", func(t *testing.T) {
		text := "## A\na\n#\nb\n"
		rs := ParseRegions(text)
		if len(rs) != 1 || rs[0].End != len(text) {
			t.Errorf("regions %+v", rs)
		}
	})
	t.Run("nested heading does not end a region", func(t *testing.T) {
		text := "## A\n> # Q\n- # L\n"
		rs := ParseRegions(text)
		if len(rs) != 1 || rs[0].End != len(text) {
			t.Errorf("regions %+v", rs)
		}
	})
}

func TestParseRegionsDeepNestingCapped(t *testing.T) {
	// Beyond mdMaxNesting containers the rest of the line is text; the
	// parse must stay fast and the top-level structure must be intact.
	for _, unit := range []string{">", "> ", "- ", ">\t", "1. ", "* > "} {
		t.Run(fmt.Sprintf("%q line of 64KiB keeps later heading", unit), func(t *testing.T) {
			text := strings.Repeat(unit, 64<<10/len(unit)) + "x\n\n# After\n"
			got := mdHeads(ParseRegions(text))
			want := []mdHead{{"After", 1, 3, "After"}}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
	for _, tt := range []struct {
		unit string
		kind ast.NodeKind
	}{{"> ", ast.KindBlockquote}, {"- ", ast.KindList}} {
		t.Run(fmt.Sprintf("%q nesting stops at the cap", tt.unit), func(t *testing.T) {
			src := []byte(strings.Repeat(tt.unit, 3*mdMaxNesting) + "x\n")
			depth := 0
			for n := mdHeadingParser.Parse(text.NewReader(src)).FirstChild(); n != nil; n = n.FirstChild() {
				if n.Kind() == tt.kind {
					depth++
				}
			}
			if depth != mdMaxNesting {
				t.Errorf("%d nested %v, want %d", depth, tt.kind, mdMaxNesting)
			}
		})
	}
	t.Run("nesting below the cap still parsed as containers", func(t *testing.T) {
		text := strings.Repeat("> ", mdMaxNesting-1) + "# quoted\n"
		if rs := ParseRegions(text); len(rs) != 0 {
			t.Errorf("heading inside %d block quotes became a region: %+v", mdMaxNesting-1, rs)
		}
	})
}

func TestParseRegionsConcurrent(t *testing.T) {
	// The goldmark parser is shared by every caller; run under -race.
	text := mdBenchDocument(40)
	want := ParseRegions(text)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			for range 5 {
				if got := ParseRegions(text); !reflect.DeepEqual(got, want) {
					errs <- fmt.Sprintf("concurrent parse differs: %d vs %d regions", len(got), len(want))
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestParseRegionsAllocationBound(t *testing.T) {
	if mdRaceEnabled() {
		t.Skip("the race detector defeats sync.Pool, so regexp scratch space is allocated on every match")
	}
	// Memory is linear with the constant of goldmark's syntax tree. These
	// bounds are about 1.5x what was measured, so they catch a quadratic
	// regression (the uncapped ">\t" line allocated 8000x at this size)
	// without flaking on runtime changes.
	tests := []struct {
		name  string
		text  string
		bound float64
	}{
		{"realistic document within 12x", mdBenchDocument(64), 12},
		{"one short paragraph line per line within 350x", strings.Repeat("a\n", 32<<10), 350},
		{"one setext heading per 4 bytes within 400x", strings.Repeat("a\n=\n", 16<<10), 400},
		{"one heading per 4 bytes within 250x", strings.Repeat("# a\n", 16<<10), 250},
		{"tab-padded block quote line within 60x", strings.Repeat(">\t", 32<<10) + "x\n", 60},
		{"nested list line within 10x", strings.Repeat("- ", 32<<10) + "x\n", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ParseRegions(tt.text) // warm up package-level state
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ParseRegions(tt.text)
			runtime.ReadMemStats(&after)
			ratio := float64(after.TotalAlloc-before.TotalAlloc) / float64(len(tt.text))
			t.Logf("%.1f bytes allocated per input byte", ratio)
			if ratio > tt.bound {
				t.Errorf("allocated %.1fx len(text), bound %.0fx", ratio, tt.bound)
			}
		})
	}
}

// mdRaceEnabled reports whether the test binary was built with -race.
func mdRaceEnabled() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

func TestMarkdownBlockParsersMatchGoldmark(t *testing.T) {
	// mdBlockParsers spells out goldmark's defaults so it can wrap two of
	// them; a goldmark upgrade that changes its defaults must be noticed.
	type entry struct {
		typ      string
		priority int
	}
	list := func(ps []parserEntry) []entry {
		var out []entry
		for _, p := range ps {
			out = append(out, entry{fmt.Sprintf("%T", p.parser), p.priority})
		}
		return out
	}
	var ours, theirs []parserEntry
	for _, p := range mdBlockParsers() {
		bp := p.Value.(parser.BlockParser)
		if c, ok := bp.(mdNestingCap); ok {
			bp = c.BlockParser
		}
		ours = append(ours, parserEntry{bp, p.Priority})
	}
	for _, p := range parser.DefaultBlockParsers() {
		theirs = append(theirs, parserEntry{p.Value.(parser.BlockParser), p.Priority})
	}
	if got, want := list(ours), list(theirs); !reflect.DeepEqual(got, want) {
		t.Errorf("block parsers differ from goldmark's defaults\n ours %v\ntheirs %v", got, want)
	}
}

type parserEntry struct {
	parser   parser.BlockParser
	priority int
}

func TestRegionWholeDocument(t *testing.T) {
	for _, tt := range []struct {
		selector string
		want     bool
	}{
		{"", true}, {"workspace", true}, {"*", true},
		{"Workspace", false}, {"section:workspace", false}, {" ", false}, {"Intro", false},
	} {
		name := fmt.Sprintf("%q is whole document", tt.selector)
		if !tt.want {
			name = fmt.Sprintf("%q is not whole document", tt.selector)
		}
		t.Run(name, func(t *testing.T) {
			if got := WholeDocument(tt.selector); got != tt.want {
				t.Errorf("WholeDocument(%q) = %v", tt.selector, got)
			}
		})
	}
}

func TestFindRegion(t *testing.T) {
	text := "# Intro\n## Setup\n# Usage\n## Setup\n### Linux/macOS\n## Ünïcödé 見出し\n# workspace\n# *\n"
	regions := ParseRegions(text)
	tests := []struct {
		name     string
		selector string
		wantLine int // 0: not found
	}{
		{"title finds first of duplicates", "Setup", 2},
		{"path finds second duplicate", "Usage/Setup", 4},
		{"section title form", "section:Setup", 2},
		{"section path form", "section:Usage/Setup", 4},
		{"top-level title", "Intro", 1},
		{"title containing slash matches by title", "Linux/macOS", 5},
		{"path through slash title", "Usage/Setup/Linux/macOS", 5},
		{"unicode title", "Ünïcödé 見出し", 6},
		{"unicode path", "Usage/Ünïcödé 見出し", 6},
		{"unicode section path", "section:Usage/Ünïcödé 見出し", 6},
		{"unknown selector not found", "Nope", 0},
		{"partial path not found", "Usage/Set", 0},
		{"case differs not found", "setup", 0},
		{"surrounding space not found", " Setup", 0},
		{"bare section prefix not found", "section:", 0},
		{"double section prefix not found", "section:section:Setup", 0},
		{"whole document selector matches no region", "workspace", 0},
		{"star selector matches no region even when a heading is titled star", "*", 0},
		{"empty selector matches no region", "", 0},
		{"heading titled workspace found only with section prefix", "section:workspace", 7},
		{"heading titled star found only with section prefix", "section:*", 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := FindRegion(regions, tt.selector)
			if tt.wantLine == 0 {
				if ok {
					t.Errorf("FindRegion(%q) = %+v, want not found", tt.selector, r)
				}
				return
			}
			if !ok || r.Line != tt.wantLine {
				t.Errorf("FindRegion(%q) = %+v, %v; want line %d", tt.selector, r, ok, tt.wantLine)
			}
		})
	}
	t.Run("no regions not found", func(t *testing.T) {
		if _, ok := FindRegion(nil, "Intro"); ok {
			t.Error("found a region in nil")
		}
	})
}

func TestReplaceRegion(t *testing.T) {
	find := func(t *testing.T, text, sel string) Region {
		t.Helper()
		r, ok := FindRegion(ParseRegions(text), sel)
		if !ok {
			t.Fatalf("no region %q", sel)
		}
		return r
	}
	tests := []struct {
		name        string
		text        string
		selector    string
		replacement string
		want        string
	}{
		{
			name:        "lf newline appended before following text",
			text:        "# A\na\n# B\nb\n",
			selector:    "A",
			replacement: "# A\nnew",
			want:        "# A\nnew\n# B\nb\n",
		},
		{
			name:        "crlf appended when heading line ends in crlf",
			text:        "# A\r\na\r\n# B\r\nb\r\n",
			selector:    "A",
			replacement: "# A\r\nnew",
			want:        "# A\r\nnew\r\n# B\r\nb\r\n",
		},
		{
			name:        "replacement ending in newline kept as is",
			text:        "# A\na\n# B\n",
			selector:    "A",
			replacement: "# A2\n",
			want:        "# A2\n# B\n",
		},
		{
			name:        "no newline appended at end of text",
			text:        "# A\na\n# B\nb\n",
			selector:    "B",
			replacement: "# B\nnew",
			want:        "# A\na\n# B\nnew",
		},
		{
			name:        "empty replacement deletes the region",
			text:        "# A\na\n## A1\nx\n# B\n",
			selector:    "A",
			replacement: "",
			want:        "# B\n",
		},
		{
			name:        "nested region replaced inside parent",
			text:        "# A\na\n## A1\nx\n## A2\ny\n",
			selector:    "A/A1",
			replacement: "## A1\nchanged",
			want:        "# A\na\n## A1\nchanged\n## A2\ny\n",
		},
		{
			name:        "lf file gets lf even if replacement has crlf inside",
			text:        "# A\na\n# B\n",
			selector:    "A",
			replacement: "# A\r\nx",
			want:        "# A\r\nx\n# B\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ReplaceRegion(tt.text, find(t, tt.text, tt.selector), tt.replacement)
			if got != tt.want {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}

	t.Run("crlf unicode file keeps every byte outside the region", func(t *testing.T) {
		text := "\ufeffPreface ✓\r\n\r\n# Über\r\nintro\r\n\r\n## Ünïcödé 見出し\r\nbody  \r\n\t\r\n## Next\r\nkeep\r\n"
		for _, sel := range []string{"Ünïcödé 見出し", "Über/Ünïcödé 見出し"} {
			r := find(t, text, sel)
			if r.Line != 6 {
				t.Errorf("%q: line %d, want 6", sel, r.Line)
			}
		}
		r := find(t, text, "Über/Ünïcödé 見出し")
		got := ReplaceRegion(text, r, "## Ünïcödé 見出し\r\nnew body")
		prefix, suffix := text[:r.Start], text[r.End:]
		if !strings.HasPrefix(got, prefix) {
			t.Errorf("prefix changed:\n got %q\nwant %q", got[:min(len(got), len(prefix))], prefix)
		}
		if !strings.HasSuffix(got, suffix) {
			t.Errorf("suffix changed:\n got %q\nwant %q", got, suffix)
		}
		if mid := got[len(prefix) : len(got)-len(suffix)]; mid != "## Ünïcödé 見出し\r\nnew body\r\n" {
			t.Errorf("middle %q", mid)
		}
		if !utf8.ValidString(got) {
			t.Error("result is not valid UTF-8")
		}
	})

	t.Run("every region replaced by itself is identity", func(t *testing.T) {
		text := mdBenchDocument(5) + "\r\n# CR\r\nx"
		for _, r := range ParseRegions(text) {
			if got := ReplaceRegion(text, r, text[r.Start:r.End]); got != text {
				t.Fatalf("region %q: identity replace changed text", r.Path)
			}
		}
	})

	t.Run("stale out of range region clamped not panicking", func(t *testing.T) {
		text := "# A\n"
		got := ReplaceRegion(text, Region{Start: 2, End: 99}, "x")
		if got != "# x" {
			t.Errorf("got %q", got)
		}
	})
}

func TestTruncate(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		maxLines  int
		maxBytes  int
		want      string
		truncated bool
	}{
		{"no limits keeps everything", "a\nb\nc\n", 0, 0, "a\nb\nc\n", false},
		{"negative limits mean unlimited", "a\nb\n", -1, -5, "a\nb\n", false},
		{"lines cut drops last kept newline", "a\nb\nc\n", 2, 0, "a\nb", true},
		{"crlf lines cut drops whole line ending", "a\r\nb\r\nc\r\n", 1, 0, "a", true},
		{"exact line count with trailing newline not cut", "a\nb\n", 2, 0, "a\nb\n", false},
		{"exact line count without trailing newline not cut", "a\nb", 2, 0, "a\nb", false},
		{"trailing empty line is a line", "a\n\n", 1, 0, "a", true},
		{"bytes cut", "abcdef", 0, 4, "abcd", true},
		{"bytes equal to length not cut", "abcd", 0, 4, "abcd", false},
		{"lines first then bytes", "abc\ndef\nghi\n", 2, 5, "abc\nd", true},
		{"bytes limit larger than line cut result", "abc\ndef\nghi\n", 1, 100, "abc", true},
		{"two-byte rune never split", "aé", 0, 2, "a", true},
		{"three-byte rune never split", "見出し", 0, 5, "見", true},
		{"four-byte rune never split", "x😀y", 0, 4, "x", true},
		{"cut right after rune keeps it", "見出し", 0, 6, "見出", true},
		{"budget smaller than first rune is empty", "見", 0, 2, "", true},
		{"invalid utf-8 cut at byte limit", "a\xff\xfe\xfd", 0, 2, "a\xff", true},
		{"empty text", "", 3, 3, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, truncated := Truncate(tt.text, tt.maxLines, tt.maxBytes)
			if got != tt.want || truncated != tt.truncated {
				t.Errorf("Truncate(%q, %d, %d) = %q, %v; want %q, %v", tt.text, tt.maxLines, tt.maxBytes, got, truncated, tt.want, tt.truncated)
			}
		})
	}
}

func TestOverlaps(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"A", "A", true},
		{"A", "A/B", true},
		{"A/B", "A", true},
		{"A", "A/B/C", true},
		{"workspace", "A/B", true},
		{"A", "workspace", true},
		{"workspace", "workspace", true},
		{"*", "A", true},
		{"A", "", true},
		{"A", "B", false},
		{"A/B", "A/C", false},
		{"A", "AB", false},
		{"AB", "A/B", false},
		{"A/B", "A/BC", false},
		{"Ünï", "Ünï/見", true},
		{"Ünï", "Ünïx", false},
	}
	for _, tt := range tests {
		verdict := "overlap"
		if !tt.want {
			verdict = "do not overlap"
		}
		t.Run(fmt.Sprintf("%q and %q %s", tt.a, tt.b, verdict), func(t *testing.T) {
			if got := Overlaps(tt.a, tt.b); got != tt.want {
				t.Errorf("Overlaps(%q, %q) = %v", tt.a, tt.b, got)
			}
			if got := Overlaps(tt.b, tt.a); got != tt.want {
				t.Errorf("Overlaps(%q, %q) = %v (not symmetric)", tt.b, tt.a, got)
			}
		})
	}
}

// mdGoldenRegion is Region as the golden files record it, offsets included.
type mdGoldenRegion struct {
	Region string `json:"region"`
	Title  string `json:"title"`
	Level  int    `json:"level"`
	Line   int    `json:"line"`
	Path   string `json:"path"`
	Start  int    `json:"start"`
	End    int    `json:"end"`
}

func TestMarkdownGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "markdown", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(inputs) < 3 {
		t.Fatalf("found %d golden inputs, want at least 3", len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".md")
		t.Run(name+" matches golden regions", func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			text := string(src)
			if strings.Contains(name, "crlf") && !strings.Contains(text, "\r\n") {
				t.Fatalf("%s lost its CRLF line endings (check .gitattributes)", in)
			}
			regions := ParseRegions(text)
			got := make([]mdGoldenRegion, 0, len(regions))
			for _, r := range regions {
				got = append(got, mdGoldenRegion{r.Region, r.Title, r.Level, r.Line, r.Path, r.Start, r.End})
				if ReplaceRegion(text, r, text[r.Start:r.End]) != text {
					t.Errorf("region %q: identity replace changed text", r.Path)
				}
			}
			js, err := json.MarshalIndent(got, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			js = append(js, '\n')
			golden := filepath.Join("testdata", "markdown", name+".regions.json")
			if *update {
				if err := os.WriteFile(golden, js, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./room/markdown -run Golden -update to create it)", err)
			}
			if !bytes.Equal(js, want) {
				t.Errorf("regions differ from %s (run with -update if the change is intended)\n got %s", golden, js)
			}
		})
	}
}

// mdBenchDocument generates a realistic document of about 2 KiB per
// section: headings at levels 1-3, prose, lists, a fenced code block with
// "#" comments, a block quote and a table-ish HTML block.
func mdBenchDocument(sections int) string {
	var b strings.Builder
	for i := range sections {
		level := 1 + i%3
		fmt.Fprintf(&b, "%s Section %d: planning notes ✓\n\n", strings.Repeat("#", level), i)
		for p := range 6 {
			fmt.Fprintf(&b, "Paragraph %d of section %d talks about *scope*, `owners` and the [plan](https://example.com/%d). "+
				"It wraps over a couple of lines the way people write,\nwith a soft break and some ünïcödé text for good measure. "+
				"Decisions get recorded here so nobody has to ask twice.\n\n", p, i, i)
		}
		b.WriteString("- first item with a **bold** word\n- second item\n  - nested item\n- third item\n\n")
		b.WriteString("```sh\n# install the tool\ngo install ./cmd/ce\n# run it\nce serve --port 8080\n```\n\n")
		b.WriteString("> A quoted remark from a reviewer,\n> spanning two lines.\n\n")
		b.WriteString("<details>\n<summary>More</summary>\n# not a heading\n</details>\n\n")
		fmt.Fprintf(&b, "Closing words for section %d, with a trailing line that is long enough to matter, "+
			"plus a reminder of who owns the follow-ups and when they are due. Thanks, all.\n\n", i)
	}
	return b.String()
}

func BenchmarkParseRegions(b *testing.B) {
	text := mdBenchDocument(500)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		n = len(ParseRegions(text))
	}
	if n != 500 {
		b.Fatalf("got %d regions, want 500", n)
	}
}
