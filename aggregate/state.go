// Package aggregate folds a session's events into its current state: the
// stored intent (R1), the loaded deferred set, the turn, the last checkpoint
// and the last applied sequence (R24). It also validates commands against
// that state and the live registry before they are appended (Decide, R2).
//
// Folding is deterministic: the same events in the same order yield the same
// State, byte for byte once marshalled, and folding a prefix, snapshotting it
// with MarshalState and folding the rest yields the same State as folding
// everything. Apply never panics; events it cannot use are counted as
// skipped (R26). A State is a value; its methods are not safe for concurrent
// mutation, and Clone gives an independent copy for caching.
package aggregate

import (
	"slices"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// State is one session folded from its events.
type State struct {
	// Session is the session id; set by Fold, or by the first applied
	// event when empty.
	Session string
	// Intent is the session's stored intent (R1). Intent.Disabled is
	// sorted and de-duplicated, nil when empty; Intent.Picked is nil when
	// unset and keeps the user's order.
	Intent resolver.Intent
	// Loaded is the set of deferred tools loaded in this session, sorted,
	// de-duplicated, nil when empty.
	Loaded []string
	// Turn is the number of the last started turn, 0 before the first.
	Turn uint64
	// InTurn reports whether turn Turn has started and not ended.
	InTurn bool
	// LastSeq is the stream sequence of the last applied or skipped event.
	LastSeq uint64
	// Events counts applied events.
	Events uint64
	// Checkpoint is the last recorded checkpoint, nil if none.
	Checkpoint *Checkpoint
	// Skipped counts events that could not be applied (undecodable, of an
	// unknown type, or naming another session) (R26).
	Skipped uint64
}

// Checkpoint is the last CheckpointRecorded event of a session (R19).
type Checkpoint struct {
	// Loaded is loaded_deferred_tools as recorded (nil = empty set).
	Loaded []string
	// ContractHash is the hash of the contract Loaded belongs to.
	ContractHash string
	// RegistryVersion is the registry version of that contract.
	RegistryVersion string
	// Turn is the turn the checkpoint was taken at.
	Turn uint64
	// Seq is the stream sequence of the CheckpointRecorded event.
	Seq uint64
	// Contract optionally lists every tool of the contract with its hash.
	Contract []events.ContractEntry
}

// Stored is one event as read from the log: its sequence, and either the
// decoded envelope or the decode error.
type Stored struct {
	// Seq is the stream sequence.
	Seq uint64
	// Envelope is the decoded event; ignored when Err is set.
	Envelope events.Envelope
	// Err is the decode error, if any; the event is then skipped (R26).
	Err error
}

// Fold folds evs, in order, into a fresh State for session. Events with
// Err != nil are skipped (counted, LastSeq advanced), and so are events
// with a sequence at or below the previous one.
func Fold(session string, evs []Stored) State {
	s := State{Session: session}
	for _, ev := range evs {
		s.ApplyStored(ev.Seq, ev.Envelope, ev.Err)
	}
	return s
}

// ApplyStored folds one event as read from the log: Apply, or Skip when
// decodeErr says it could not be decoded (R26).
func (s *State) ApplyStored(seq uint64, e events.Envelope, decodeErr error) {
	if decodeErr != nil {
		s.Skip(seq)
		return
	}
	s.Apply(seq, e)
}

// Skip records that the event at seq could not be decoded: it counts it and
// advances LastSeq, so later events keep applying (R26). Like Apply it
// ignores seq <= LastSeq.
func (s *State) Skip(seq uint64) {
	if seq <= s.LastSeq {
		return
	}
	s.LastSeq = seq
	s.Skipped++
}

// Apply folds the event e stored at seq into s. It is deterministic, never
// panics, and ignores seq <= LastSeq, so re-delivered events are harmless
// (idempotent). An event for another session, with no payload or with a
// payload type this package does not know is skipped (see Skip).
//
// Fold rules: ToolsToggled sets Intent.Enabled and clears Intent.Picked
// (whatever its value: on, off or follow the profile); WebSearchSet sets
// Intent.WebSearch; PresetChosen sets Intent.Preset; ToolDisabled adds to
// Intent.Disabled and ToolEnabled removes from it; ToolsPicked sets
// Intent.Picked (nil unsets); DeferredLoaded adds to Loaded; TurnStarted
// sets Turn and InTurn; TurnEnded clears InTurn; CheckpointRecorded sets
// Checkpoint and replaces Loaded by the checkpoint's set.
func (s *State) Apply(seq uint64, e events.Envelope) {
	if seq <= s.LastSeq {
		return
	}
	if s.Session != "" && e.Session != s.Session {
		s.Skip(seq)
		return
	}
	p, ok := events.PayloadValue(e.Payload)
	if !ok {
		s.Skip(seq)
		return
	}
	switch v := p.(type) {
	case events.ToolsToggled:
		s.Intent.Enabled = cloneBool(v.Enabled)
		s.Intent.Picked = nil // a master-switch change is the user's new choice
	case events.WebSearchSet:
		s.Intent.WebSearch = cloneBool(v.Enabled)
	case events.PresetChosen:
		s.Intent.Preset = v.Preset
	case events.ToolDisabled:
		s.Intent.Disabled = insertSorted(s.Intent.Disabled, v.Name)
	case events.ToolEnabled:
		s.Intent.Disabled = removeSorted(s.Intent.Disabled, v.Name)
	case events.ToolsPicked:
		s.Intent.Picked = slices.Clone(v.Names)
	case events.DeferredLoaded:
		for _, n := range v.Names {
			s.Loaded = insertSorted(s.Loaded, n)
		}
	case events.TurnStarted:
		s.Turn = v.Turn
		s.InTurn = true
	case events.TurnEnded:
		s.InTurn = false
	case events.CheckpointRecorded:
		s.Checkpoint = &Checkpoint{
			Loaded:          slices.Clone(v.Loaded),
			ContractHash:    v.ContractHash,
			RegistryVersion: v.RegistryVersion,
			Turn:            v.Turn,
			Seq:             seq,
			Contract:        slices.Clone(v.Contract),
		}
		s.Loaded = sortedSet(v.Loaded)
	default:
		s.Skip(seq)
		return
	}
	if s.Session == "" {
		s.Session = e.Session
	}
	s.LastSeq = seq
	s.Events++
}

// Clone returns a deep copy of s: no slice, pointer or checkpoint is shared,
// and nil stays nil.
func (s State) Clone() State {
	c := s
	c.Intent.Enabled = cloneBool(s.Intent.Enabled)
	c.Intent.WebSearch = cloneBool(s.Intent.WebSearch)
	c.Intent.Disabled = slices.Clone(s.Intent.Disabled)
	c.Intent.Picked = slices.Clone(s.Intent.Picked)
	c.Loaded = slices.Clone(s.Loaded)
	if s.Checkpoint != nil {
		cp := *s.Checkpoint
		cp.Loaded = slices.Clone(cp.Loaded)
		cp.Contract = slices.Clone(cp.Contract)
		c.Checkpoint = &cp
	}
	return c
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}

// insertSorted adds name to the sorted set xs (copy-on-write, so a Clone's
// slices are never written through).
func insertSorted(xs []string, name string) []string {
	i, found := slices.BinarySearch(xs, name)
	if found {
		return xs
	}
	out := make([]string, 0, len(xs)+1)
	out = append(out, xs[:i]...)
	out = append(out, name)
	return append(out, xs[i:]...)
}

// removeSorted removes name from the sorted set xs (copy-on-write); the
// empty set is nil.
func removeSorted(xs []string, name string) []string {
	i, found := slices.BinarySearch(xs, name)
	if !found {
		return xs
	}
	if len(xs) == 1 {
		return nil
	}
	out := make([]string, 0, len(xs)-1)
	out = append(out, xs[:i]...)
	return append(out, xs[i+1:]...)
}

// sortedSet returns a sorted, de-duplicated copy of xs; nil when empty.
func sortedSet(xs []string) []string {
	if len(xs) == 0 {
		return nil
	}
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}
