package projection

// WrapViews replaces p's view store by wrap(its store), for tests that
// count or fail the projection's view reads and writes. Call it before Run.
func WrapViews(p *Projection, wrap func(ViewStore) ViewStore) { p.views = wrap(p.views) }
