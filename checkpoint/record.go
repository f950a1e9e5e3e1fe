package checkpoint

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// Record is the checkpoint: the session's loaded deferred tools at a
// persistence safe point and the tool contract they belong to. It is the
// CheckpointRecorded event payload itself, so a record is appended as is
// and read back as is (use Clone for a copy that shares no slice); a turn's
// end at a safe point carries it inside its TurnEnded (TurnEnded.Checkpoint),
// and the fold makes either the session's last checkpoint.
//
// Records built by New satisfy the checkpoint rules: Loaded is sorted, de-duplicated, never
// nil, and every name is a deferred tool of the contract whose hash is
// ContractHash. A Record read back from the log keeps whatever the writer
// stored; a nil Loaded there is an older checkpoint without the field and
// means the empty set. Resume checks a Record against the current contract
// whatever its origin.
//
// Contract lists each loaded tool with its resolver.ToolHash, in Loaded
// order, so that Resume can tell per tool whether it changed; the record
// so grows with what the turn loaded, never with the registry (Size gives
// its bound). Checkpoints of older writers list every tool of the
// contract, in resolution order (FullContract reports that form), or
// nothing at all; both still resume.
type Record = events.CheckpointRecorded

// New records a checkpoint at turn turn of the loaded deferred tools
// loaded, against res, the resolution (tool contract) of that turn.
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

	contract := make([]events.ContractEntry, len(names))
	for i, name := range names {
		contract[i] = events.ContractEntry{Name: name, Hash: res.ToolHashAt(index(res.Tools, name))}
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
	if i := index(tools, name); i >= 0 {
		return tools[i], true
	}
	return resolver.Tool{}, false
}

// index returns the position of the first tool of tools named name, -1
// when there is none.
func index(tools []resolver.Tool, name string) int {
	for i := range tools {
		if tools[i].Name == name {
			return i
		}
	}
	return -1
}

// isDeferred is the effective deferral mark: the resolver's mark, except
// that tool_search is never deferred (guard 2, as in deferral).
func isDeferred(t resolver.Tool) bool {
	return t.Deferred && t.Name != resolver.ToolSearch
}
