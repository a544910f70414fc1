package page

import (
	"strings"
	"testing"
	"time"
)

// TestRenderMarkdownIsInert: whatever the document holds, the rendered
// markup carries no script, no raw HTML, no active link and no image load;
// headings carry their region's path.
func TestRenderMarkdownIsInert(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []string // substrings the output must hold
		never     []string // substrings it must not hold (case-insensitive)
	}{
		{"a_script_tag_is_dropped", "# T\n\n<script>alert(1)</script>\n\ntext <script>x()</script>\n",
			[]string{"raw HTML omitted"}, []string{"<script"}},
		{"raw_html_is_dropped", "# T\n\n<div onclick=\"x()\"><img src=x onerror=alert(1)></div>\n\n<iframe src=\"https://e.example\"></iframe>\n",
			[]string{"raw HTML omitted"}, []string{"<div", "<img", "<iframe", "onerror", "onclick"}},
		{"a_javascript_link_loses_its_address", "[click](javascript:alert(1)) [c2](JaVaScRiPt:alert(2)) [c3](&#106;avascript:alert(3)) [c4](vbscript:x) [c5](data:text/html,x)",
			[]string{">click</a>", ">c3</a>"}, []string{"javascript:", "vbscript:", "data:"}},
		{"an_autolink_to_a_script_is_text", "<javascript:alert(1)> and <https://ok.example/>",
			[]string{`href="https://ok.example/"`}, []string{`href="javascript`}},
		{"an_image_is_a_link_never_a_load", "![a cat](https://cats.example/c.png) ![x](javascript:alert(1))",
			[]string{`href="https://cats.example/c.png"`, ">a cat</a>"}, []string{"<img", "javascript:"}},
		{"links_open_elsewhere_without_a_referrer", "[ok](https://ok.example/p?q=1)",
			[]string{`href="https://ok.example/p?q=1"`, `rel="noopener noreferrer"`, `target="_blank"`}, nil},
		{"headings_carry_their_paths", "# Trip\n\n## Goals\n\n```\n# not a heading\n```\n\n## Plan\n",
			[]string{`data-path="Trip"`, `data-path="Trip/Goals"`, `data-path="Trip/Plan"`}, []string{`data-path="Trip/not a heading"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, cut := renderMarkdown(tc.src)
			if cut {
				t.Fatal("cut a small document")
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			low := strings.ToLower(out)
			for _, n := range tc.never {
				if strings.Contains(low, strings.ToLower(n)) {
					t.Errorf("output holds %q:\n%s", n, out)
				}
			}
		})
	}
}

// TestRenderMarkdownBounds: a 1 MB single line is shown cut, saying how
// much was left out, with what follows it still rendered; past
// maxRenderBytes the text is cut on a line and says so.
func TestRenderMarkdownBounds(t *testing.T) {
	line := strings.Repeat("<b>x</b> ", (1<<20)/9)
	start := time.Now()
	out, cut := renderMarkdown("# Big\n\n" + line + "\n\n## After\n")
	t.Logf("1 MiB single line rendered in %v", time.Since(start))
	if !cut || strings.Contains(out, "<b>") || !strings.Contains(out, "more bytes of this line not shown]") ||
		!strings.Contains(out, `data-path="Big/After"`) || len(out) > 64<<10 {
		t.Fatalf("cut=%v, %d bytes out", cut, len(out))
	}
	big := strings.Repeat("para\n\n", maxRenderBytes/6+100)
	out, cut = renderMarkdown(big)
	if !cut || len(out) == 0 {
		t.Fatalf("a document over the bound: cut=%v", cut)
	}
}
