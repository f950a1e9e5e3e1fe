package checkpoint

import (
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/resolver"
)

// Dispatch records one provider dispatch's resident/deferred
// classification, for the context inspector.
//
// Resident and Deferred partition the dispatch's tools, each in resolution
// order (see Classify for a Split without a classification); Loaded is the part of Deferred whose schema is in the provider
// array this dispatch (the rest of Deferred is the catalog). The slices are
// never nil.
type Dispatch struct {
	// Turn is the turn the dispatch belongs to.
	Turn uint64
	// ContractHash is the contract hash of the turn's resolution.
	ContractHash string
	// Resident are the tools that are never deferred (RESIDENT_TOOLS and
	// tool_search).
	Resident []string
	// Deferred are the deferred tools, loaded or not.
	Deferred []string
	// Loaded are the deferred tools that are loaded, so in the provider
	// array.
	Loaded []string
	// At is the dispatch time in unix milliseconds. Classify leaves it 0 so
	// that it stays deterministic (replay reclassifies past
	// dispatches); the caller stamps it when recording a live dispatch.
	At int64
}

// Classify returns the classification record of a dispatch of turn turn
// that used split, computed from resolution res. It reads
// split.Classification; a Split with no classification (built by hand) is
// classified from its Provider and Catalog halves instead, tool_search
// always resident, and Deferred then lists the loaded tools (in
// Provider order) before the catalog's. A nil res leaves ContractHash "". Classify is
// pure and does not modify its arguments.
func Classify(turn uint64, res *resolver.Resolution, split deferral.Split) Dispatch {
	d := Dispatch{Turn: turn, Resident: []string{}, Deferred: []string{}, Loaded: []string{}}
	if res != nil {
		d.ContractHash = res.ContractHash
	}
	if len(split.Classification) > 0 {
		for _, c := range split.Classification {
			switch {
			case c.Resident || !c.Deferred || c.Name == resolver.ToolSearch:
				d.Resident = append(d.Resident, c.Name)
			default:
				d.Deferred = append(d.Deferred, c.Name)
				if c.Loaded {
					d.Loaded = append(d.Loaded, c.Name)
				}
			}
		}
		return d
	}
	for i := range split.Provider {
		t := split.Provider[i]
		if isDeferred(t) {
			d.Deferred = append(d.Deferred, t.Name)
			d.Loaded = append(d.Loaded, t.Name)
		} else {
			d.Resident = append(d.Resident, t.Name)
		}
	}
	d.Deferred = append(d.Deferred, split.Catalog...)
	return d
}
