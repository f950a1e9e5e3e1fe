package aggregate

import (
	"math"
	"slices"
	"sort"

	"github.com/toolintent/engine/events"
)

// refState is the reference fold's state: an independent, naive
// implementation of the fold rules (State.ApplyStored's doc comment and
// State.Check's rules), with maps for sets and no code
// shared with state.go beyond the events package's own envelope checks.
// The property tests compare Fold with it.
type refState struct {
	enabled, webSearch *bool
	preset             string
	disabled           map[string]bool
	picked             []string
	pickedSet          bool
	loaded             map[string]bool
	turn               uint64
	inTurn             bool
	lastSeq            uint64
	applied, skipped   uint64
	rejected           uint64
	checkpoint         *Checkpoint
}

func refFold(session string, log []Stored) refState {
	r := refState{disabled: map[string]bool{}, loaded: map[string]bool{}}
	for _, ev := range log {
		if ev.Seq <= r.lastSeq {
			continue // a redelivery: already folded
		}
		r.lastSeq = ev.Seq
		if ev.Err != nil || ev.Envelope.Session != session {
			r.skipped++ // undecodable, or another session's event
			continue
		}
		p, ok := events.PayloadValue(ev.Envelope.Payload)
		if !ok {
			r.skipped++ // no payload of a known type
			continue
		}
		if events.CheckStored(ev.Envelope, ev.MsgID) != nil || !r.allows(p) {
			r.rejected++
			continue
		}
		r.applied++
		switch v := p.(type) {
		case events.ToolsToggled:
			r.enabled = v.Enabled
			r.picked, r.pickedSet = nil, false
		case events.WebSearchSet:
			r.webSearch = v.Enabled
		case events.PresetChosen:
			r.preset = v.Preset
		case events.ToolDisabled:
			r.disabled[v.Name] = true
		case events.ToolEnabled:
			delete(r.disabled, v.Name)
		case events.ToolsPicked:
			r.picked, r.pickedSet = append([]string(nil), v.Names...), v.Names != nil
		case events.DeferredLoaded:
			for _, n := range v.Names {
				r.loaded[n] = true
			}
		case events.TurnStarted:
			r.turn, r.inTurn = v.Turn, true
		case events.TurnEnded:
			r.inTurn = false
			if v.Checkpoint != nil { // As a CheckpointRecorded right after it
				r.recordCheckpoint(*v.Checkpoint, ev.Seq)
			}
		case events.CheckpointRecorded:
			r.recordCheckpoint(v, ev.Seq)
		}
	}
	return r
}

func (r *refState) recordCheckpoint(v events.CheckpointRecorded, seq uint64) {
	r.checkpoint = &Checkpoint{Record: v, Seq: seq}
	r.loaded = map[string]bool{}
	for _, n := range v.Loaded {
		r.loaded[n] = true
	}
}

// allows applies the session rules to payload p.
func (r *refState) allows(p events.Payload) bool {
	switch v := p.(type) {
	case events.TurnStarted:
		return r.turn != math.MaxUint64 && v.Turn == r.turn+1
	case events.TurnEnded:
		return r.inTurn && v.Turn == r.turn && (v.Checkpoint == nil || v.Checkpoint.Turn <= r.turn)
	case events.DeferredLoaded:
		if !r.inTurn || v.Turn != r.turn {
			return false
		}
		union := map[string]bool{}
		for n := range r.loaded {
			union[n] = true
		}
		for _, n := range v.Names {
			union[n] = true
		}
		return len(union) <= events.MaxListLen
	case events.ToolDisabled:
		return r.disabled[v.Name] || len(r.disabled) < events.MaxListLen
	case events.CheckpointRecorded:
		return v.Turn <= r.turn
	}
	return true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func eqTri(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// diffRef describes how s differs from the reference r ("" when it does
// not): every field the fold rules define.
func diffRef(s State, r refState) string {
	switch {
	case !eqTri(s.Intent.Enabled, r.enabled):
		return "enabled"
	case !eqTri(s.Intent.WebSearch, r.webSearch):
		return "web_search"
	case s.Intent.Preset != r.preset:
		return "preset"
	case !slices.Equal(append([]string{}, s.Intent.Disabled...), keys(r.disabled)):
		return "disabled"
	case (s.Intent.Picked != nil) != r.pickedSet || !slices.Equal(s.Intent.Picked, r.picked):
		return "picked"
	case !slices.Equal(append([]string{}, s.Loaded...), keys(r.loaded)):
		return "loaded"
	case s.Turn != r.turn || s.InTurn != r.inTurn:
		return "turn"
	case s.LastSeq != r.lastSeq:
		return "last_seq"
	case s.Events != r.applied || s.Skipped != r.skipped || s.Rejected != r.rejected:
		return "counters (applied, skipped, rejected)"
	case (s.Checkpoint == nil) != (r.checkpoint == nil):
		return "checkpoint presence"
	case s.Checkpoint != nil && (s.Checkpoint.Seq != r.checkpoint.Seq || s.Checkpoint.Turn != r.checkpoint.Turn ||
		s.Checkpoint.ContractHash != r.checkpoint.ContractHash || s.Checkpoint.RegistryVersion != r.checkpoint.RegistryVersion ||
		!slices.Equal(s.Checkpoint.Loaded, r.checkpoint.Loaded) || !slices.Equal(s.Checkpoint.Contract, r.checkpoint.Contract)):
		return "checkpoint"
	}
	return ""
}
