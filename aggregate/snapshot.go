package aggregate

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
)

// StateVersion is the schema version MarshalState writes under key "v"
// (snapshots carry a schema version). UnmarshalState reads
// MinStateVersion to StateVersion.
const StateVersion = 6

// MinStateVersion is the oldest view UnmarshalState reads. Version 1 views
// were folded before the fold rules, version 2 views before the
// rules that need the registry in force (State.CheckAt): they
// may hold events a fold now rejects, so they are refused with
// ErrStateVersion and rebuilt from the log, like a view this build cannot
// read. Version 3 views lack the load order (State.LoadOrder),
// which only a fold of the log recovers, so they are rebuilt too; version
// 4 views lack the referenced tools (State.Referenced).
// Version 5 views lack deleted_seq and read as an open session:
// a build that wrote them did not know SessionDeleted, and such a view
// folded before any session was deleted.
const MinStateVersion = 5

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

// Wire form of a State: a msgpack map with string keys, in this order (the
// encoding order, so MarshalState is deterministic):
//
//	v, session, intent{enabled, web_search, preset, disabled, picked},
//	loaded, turn, in_turn, last_seq, events,
//	checkpoint{loaded_deferred_tools, contract_hash, registry_version,
//	           turn, seq, contract[{name, hash}]} or nil,
//	skipped, rejected, rejections[{seq, id, type, kind, reason}] or nil,
//	turn_seq (absent in views written before it: 0),
//	load_order (version 4 on), referenced (version 5 on),
//	deleted_seq (version 6 on)
//
// Integers are written in their shortest form, nil slices and pointers as
// nil, empty slices as empty arrays. This is byte for byte what
// vmihailenco/msgpack's reflection encoder wrote for the former wire
// structs (with UseCompactInts), and UnmarshalState accepts exactly what
// its reflection decoder accepted for them (see snapshot_fast_test.go).

type stateEncoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encoderPool = sync.Pool{New: func() any {
	e := new(stateEncoder)
	e.enc = msgpack.NewEncoder(&e.buf)
	e.enc.UseCompactInts(true)
	return e
}}

// MarshalState encodes s for a projection's KV value or a snapshot: one
// msgpack map with string keys and the schema version under "v". The bytes
// are a pure function of s, and UnmarshalState(MarshalState(s)) equals s,
// including nil versus empty lists and unset tri-states.
func MarshalState(s State) ([]byte, error) {
	e := encoderPool.Get().(*stateEncoder)
	e.buf.Reset()
	if err := encodeState(e.enc, &s); err != nil {
		encoderPool.Put(e)
		return nil, fmt.Errorf("marshal state of session %q: %w", s.Session, err)
	}
	out := make([]byte, e.buf.Len())
	copy(out, e.buf.Bytes())
	if e.buf.Cap() <= 64<<10 {
		encoderPool.Put(e)
	}
	return out, nil
}

func encodeState(enc *msgpack.Encoder, s *State) error {
	// Writes to a bytes.Buffer cannot fail; errors are still propagated.
	err := enc.EncodeMapLen(16)
	err = errors.Join(err,
		enc.EncodeString("v"), enc.EncodeUint(StateVersion),
		enc.EncodeString("session"), enc.EncodeString(s.Session),
		enc.EncodeString("intent"), encodeIntent(enc, &s.Intent),
		enc.EncodeString("loaded"), encodeStrings(enc, s.Loaded),
		enc.EncodeString("turn"), enc.EncodeUint(s.Turn),
		enc.EncodeString("in_turn"), enc.EncodeBool(s.InTurn),
		enc.EncodeString("last_seq"), enc.EncodeUint(s.LastSeq),
		enc.EncodeString("events"), enc.EncodeUint(s.Events),
		enc.EncodeString("checkpoint"), encodeCheckpoint(enc, s.Checkpoint),
		enc.EncodeString("skipped"), enc.EncodeUint(s.Skipped),
		enc.EncodeString("rejected"), enc.EncodeUint(s.Rejected),
		enc.EncodeString("rejections"), encodeRejections(enc, s.Rejections),
		enc.EncodeString("turn_seq"), enc.EncodeUint(s.TurnSeq),
		enc.EncodeString("load_order"), encodeStrings(enc, s.LoadOrder),
		enc.EncodeString("referenced"), encodeStrings(enc, s.Referenced),
		enc.EncodeString("deleted_seq"), enc.EncodeUint(s.DeletedSeq),
	)
	return err
}

// encodeIntent writes in as a map of every field of intent.Intent.Field.
func encodeIntent(enc *msgpack.Encoder, in *intent.Intent) error {
	err := enc.EncodeMapLen(intent.NumFields)
	for i := range intent.NumFields {
		key, p := in.Field(i)
		err = errors.Join(err, enc.EncodeString(key))
		switch p := p.(type) {
		case **bool:
			err = errors.Join(err, encodeTri(enc, *p))
		case *string:
			err = errors.Join(err, enc.EncodeString(*p))
		case *[]string:
			err = errors.Join(err, encodeStrings(enc, *p))
		}
	}
	return err
}

func encodeRejections(enc *msgpack.Encoder, rs []Rejection) error {
	return encodeList(enc, rs, func(r Rejection) error {
		return errors.Join(enc.EncodeMapLen(5),
			enc.EncodeString("seq"), enc.EncodeUint(r.Seq),
			enc.EncodeString("id"), enc.EncodeString(r.ID),
			enc.EncodeString("type"), enc.EncodeString(r.Type),
			enc.EncodeString("kind"), enc.EncodeString(r.Kind),
			enc.EncodeString("reason"), enc.EncodeString(r.Reason),
		)
	})
}

// encodeList writes list as an array of elements written by elem; nil as
// nil.
func encodeList[E any](enc *msgpack.Encoder, list []E, elem func(E) error) error {
	if list == nil {
		return enc.EncodeNil()
	}
	if err := enc.EncodeArrayLen(len(list)); err != nil {
		return err
	}
	for _, x := range list {
		if err := elem(x); err != nil {
			return err
		}
	}
	return nil
}

func encodeTri(enc *msgpack.Encoder, b *bool) error {
	if b == nil {
		return enc.EncodeNil()
	}
	return enc.EncodeBool(*b)
}

func encodeStrings(enc *msgpack.Encoder, ss []string) error {
	return encodeList(enc, ss, enc.EncodeString)
}

func encodeCheckpoint(enc *msgpack.Encoder, c *Checkpoint) error {
	if c == nil {
		return enc.EncodeNil()
	}
	err := errors.Join(enc.EncodeMapLen(6),
		enc.EncodeString("loaded_deferred_tools"), encodeStrings(enc, c.Loaded),
		enc.EncodeString("contract_hash"), enc.EncodeString(c.ContractHash),
		enc.EncodeString("registry_version"), enc.EncodeString(c.RegistryVersion),
		enc.EncodeString("turn"), enc.EncodeUint(c.Turn),
		enc.EncodeString("seq"), enc.EncodeUint(c.Seq),
		enc.EncodeString("contract"),
	)
	if err != nil {
		return err
	}
	return encodeList(enc, c.Contract, func(e events.ContractEntry) error {
		return errors.Join(enc.EncodeMapLen(2),
			enc.EncodeString("name"), enc.EncodeString(e.Name),
			enc.EncodeString("hash"), enc.EncodeString(e.Hash),
		)
	})
}

// UnmarshalState decodes bytes written by MarshalState. Unknown keys are
// ignored. It never panics; errors match ErrMalformedState or
// ErrStateVersion (in which case the caller rebuilds from the log).
func UnmarshalState(b []byte) (State, error) {
	if len(b) > MaxStateBytes {
		return State{}, fmt.Errorf("unmarshal state: %d bytes, at most %d allowed: %w", len(b), MaxStateBytes, ErrMalformedState)
	}
	d := stateDecoder{b: b, s: string(b)}
	var s State
	v := int64(-1)
	if err := d.state(&s, &v); err != nil {
		return State{}, fmt.Errorf("unmarshal state: %v: %w", err, ErrMalformedState)
	}
	if rest := len(b) - d.off; rest != 0 {
		return State{}, fmt.Errorf("unmarshal state: %d trailing bytes: %w", rest, ErrMalformedState)
	}
	switch {
	case v == -1:
		return State{}, fmt.Errorf("unmarshal state: key \"v\" is missing: %w", ErrMalformedState)
	case v < MinStateVersion || v > StateVersion:
		return State{}, fmt.Errorf("unmarshal state: version %d, this engine reads %d to %d, rebuild from the log: %w", v, MinStateVersion, StateVersion, ErrStateVersion)
	}
	return s, nil
}

func (d *stateDecoder) state(s *State, v *int64) error {
	return d.structure(16, func() { *s, *v = State{}, 0 }, func(name string, i int) (bool, error) {
		return d.stateField(s, v, name, i)
	})
}

func (d *stateDecoder) stateField(s *State, v *int64, name string, i int) (bool, error) {
	switch {
	case name == "v" || i == 0:
		n, err := d.integer("int64")
		if err == nil {
			*v = int64(n)
		}
		return true, err
	case name == "session" || i == 1:
		return true, d.string(&s.Session)
	case name == "intent" || i == 2:
		return true, d.intent(&s.Intent)
	case name == "loaded" || i == 3:
		return true, d.strings(&s.Loaded)
	case name == "turn" || i == 4:
		return true, d.uint(&s.Turn)
	case name == "in_turn" || i == 5:
		return true, d.bool(&s.InTurn)
	case name == "last_seq" || i == 6:
		return true, d.uint(&s.LastSeq)
	case name == "events" || i == 7:
		return true, d.uint(&s.Events)
	case name == "checkpoint" || i == 8:
		if d.peekNil() {
			s.Checkpoint = nil
			return true, nil
		}
		if s.Checkpoint == nil {
			s.Checkpoint = new(Checkpoint)
		}
		return true, d.checkpoint(s.Checkpoint)
	case name == "skipped" || i == 9:
		return true, d.uint(&s.Skipped)
	case name == "rejected" || i == 10:
		return true, d.uint(&s.Rejected)
	case name == "rejections" || i == 11:
		return true, d.rejections(&s.Rejections)
	case name == "turn_seq" || i == 12:
		return true, d.uint(&s.TurnSeq)
	case name == "load_order" || i == 13:
		return true, d.strings(&s.LoadOrder)
	case name == "referenced" || i == 14:
		return true, d.strings(&s.Referenced)
	case name == "deleted_seq" || i == 15:
		return true, d.uint(&s.DeletedSeq)
	}
	return false, nil
}

// rejections decodes like msgpack's generic slice decoder (see slice).
func (d *stateDecoder) rejections(p *[]Rejection) error {
	return slice(d, p, func(r *Rejection) error {
		return d.structure(5, func() { *r = Rejection{} }, func(name string, i int) (bool, error) {
			switch {
			case name == "seq" || i == 0:
				return true, d.uint(&r.Seq)
			case name == "id" || i == 1:
				return true, d.string(&r.ID)
			case name == "type" || i == 2:
				return true, d.string(&r.Type)
			case name == "kind" || i == 3:
				return true, d.string(&r.Kind)
			case name == "reason" || i == 4:
				return true, d.string(&r.Reason)
			}
			return false, nil
		})
	})
}

func (d *stateDecoder) intent(in *intent.Intent) error {
	return d.structure(intent.NumFields, func() { *in = intent.Intent{} }, func(name string, i int) (bool, error) {
		for j := range intent.NumFields {
			key, p := in.Field(j)
			if name != key && i != j {
				continue
			}
			switch p := p.(type) {
			case **bool:
				return true, d.tri(p)
			case *string:
				return true, d.string(p)
			case *[]string:
				return true, d.strings(p)
			}
		}
		return false, nil
	})
}

func (d *stateDecoder) checkpoint(c *Checkpoint) error {
	return d.structure(6, func() { *c = Checkpoint{} }, func(name string, i int) (bool, error) {
		switch {
		case name == "loaded_deferred_tools" || i == 0:
			return true, d.strings(&c.Loaded)
		case name == "contract_hash" || i == 1:
			return true, d.string(&c.ContractHash)
		case name == "registry_version" || i == 2:
			return true, d.string(&c.RegistryVersion)
		case name == "turn" || i == 3:
			return true, d.uint(&c.Turn)
		case name == "seq" || i == 4:
			return true, d.uint(&c.Seq)
		case name == "contract" || i == 5:
			return true, d.contract(&c.Contract)
		}
		return false, nil
	})
}

// contract decodes like msgpack's generic slice decoder (see slice).
func (d *stateDecoder) contract(p *[]events.ContractEntry) error {
	return slice(d, p, d.contractEntry)
}

// slice decodes like msgpack's generic slice decoder: nil sets nil, an
// empty array a non-nil empty slice, and elements are decoded by elem over
// what the backing array already holds.
func slice[E any](d *stateDecoder, p *[]E, elem func(*E) error) error {
	n, err := d.array()
	if err != nil {
		return err
	}
	if n == -1 {
		*p = nil
		return nil
	}
	s := *p
	if n == 0 && s == nil {
		*p = []E{}
		return nil
	}
	if cap(s) >= n {
		s = s[:n]
	} else {
		s = s[:cap(s)]
		s = append(s, make([]E, n-len(s))...)
	}
	*p = s
	for i := range s {
		if err := elem(&s[i]); err != nil {
			return err
		}
	}
	return nil
}

func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// contractEntry is structure specialised for a contract entry (the bulk of
// a typical State).
func (d *stateDecoder) contractEntry(e *events.ContractEntry) error {
	c, err := d.code()
	if err != nil {
		return err
	}
	n, err := d.mapLen(c)
	if err == nil {
		if n == -1 {
			*e = events.ContractEntry{}
			return nil
		}
		for range n {
			name, err := d.key()
			if err != nil {
				return err
			}
			switch name {
			case "name":
				err = d.string(&e.Name)
			case "hash":
				err = d.string(&e.Hash)
			default:
				err = d.skip()
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	n, err2 := d.arrayLen(c)
	if err2 != nil {
		return err
	}
	if n <= 0 {
		*e = events.ContractEntry{}
		return nil
	}
	if n != 2 {
		return errArrayStruct
	}
	if err := d.string(&e.Name); err != nil {
		return err
	}
	return d.string(&e.Hash)
}
