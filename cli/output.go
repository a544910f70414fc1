package cli

import (
	"encoding/json"
	"io"
)

// printJSON writes v as one line of JSON, as `ce serve --json` does, so
// every command's output can be read line by line (jq -c, a log shipper).
// Text is not HTML-escaped: an invitation or a note reads as it is.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// workspaceFlag is the document a local command works on.
const workspaceUsage = "the room's Markdown file (env CE_WORKSPACE)"
