// Package mcpapp is the room's board as an MCP App (the
// io.modelcontextprotocol/ui extension, as @modelcontextprotocol/ext-apps
// 2.0.4 publishes it): one self-contained HTML view, its ui:// address,
// the metadata a host reads to sandbox it, and what a client must declare
// to be shown it. It holds no protocol handling: the MCP door (package
// mcp) advertises, links and serves it, so that the door's catalog stays
// one table and this package stays the view and its constants.
package mcpapp

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
)

// Extension is the MCP Apps extension's key in a client's
// capabilities.extensions: only a client that declares it (with MimeType)
// is shown the board, its link on tools and its app-only tool.
const Extension = "io.modelcontextprotocol/ui"

// MimeType is the MIME type of an MCP App's HTML resource; the extension's
// capability lists it in mimeTypes, and the resource carries it.
const MimeType = "text/html;profile=mcp-app"

// BoardURI is the board's resource: what a linked tool's
// _meta.ui.resourceUri names and resources/read serves.
const BoardURI = "ui://commonroom/board"

// BoardTool is the app-only tool the view reads the board with
// (visibility ["app"]): the model is never offered it, since the linked
// tools already give it the same facts as text.
const BoardTool = "workspace_board"

// LinkedTools are the model's tools whose results a host shows with the
// board beside them: the inbox and the proposals, what a person reviews
// and decides on.
var LinkedTools = []string{"handoff_list", "workspace_proposals"}

// Declared reports whether a client's capabilities.extensions entry for
// Extension (raw JSON; nil when absent) declares MCP Apps: an object whose
// mimeTypes includes MimeType, the test the extension's own server helper
// (getUiCapability) documents. Anything else is not a declaration.
func Declared(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	var c struct {
		MimeTypes []string `json:"mimeTypes"`
	}
	if json.Unmarshal(raw, &c) != nil {
		return false
	}
	return slices.Contains(c.MimeTypes, MimeType)
}

// ResourceMeta is the board's _meta on resources/list and resources/read:
// a CSP with no domain of any kind (no network, no remote script, style,
// image or frame: the view needs none) and a border preference.
func ResourceMeta() map[string]any {
	return map[string]any{"ui": map[string]any{
		"csp": map[string]any{
			"connectDomains":  []string{},
			"resourceDomains": []string{},
			"frameDomains":    []string{},
			"baseUriDomains":  []string{},
		},
		"prefersBorder": true,
	}}
}

//go:embed board.html
var pageTemplate string

//go:embed board.css
var pageStyle string

//go:embed board.js
var pageScript string

// html is the assembled view, made once.
var html = assemble()

// HTML is the board's document: board.html with board.css and board.js
// inlined, and a Content-Security-Policy meta allowing exactly those two
// by hash and nothing else (defence in depth beside the host's sandbox,
// which applies the resource's csp).
func HTML() string { return html }

// CSP is the policy the document's meta element carries.
func CSP() string {
	return "default-src 'none'; script-src '" + hash(pageScript) + "'; style-src '" + hash(pageStyle) +
		"'; img-src 'none'; font-src 'none'; connect-src 'none'; frame-src 'none'; base-uri 'none'; form-action 'none'"
}

func assemble() string {
	return strings.NewReplacer(
		"{{CSP}}", CSP(),
		"{{STYLE}}", pageStyle,
		"{{SCRIPT}}", pageScript,
	).Replace(pageTemplate)
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}
