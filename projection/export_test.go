package projection

// WrapViews replaces p's view store by wrap(its store), for tests that
// count or fail the projection's view reads and writes. Call it before Run.
func WrapViews(p *Projection, wrap func(ViewStore) ViewStore) { p.views = wrap(p.views) }

// SetOrderedCatchUpMin sets the backlog from which a rebuilding projection
// folds through an ordered consumer, and returns the old value.
func SetOrderedCatchUpMin(n uint64) uint64 {
	old := orderedCatchUpMin
	orderedCatchUpMin = n
	return old
}

// SetEvictedAlwaysMaybe makes the evicted set of a rebuild answer "maybe
// evicted" for every session (as a false positive does for a few), and
// returns the old setting.
func SetEvictedAlwaysMaybe(on bool) bool {
	old := evictedAlwaysMaybe
	evictedAlwaysMaybe = on
	return old
}
