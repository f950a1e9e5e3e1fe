package aggregate

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/resolver"
)

// StateVersion is the schema version MarshalState writes under key "v"
// (R3: snapshots carry a schema version). UnmarshalState reads versions 1
// to StateVersion.
const StateVersion = 1

// MaxStateBytes bounds the size of a marshalled State accepted by
// UnmarshalState.
const MaxStateBytes = 1 << 20

var (
	// ErrMalformedState means bytes given to UnmarshalState are not a
	// marshalled State.
	ErrMalformedState = errors.New("malformed state")
	// ErrStateVersion means a marshalled State has a schema version this
	// engine cannot read (newer than StateVersion, or below 1); rebuild
	// the state by folding the log.
	ErrStateVersion = errors.New("unsupported state schema version")
)

// Wire form of a State: a msgpack map with string keys. Field order is the
// encoding order, so MarshalState is deterministic.
type stateWire struct {
	V          int             `msgpack:"v"`
	Session    string          `msgpack:"session"`
	Intent     intentWire      `msgpack:"intent"`
	Loaded     []string        `msgpack:"loaded"`
	Turn       uint64          `msgpack:"turn"`
	InTurn     bool            `msgpack:"in_turn"`
	LastSeq    uint64          `msgpack:"last_seq"`
	Events     uint64          `msgpack:"events"`
	Checkpoint *checkpointWire `msgpack:"checkpoint"`
	Skipped    uint64          `msgpack:"skipped"`
}

type intentWire struct {
	Enabled   *bool    `msgpack:"enabled"`
	WebSearch *bool    `msgpack:"web_search"`
	Preset    string   `msgpack:"preset"`
	Disabled  []string `msgpack:"disabled"`
	Picked    []string `msgpack:"picked"`
}

type checkpointWire struct {
	Loaded          []string        `msgpack:"loaded_deferred_tools"`
	ContractHash    string          `msgpack:"contract_hash"`
	RegistryVersion string          `msgpack:"registry_version"`
	Turn            uint64          `msgpack:"turn"`
	Seq             uint64          `msgpack:"seq"`
	Contract        []contractEntry `msgpack:"contract"`
}

type contractEntry struct {
	Name string `msgpack:"name"`
	Hash string `msgpack:"hash"`
}

// MarshalState encodes s for a projection's KV value or a snapshot: one
// msgpack map with string keys and the schema version under "v". The bytes
// are a pure function of s, and UnmarshalState(MarshalState(s)) equals s,
// including nil versus empty lists and unset tri-states.
func MarshalState(s State) ([]byte, error) {
	w := stateWire{
		V:       StateVersion,
		Session: s.Session,
		Intent: intentWire{
			Enabled:   s.Intent.Enabled,
			WebSearch: s.Intent.WebSearch,
			Preset:    s.Intent.Preset,
			Disabled:  s.Intent.Disabled,
			Picked:    s.Intent.Picked,
		},
		Loaded:  s.Loaded,
		Turn:    s.Turn,
		InTurn:  s.InTurn,
		LastSeq: s.LastSeq,
		Events:  s.Events,
		Skipped: s.Skipped,
	}
	if c := s.Checkpoint; c != nil {
		w.Checkpoint = &checkpointWire{
			Loaded:          c.Loaded,
			ContractHash:    c.ContractHash,
			RegistryVersion: c.RegistryVersion,
			Turn:            c.Turn,
			Seq:             c.Seq,
		}
		if c.Contract != nil {
			w.Checkpoint.Contract = make([]contractEntry, len(c.Contract))
			for i, e := range c.Contract {
				w.Checkpoint.Contract[i] = contractEntry(e)
			}
		}
	}
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(&w); err != nil {
		return nil, fmt.Errorf("marshal state of session %q: %w", s.Session, err)
	}
	return buf.Bytes(), nil
}

// UnmarshalState decodes bytes written by MarshalState. Unknown keys are
// ignored. It never panics; errors match ErrMalformedState or
// ErrStateVersion (in which case the caller rebuilds from the log).
func UnmarshalState(b []byte) (State, error) {
	if len(b) > MaxStateBytes {
		return State{}, fmt.Errorf("unmarshal state: %d bytes, at most %d allowed: %w", len(b), MaxStateBytes, ErrMalformedState)
	}
	var w stateWire
	w.V = -1
	r := bytes.NewReader(b)
	dec := msgpack.NewDecoder(r)
	if err := dec.Decode(&w); err != nil {
		return State{}, fmt.Errorf("unmarshal state: %v: %w", err, ErrMalformedState)
	}
	if r.Len() != 0 {
		return State{}, fmt.Errorf("unmarshal state: %d trailing bytes: %w", r.Len(), ErrMalformedState)
	}
	switch {
	case w.V == -1:
		return State{}, fmt.Errorf("unmarshal state: key \"v\" is missing: %w", ErrMalformedState)
	case w.V < 1 || w.V > StateVersion:
		return State{}, fmt.Errorf("unmarshal state: version %d, this engine reads 1 to %d, rebuild from the log: %w", w.V, StateVersion, ErrStateVersion)
	}
	s := State{
		Session: w.Session,
		Intent: resolver.Intent{
			Enabled:   w.Intent.Enabled,
			WebSearch: w.Intent.WebSearch,
			Preset:    w.Intent.Preset,
			Disabled:  w.Intent.Disabled,
			Picked:    w.Intent.Picked,
		},
		Loaded:  w.Loaded,
		Turn:    w.Turn,
		InTurn:  w.InTurn,
		LastSeq: w.LastSeq,
		Events:  w.Events,
		Skipped: w.Skipped,
	}
	if c := w.Checkpoint; c != nil {
		s.Checkpoint = &Checkpoint{
			Loaded:          c.Loaded,
			ContractHash:    c.ContractHash,
			RegistryVersion: c.RegistryVersion,
			Turn:            c.Turn,
			Seq:             c.Seq,
		}
		if c.Contract != nil {
			s.Checkpoint.Contract = make([]events.ContractEntry, len(c.Contract))
			for i, e := range c.Contract {
				s.Checkpoint.Contract[i] = events.ContractEntry(e)
			}
		}
	}
	return s, nil
}
