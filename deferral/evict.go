package deferral

// Bounds of a session's loaded deferred set. MaxLoaded is
// the most tools the log's loaded set may hold (events.MaxListLen, which
// a checkpoint's loaded list is bounded by; a test keeps the two equal).
// At a turn boundary the engine evicts the tools loaded longest ago down
// to LoadedBound, so every turn has MaxLoaded-LoadedBound loads of room,
// and a search that finds more than the room loads what fits and says so
// (Turn.SearchWithin): the bound is never an error.
const (
	MaxLoaded   = 256
	LoadedBound = 192
)

// Evict returns the names a turn boundary evicts from a loaded set given
// in load order (aggregate.State.InLoadOrder), to keep at most bound: the
// first len(order)-bound, loaded longest ago. nil when nothing is
// evicted. The choice depends only on the order, so any engine evicts the
// same tools.
func Evict(order []string, bound int) []string {
	if bound < 0 || len(order) <= bound {
		return nil
	}
	return append([]string(nil), order[:len(order)-bound]...)
}
