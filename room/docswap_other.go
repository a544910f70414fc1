//go:build !linux

package room

// exchangeFiles has no atomic exchange to call outside Linux: the guarded
// replace falls back to check-then-rename (see renameChecked).
func exchangeFiles(a, b string) error { return errNoExchange }
