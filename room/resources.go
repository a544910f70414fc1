package room

import "context"

// ResourceURI checks that uri names a resource of this room that exists now
// (the document, or a section of the current version) and returns it in the
// form change notices use, so a section named by its title is followed under
// its path. ok is false for anything else. A URI longer than
// MaxResourceURIChars is refused before it is parsed: whatever a client asks
// to follow is kept in memory, so it must be small and real.
func (e *Engine) ResourceURI(ctx context.Context, q Querier, p Principal, uri string) (canonical string, ok bool, err error) {
	if err := p.Require(CapRead); err != nil {
		return "", false, err
	}
	if len(uri) > e.Limits.MaxResourceURIChars {
		return "", false, nil
	}
	section, ok := e.SectionFromURI(uri)
	if !ok {
		return "", false, nil
	}
	if section == "" {
		return e.DocumentURI(), true, nil
	}
	d, err := e.CurrentDoc(ctx, q)
	if err != nil {
		return "", false, err
	}
	r, whole, err := d.FindSection(section)
	if err != nil {
		return "", false, nil // not a section of the current version
	}
	if whole {
		return e.DocumentURI(), true, nil
	}
	return e.SectionURI(r.Path), true, nil
}
