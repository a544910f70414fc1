package page

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
	"github.com/commonroom/ce/room/markdown"
)

// The document as the owner reads it on the page (issue 27, item 1):
// rendered from Markdown here, with goldmark's safe renderer (no
// html.WithUnsafe: raw HTML is dropped, never passed through), and made
// inert on top of that: a link keeps its address only for http, https,
// mailto and same-page targets; an image becomes a link to its address,
// so the page never loads anything from elsewhere (its CSP would refuse
// it, and a refused load is a console error); each top-level heading
// carries the room's path for it (data-path), so the script can mark the
// sections that are leased or have a proposal waiting. The page inserts
// the result as markup: it is the only room text the page does not insert
// as text, and it is produced only here.

// maxRenderBytes bounds how much of a version is rendered: a larger one is
// rendered up to the last line break before the bound, and the answer says
// so (the whole text stays readable with `ce`, the MCP resource or
// workspace_read). Rendering 2 MiB takes goldmark tens of milliseconds.
const maxRenderBytes = 2 << 20

// documentView is GET /page/document's answer.
type documentView struct {
	Version int64  `json:"version"`
	HTML    string `json:"html"`
	Bytes   int    `json:"bytes"` // the version's size
	// Truncated says only the first maxRenderBytes were rendered, or a line
	// longer than maxRenderLineBytes is shown cut.
	Truncated bool `json:"truncated"`
}

var mdRenderer = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList),
	goldmark.WithRendererOptions(html.WithXHTML()),
)

// Document is GET /page/document[?version=N]: one version (the current one
// without a version) rendered. It needs the page's cookie, like the page,
// and the viewer's read capability (DocumentText checks it).
func (d *Handler) Document(w http.ResponseWriter, r *http.Request) {
	if err := FromPage(r); err != nil {
		d.cfg.SendError(w, r, err)
		return
	}
	p, ok := d.viewer(w, r)
	if !ok {
		return
	}
	var version int64
	if s := r.URL.Query().Get("version"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 1 {
			d.cfg.SendError(w, r, room.Errorf(room.KindInvalidRequest, "version must be a positive whole number").With("field", "version"))
			return
		}
		version = v
	}
	eng := d.cfg.Room.Engine()
	type doc struct {
		version int64
		text    string
	}
	got, err := actor.Read(r.Context(), d.cfg.Room, func(q room.Querier) (doc, error) {
		v, t, err := eng.DocumentText(r.Context(), q, p, version)
		return doc{v, t}, err
	})
	if err != nil {
		d.cfg.SendError(w, r, err)
		return
	}
	out := documentView{Version: got.version, Bytes: len(got.text)}
	out.HTML, out.Truncated = renderMarkdown(got.text)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	json.NewEncoder(w).Encode(out)
}

// renderMarkdown renders src (at most maxRenderBytes of it) to inert HTML.
func renderMarkdown(src string) (string, bool) {
	cut := false
	if len(src) > maxRenderBytes {
		src, cut = src[:maxRenderBytes], true
		if i := strings.LastIndexByte(src, '\n'); i > 0 {
			src = src[:i+1]
		}
	}
	src, long := cutLongLines(src)
	cut = cut || long
	regions := markdown.ParseRegions(src)
	b := []byte(src)
	doc := mdRenderer.Parser().Parse(text.NewReader(b))
	neutralize(doc, b)
	markHeadings(doc, regions)
	var buf bytes.Buffer
	if err := mdRenderer.Renderer().Render(&buf, b, doc); err != nil {
		return "", cut
	}
	return buf.String(), cut
}

// maxRenderLineBytes bounds one line as the page shows it: a browser lays
// out a 1 MB unbroken line for seconds, with the page frozen meanwhile, so
// a longer line is shown cut, saying how much was left out (the text in
// the file is untouched; ce and workspace_read give all of it).
const maxRenderLineBytes = 8 << 10

// cutLongLines cuts every line longer than maxRenderLineBytes on a
// character boundary and says so on the line; long reports whether any was.
func cutLongLines(src string) (string, bool) {
	var b strings.Builder
	long := false
	for line := range strings.Lines(src) {
		body := strings.TrimSuffix(line, "\n")
		if len(body) <= maxRenderLineBytes {
			b.WriteString(line)
			continue
		}
		keep := maxRenderLineBytes
		for keep > 0 && !utf8.RuneStart(body[keep]) {
			keep--
		}
		fmt.Fprintf(&b, "%s … [%d more bytes of this line not shown]\n", body[:keep], len(body)-keep)
		long = true
	}
	return b.String(), long
}

// markHeadings gives each top-level heading its region's path, in order;
// the room finds regions among the top-level headings too
// (markdown.ParseRegions). Should the two ever disagree on how many there
// are, no heading is marked rather than a wrong one.
func markHeadings(doc ast.Node, regions []markdown.Region) {
	var hs []ast.Node
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		if n.Kind() == ast.KindHeading {
			hs = append(hs, n)
		}
	}
	if len(hs) != len(regions) {
		return
	}
	for i, h := range hs {
		h.SetAttributeString("data-path", []byte(regions[i].Path))
		h.SetAttributeString("class", []byte("doc-section"))
	}
}

// neutralize makes links safe to click and images inert: a destination
// that is not http(s), mailto or a same-page fragment is dropped, an
// autolink to anything else becomes its text, and an image becomes a link
// to its address (with its alt text) so nothing is fetched.
func neutralize(doc ast.Node, src []byte) {
	type swap struct{ old, repl ast.Node }
	var swaps []swap
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch v := n.(type) {
		case *ast.Link:
			if !safeURL(v.Destination) {
				v.Destination = nil
			}
			v.SetAttributeString("rel", []byte("noopener noreferrer"))
			v.SetAttributeString("target", []byte("_blank"))
		case *ast.Image:
			l := ast.NewLink()
			if safeURL(v.Destination) {
				l.Destination = v.Destination
			}
			l.Title = v.Title
			l.SetAttributeString("rel", []byte("noopener noreferrer"))
			l.SetAttributeString("target", []byte("_blank"))
			l.SetAttributeString("class", []byte("image-link"))
			for c := v.FirstChild(); c != nil; {
				next := c.NextSibling()
				l.AppendChild(l, c)
				c = next
			}
			if l.ChildCount() == 0 {
				l.AppendChild(l, ast.NewString([]byte("image")))
			}
			swaps = append(swaps, swap{v, l})
			return ast.WalkSkipChildren, nil
		case *ast.AutoLink:
			if !safeURL(v.URL(src)) {
				swaps = append(swaps, swap{v, ast.NewString(v.Label(src))})
			}
		case *ast.RawHTML, *ast.HTMLBlock:
			// Dropped by the safe renderer already ("raw HTML omitted").
		}
		return ast.WalkContinue, nil
	})
	for _, s := range swaps {
		s.old.Parent().ReplaceChild(s.old.Parent(), s.old, s.repl)
	}
}

// safeURL allows http, https and mailto addresses and same-page fragments:
// nothing that runs script, reads a local file or leaves for an unknown
// handler, however it is spelled (case, entities decoded by the parser,
// leading spaces or control characters).
func safeURL(dest []byte) bool {
	s := string(dest)
	if s == "" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return false
		}
	}
	if strings.HasPrefix(s, "#") {
		return true
	}
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "mailto":
		return true
	}
	return false
}
