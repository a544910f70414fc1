package room

// MaxSelectorBytes is the longest section selector (a heading title or path,
// optionally prefixed "section:") the room looks up. A longer one names no
// section anyone wrote by hand; refusing it where it enters keeps a huge
// selector from being compared against every heading and from coming back
// in the "not found" error that would otherwise quote it.
const MaxSelectorBytes = 4096

// checkSelector refuses a selector longer than MaxSelectorBytes, without
// quoting it.
func checkSelector(selector string) error {
	if len(selector) > MaxSelectorBytes {
		return Errorf(KindInvalidRequest, "a section selector is at most %d bytes; this one is %d", MaxSelectorBytes, len(selector))
	}
	return nil
}
