package page

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"path"
	"strings"

	"github.com/commonroom/ce/actor"
	"github.com/commonroom/ce/room"
)

// The page (ARCHITECTURE.md D30 and "A participant's page"): plain HTML
// rendered here, one stylesheet and one script served from /page/ on the
// owner listener and the ingress. No build step and no inline script or
// style, so the page's Content Security Policy can forbid both. The script
// re-reads GET /workspace/room whenever GET /workspace/observe reports a
// change (coalesced; every 5 s for a viewer without observe), and acts
// through the same /workspace routes as every other client; the cookie
// rides along only on same-origin requests, and the server checks Origin on
// writes (D23).

//go:embed index.html page.css page.js favicon.svg
var pageFiles embed.FS

var pageTmpl = template.Must(template.New("index.html").Funcs(template.FuncMap{
	"indent": func(level int) int {
		if level < 1 {
			return 0
		}
		return min(level-1, 5)
	},
	"size": byteSize,
}).ParseFS(pageFiles, "index.html"))

// pageCSP is the page's Content Security Policy: its own script, style and
// connections only; nothing inline, no frames, no forms posting anywhere.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pageAssetFile is one static file of the page, read once from the binary.
type pageAssetFile struct {
	body        []byte
	contentType string
	etag        string
}

// pageAssets are the files GET /page/{name} serves. index.html is the
// template above and is deliberately not among them.
var pageAssets = func() map[string]pageAssetFile {
	types := map[string]string{"page.css": "text/css; charset=utf-8", "page.js": "text/javascript; charset=utf-8",
		"favicon.svg": "image/svg+xml"}
	out := make(map[string]pageAssetFile, len(types))
	for name, ct := range types {
		b, err := pageFiles.ReadFile(name)
		if err != nil {
			panic("page: embedded page asset missing: " + name)
		}
		sum := sha256.Sum256(b)
		out[name] = pageAssetFile{body: b, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	}
	return out
}()

// pageView is what index.html is rendered from: the room as its viewer
// sees it, so the page is readable before its script has run.
type pageView struct {
	room.RoomView
	// MayCommit says the viewer may commit an approved proposal itself, so
	// the page offers "Approve and commit" in one step (the operator may);
	// otherwise a card says who commits next.
	MayCommit bool
	// Viewer is who the page is for: the operator on the owner listener,
	// one participant's session on the ingress. The page shows only the
	// actions it may take; the server refuses the rest anyway.
	Viewer Viewer
}

// Viewer is the page's viewer as the template and the script read it.
type Viewer struct {
	ParticipantID string
	Operator      bool
	// Caps are the capabilities the viewer holds, spelled out (the
	// operator's "*" as every one), so the script needs no rule for "*" or
	// admin.
	Caps []string
}

// viewerOf spells out p's effective capabilities.
func viewerOf(p room.Principal) Viewer {
	v := Viewer{ParticipantID: p.ParticipantID, Operator: p.Trusted}
	for _, c := range room.CapabilityNames() {
		if c != string(room.CapAll) && p.Require(room.Capability(c)) == nil {
			v.Caps = append(v.Caps, c)
		}
	}
	return v
}

// May says whether the viewer holds capability c (for the template).
func (v Viewer) May(c string) bool {
	for _, x := range v.Caps {
		if x == c {
			return true
		}
	}
	return false
}

// ViewerName is the name the page is signed in as, shown at its top so a
// person sees whose session acts (a page opened from someone else's link
// would otherwise look like their own): the viewer's entry among the
// room's participants, or its id when the list was cut before it.
func (v pageView) ViewerName() string {
	for _, pt := range v.Participants {
		if pt.ParticipantID == v.Viewer.ParticipantID {
			return pt.Name
		}
	}
	return v.Viewer.ParticipantID
}

// CapList is Caps as one attribute value.
func (v Viewer) CapList() string { return strings.Join(v.Caps, " ") }

// Connection is the listener line: type · mode · encrypted|not encrypted
// for loopback, the exposed transport's own line (its name, mode,
// encryption and endpoint) for any other.
func (v pageView) Connection() string {
	l := v.Diagnostics.Listener
	if l.Type != "loopback" && l.Describe != "" {
		return l.Describe
	}
	enc := "not encrypted"
	if l.Encrypted {
		enc = "encrypted"
	}
	parts := []string{}
	for _, s := range []string{l.Type, l.Mode} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(append(parts, enc), " · ")
}

// servePage renders p's view of the room. Index has already checked the
// cookie and found p.
func (d *Handler) servePage(w http.ResponseWriter, r *http.Request, p room.Principal) {
	eng := d.cfg.Room.Engine()
	v, err := actor.Read(r.Context(), d.cfg.Room, func(q room.Querier) (room.RoomView, error) {
		return eng.Room(r.Context(), q, p, room.Empty{})
	})
	if err != nil {
		d.cfg.SendError(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if err := pageTmpl.Execute(w, pageView{RoomView: v, MayCommit: p.Require(room.CapCommit) == nil, Viewer: viewerOf(p)}); err != nil {
		d.cfg.Logger.Error("rendering the page", "err", err, "request_id", d.cfg.RequestID(r))
	}
}

// Asset serves the page's stylesheet and script (GET /page/{name}, mounted
// on the owner listener only). They hold no room data, so they need no
// cookie; they are revalidated on every load so an upgraded binary is
// picked up at once.
func (d *Handler) Asset(w http.ResponseWriter, r *http.Request) {
	name := path.Base(r.URL.Path)
	a, ok := pageAssets[name]
	if !ok || r.URL.Path != "/page/"+name {
		d.cfg.SendError(w, r, room.Errorf(room.KindNotFound, "no such page asset: %s", r.URL.Path))
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Write(a.body)
}

// byteSize writes a size the way people read it, as page.js does: 812 B,
// 4.1 KiB, 1.2 MiB, 3.4 GiB.
func byteSize(n int64) string {
	switch {
	case n < 1024:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
}
