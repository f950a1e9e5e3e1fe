package checkpoint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// Record is the checkpoint of R19: the session's loaded deferred tools at a
// persistence safe point and the tool contract they belong to. It is the
// CheckpointRecorded event payload itself, so a record is appended as is
// and read back as is (use Clone for a copy that shares no slice); a turn's
// end at a safe point carries it inside its TurnEnded (TurnEnded.Checkpoint,
// #28), and the fold makes either the session's last checkpoint.
//
// Records built by New satisfy R19: Loaded is sorted, de-duplicated, never
// nil, and every name is a deferred tool of the contract whose hash is
// ContractHash. A Record read back from the log keeps whatever the writer
// stored; a nil Loaded there is an older checkpoint without the field and
// means the empty set. Resume checks a Record against the current contract
// whatever its origin. Contract lists each tool of the contract, in
// resolution order, with its resolver.ToolHash, so that Resume can say
// which tool changed; it is empty for checkpoints of older writers.
type Record = events.CheckpointRecorded

// New records a checkpoint at turn turn of the loaded deferred tools
// loaded, against res, the resolution (tool contract) of that turn (R19).
//
// Every loaded name must be a tool of res and deferred there (tool_search
// and RESIDENT_TOOLS are resident and need no loading); otherwise New
// returns an error wrapping ErrNotInContract that names each offending tool
// and the contract hash. Duplicates are dropped and Loaded is sorted. A nil
// res returns an error wrapping ErrNoContract. New copies what it keeps; it
// never modifies res or loaded.
func New(turn uint64, res *resolver.Resolution, loaded []string) (Record, error) {
	if res == nil {
		return Record{}, fmt.Errorf("record checkpoint of turn %d: nil resolution: pass the resolution the turn was frozen with: %w", turn, ErrNoContract)
	}
	names := slices.Clone(loaded)
	if names == nil {
		names = []string{}
	}
	slices.Sort(names)
	names = slices.Compact(names)

	var bad []string
	for _, name := range names {
		switch t, ok := find(res.Tools, name); {
		case !ok:
			bad = append(bad, strconv.Quote(name)+" is not in it")
		case !isDeferred(t):
			bad = append(bad, strconv.Quote(name)+" is resident")
		}
	}
	if len(bad) > 0 {
		return Record{}, fmt.Errorf("record checkpoint of turn %d against contract %s: %s; record only deferred tools of that resolution (resident tools need no loading): %w",
			turn, res.ContractHash, strings.Join(bad, ", "), ErrNotInContract)
	}

	contract := make([]events.ContractEntry, len(res.Tools))
	for i := range res.Tools {
		contract[i] = events.ContractEntry{Name: res.Tools[i].Name, Hash: res.ToolHashAt(i)}
	}
	return Record{
		Loaded:          names,
		ContractHash:    res.ContractHash,
		RegistryVersion: res.RegistryVersion,
		Turn:            turn,
		Contract:        contract,
	}, nil
}

// find returns the first tool of tools named name.
func find(tools []resolver.Tool, name string) (resolver.Tool, bool) {
	for i := range tools {
		if tools[i].Name == name {
			return tools[i], true
		}
	}
	return resolver.Tool{}, false
}

// isDeferred is the effective deferral mark: the resolver's mark, except
// that tool_search is never deferred (guard 2 of R14, as in deferral).
func isDeferred(t resolver.Tool) bool {
	return t.Deferred && t.Name != resolver.ToolSearch
}
