package cli

import (
	"encoding/json"
	"fmt"
	"io"
)

// printJSON writes v as one indented JSON document.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

// workspaceFlag is the document a local command works on.
const workspaceUsage = "the room's Markdown file (env CE_WORKSPACE)"
