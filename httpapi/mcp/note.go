package mcp

import (
	"net/http"

	"github.com/commonroom/ce/httpapi/internal/reqnote"
)

// notify hands n to the front door, when it asked for notes.
func (h *Handler) notify(r *http.Request, n *reqnote.Note) {
	if h.note != nil {
		h.note(r, *n)
	}
}
