// Package aggregate folds a session's events into its current state: the
// stored intent, the loaded deferred set, the turn, the last checkpoint
// and the last applied sequence. It also validates commands against
// that state and the live registry before they are appended (Decide).
//
// Folding is deterministic: the same events in the same order yield the same
// State, byte for byte once marshalled, and folding a prefix, snapshotting it
// with MarshalState and folding the rest yields the same State as folding
// everything. Apply never panics; events it cannot use are counted as
// skipped. A State is a value; its methods are not safe for concurrent
// mutation, and Clone gives an independent copy for caching.
//
// Every fold applies the same rules to every event, whoever wrote it:
// an event that breaks one (see Check) is kept in the log, not applied,
// counted in Rejected and listed in Rejections, on every engine and every
// replay alike.
package aggregate

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/resolver"
)

// Verdicts of ApplyStored and Apply for an event they did not apply.
var (
	// ErrSkipped: the event could not be used at all (undecodable, of an
	// unknown type, naming another session).
	ErrSkipped = errors.New("event skipped")
	// ErrRejected: the event was decoded but breaks a fold rule.
	ErrRejected = errors.New("event rejected")
)

// MaxRejections bounds State.Rejections: the last events not applied.
const MaxRejections = 8

// MaxReasonLen bounds Rejection.Reason, in bytes.
const MaxReasonLen = 256

// Kinds of Rejection.
const (
	KindSkipped  = "skipped"
	KindRejected = "rejected"
)

// Rejection is one event the fold kept in the log but did not apply.
type Rejection struct {
	// Seq is the event's stream sequence.
	Seq uint64
	// ID and Type are the event's id and type as read ("" when
	// unreadable), at most 64 bytes.
	ID   string
	Type string
	// Kind is KindSkipped or KindRejected.
	Kind string
	// Reason says which rule the event broke, or why it could not be
	// decoded; at most MaxReasonLen bytes.
	Reason string
}

// State is one session folded from its events.
type State struct {
	// Session is the session id; set by Fold, or by the first applied
	// event when empty.
	Session string
	// Intent is the session's stored intent. Intent.Disabled is
	// sorted and de-duplicated, nil when empty; Intent.Picked is nil when
	// unset and keeps the user's order.
	Intent intent.Intent
	// Loaded is the set of deferred tools loaded in this session, sorted,
	// de-duplicated, nil when empty.
	Loaded []string
	// LoadOrder holds the names of Loaded in the order the log loaded
	// them: a DeferredLoaded appends the names it newly
	// loads; a CheckpointRecorded keeps the order of the names it keeps
	// and appends the ones it adds in the order it lists them. Nil when
	// Loaded is empty. The next turn renders its loaded tools in this
	// order, so that it begins with the tools array the previous turn's
	// last request ended with. Use InLoadOrder.
	LoadOrder []string
	// Referenced are the deferred tools the session's history references
	//: every tool a DeferredLoaded loaded, sorted, kept when
	// a checkpoint or an eviction unloads it, since the conversation still
	// holds its tool_reference; at most events.MaxListLen (later names are
	// not kept). A native rendering keeps defining them. Nil when none.
	Referenced []string
	// Turn is the number of the last started turn, 0 before the first.
	Turn uint64
	// InTurn reports whether turn Turn has started and not ended.
	InTurn bool
	// TurnSeq is the stream sequence of the TurnStarted of turn Turn, 0
	// before the first turn (and in views folded before it was kept): an
	// engine rebuilds the frozen turn from that event.
	TurnSeq uint64
	// LastSeq is the stream sequence of the last applied or skipped event.
	LastSeq uint64
	// Events counts applied events.
	Events uint64
	// Checkpoint is the last recorded checkpoint, nil if none.
	Checkpoint *Checkpoint
	// Skipped counts events that could not be applied (undecodable, of an
	// unknown type, or naming another session).
	Skipped uint64
	// Rejected counts events kept in the log but not applied because they
	// break a fold rule.
	Rejected uint64
	// Rejections are the last MaxRejections events skipped or rejected,
	// oldest first; nil when none.
	Rejections []Rejection
	// DeletedSeq is the stream sequence of the SessionDeleted that closed
	// the session, 0 while it is open. The delete cleared every
	// other field but Session, LastSeq and the counters (Events, Skipped,
	// Rejected); every later event is rejected by the fold.
	DeletedSeq uint64
}

// Deleted reports whether a SessionDeleted closed the session.
func (s State) Deleted() bool { return s.DeletedSeq != 0 }

// Record is a checkpoint record: the CheckpointRecorded event payload, the
// one checkpoint record type of the core (checkpoint.Record is it too).
type Record = events.CheckpointRecorded

// Checkpoint is the last checkpoint of a session, recorded by a
// CheckpointRecorded event or a TurnEnded that carries one: its
// payload as recorded (a nil Loaded is the empty set; Contract optionally
// lists every tool of the contract with its hash) and its stream sequence.
type Checkpoint struct {
	Record
	// Seq is the stream sequence of the event that recorded it (the
	// CheckpointRecorded, or the TurnEnded).
	Seq uint64
}

// Stored is one event as read from the log: its sequence, its Nats-Msg-Id
// header, and either the decoded envelope or the decode error.
type Stored struct {
	// Seq is the stream sequence.
	Seq uint64
	// MsgID is the message's Nats-Msg-Id header, "" when it has none.
	MsgID string
	// Envelope is the decoded event; ignored when Err is set.
	Envelope events.Envelope
	// Err is the decode error, if any; the event is then skipped.
	Err error
	// Registry is the registry in force when the event was stored (the
	// registry history's last version recorded at or before the event's
	// stream timestamp, see projection.Registries), for the rules that need
	// one (see Check); nil when no version was recorded by then, and those
	// rules are then not checked. Set it only for events NeedsRegistry
	// names; it is ignored for the others.
	Registry *resolver.Registry
}

// StoredRecord is the log's record r as the fold takes it, without a
// registry (set Registry for the events NeedsRegistry names).
func StoredRecord(r logport.Record) Stored {
	return Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}
}

// NeedsRegistry reports whether the fold's verdict on e depends on the
// registry in force when it was stored (Stored.Registry): a ToolsPicked
// that sets a list, or a DeferredLoaded.
func NeedsRegistry(e events.Envelope) bool {
	p, _ := events.PayloadValue(e.Payload)
	switch v := p.(type) {
	case events.ToolsPicked:
		return len(v.Names) > 0
	case events.DeferredLoaded:
		return len(v.Names) > 0
	}
	return false
}

// Fold folds evs, in order, into a fresh State for session (see
// ApplyStored).
func Fold(session string, evs []Stored) State {
	s := State{Session: session}
	for _, ev := range evs {
		s.ApplyStored(ev) //nolint:errcheck // the verdict is recorded in s
	}
	return s
}

// ApplyStored folds one event as read from the log. It returns nil when
// the event was applied, or was at or below LastSeq (a redelivery, ignored,
// so folding is idempotent). Otherwise the event is not applied: it is
// counted (Skipped or Rejected), listed in Rejections, LastSeq advances so
// later events keep applying, and the error, matching ErrSkipped (a
// decode error, another session) or ErrRejected (see Check), is the
// recorded reason. ApplyStored is deterministic and never panics.
//
// Fold rules for applied events: an event that changes the stored intent
// applies to Intent as events.FoldIntent says; DeferredLoaded adds to
// Loaded (and appends to LoadOrder); DeferredEvicted removes its loaded
// names from both; TurnStarted sets Turn, InTurn and TurnSeq; TurnEnded clears InTurn;
// CheckpointRecorded sets Checkpoint and replaces Loaded by the
// checkpoint's set (LoadOrder keeps the order of the names it keeps); a
// TurnEnded with a checkpoint clears InTurn, then applies its
// checkpoint as that CheckpointRecorded would, with Checkpoint.Seq the
// TurnEnded's sequence;
// SessionDeleted clears the state down to its counters and sets
// DeletedSeq, after which every event is rejected; SessionCompacted
// replaces the state by the one it carries (see compactedState).
func (s *State) ApplyStored(ev Stored) error {
	if ev.Seq <= s.LastSeq {
		return nil
	}
	if ev.Err != nil {
		id, typ := ev.Envelope.ID, string(ev.Envelope.Type)
		var de *events.DecodeError
		if errors.As(ev.Err, &de) {
			id, typ = de.ID, string(de.Type)
		}
		return s.refuse(ev.Seq, id, typ, KindSkipped, fmt.Errorf("%w: %w", ErrSkipped, ev.Err))
	}
	return s.apply(ev.Seq, ev.Envelope, ev.MsgID, ev.Registry)
}

// Apply folds the event e, which this process wrote and stored at seq:
// ApplyStored of e stored with Nats-Msg-Id equal to its id. The rules that
// need the registry are not checked: this process decided e against its
// live registry (Decide).
func (s *State) Apply(seq uint64, e events.Envelope) error {
	if seq <= s.LastSeq {
		return nil
	}
	return s.apply(seq, e, e.ID, nil)
}

func (s *State) apply(seq uint64, e events.Envelope, msgID string, reg *resolver.Registry) error {
	if s.Session != "" && e.Session != s.Session {
		return s.refuse(seq, e.ID, string(e.Type), KindSkipped, fmt.Errorf("%w: event %s names session %q, not %q", ErrSkipped, e.ID, e.Session, s.Session))
	}
	p, ok := events.PayloadValue(e.Payload)
	if !ok {
		return s.refuse(seq, e.ID, string(e.Type), KindSkipped, fmt.Errorf("%w: event %s has no payload of a known type", ErrSkipped, e.ID))
	}
	if err := s.check(e, p, msgID, reg); err != nil {
		return s.refuse(seq, e.ID, string(e.Type), KindRejected, err)
	}
	switch v := p.(type) {
	case events.DeferredLoaded:
		for _, n := range v.Names {
			if _, found := slices.BinarySearch(s.Loaded, n); !found {
				s.Loaded = intent.InsertSorted(s.Loaded, n)
				s.LoadOrder = append(slices.Clip(s.LoadOrder), n)
			}
			if _, found := slices.BinarySearch(s.Referenced, n); !found && len(s.Referenced) < events.MaxListLen {
				s.Referenced = intent.InsertSorted(s.Referenced, n)
			}
		}
	case events.DeferredEvicted:
		for _, n := range v.Names {
			if _, found := slices.BinarySearch(s.Loaded, n); found {
				s.Loaded = intent.RemoveSorted(s.Loaded, n)
				if i := slices.Index(s.LoadOrder, n); i >= 0 {
					s.LoadOrder = slices.Delete(slices.Clone(s.LoadOrder), i, i+1)
				}
			}
		}
		if len(s.Loaded) == 0 {
			s.Loaded, s.LoadOrder = nil, nil
		}
	case events.TurnStarted:
		s.Turn = v.Turn
		s.InTurn = true
		s.TurnSeq = seq
	case events.TurnEnded:
		s.InTurn = false
		if v.Checkpoint != nil {
			s.checkpointAt(seq, *v.Checkpoint) // As a CheckpointRecorded right after it
		}
	case events.SessionDeleted:
		// The session keeps only what says it is closed: no intent,
		// tools, turn or checkpoint stays in its view or any cache.
		*s = State{Session: s.Session, Events: s.Events, Skipped: s.Skipped, Rejected: s.Rejected, DeletedSeq: seq}
	case events.CheckpointRecorded:
		s.checkpointAt(seq, v)
	case events.SessionCompacted:
		if v.LastSeq >= seq {
			return s.refuse(seq, e.ID, string(e.Type), KindRejected, fmt.Errorf("%w: SessionCompacted at sequence %d claims to replace events up to %d, after itself: %w", ErrRejected, seq, v.LastSeq, events.ErrBrokenRule))
		}
		*s = compactedState(s.Session, v)
	default:
		events.FoldIntent(p, &s.Intent)
	}
	if s.Session == "" {
		s.Session = e.Session
	}
	s.LastSeq = seq
	s.Events++
	return nil
}

// checkpointAt applies the checkpoint v recorded by the event at seq: a
// CheckpointRecorded, or a TurnEnded's checkpoint.
func (s *State) checkpointAt(seq uint64, v events.CheckpointRecorded) {
	s.Checkpoint = &Checkpoint{Record: v.Clone(), Seq: seq}
	s.LoadOrder = reorder(s.LoadOrder, v.Loaded)
	s.Loaded = sortedSet(v.Loaded)
}

// Check reports whether the event e, stored with Nats-Msg-Id msgID ("" when
// the message has none), may be applied to s: nil, or an error matching
// ErrRejected (and events.ErrBrokenRule) that names the rule. It
// depends on nothing but s, e and msgID, so every engine and every replay
// gives the same verdict. The rules are events.CheckStored's (the id
// header, the picked-list bound, a valid checkpoint contract) and these,
// which depend on the session:
//
//   - TurnStarted starts turn Turn+1, the next one;
//   - TurnEnded ends the open turn, Turn; its checkpoint, if any, follows
//     the rules of a CheckpointRecorded, and a checkpoint that
//     breaks one rejects the whole TurnEnded;
//   - DeferredLoaded loads inside the open turn, Turn, and the loaded set
//     stays within events.MaxListLen;
//   - DeferredEvicted evicts between turns, after turn Turn ended;
//   - ToolDisabled keeps the disabled set within events.MaxListLen;
//   - CheckpointRecorded is taken at a turn already started (turn <= Turn);
//   - PermissionGranted answers in a turn already started (turn <= Turn),
//     and a "once" answer in the open turn;
//   - no event follows a SessionDeleted: a deleted session takes no
//     event, from any publisher;
//   - a SessionCompacted covers every event the fold has seen (its
//     last_seq is at least LastSeq) and, when it covers exactly them, no
//     turn is open; see compactedRule.
//
// CheckAt adds the rules that need the registry in force when the event
// was stored, the API's rules (Decide) applied to every event whoever
// published it.
func (s *State) Check(e events.Envelope, msgID string) error {
	return s.CheckAt(e, msgID, nil)
}

// CheckAt is Check plus, when reg (the registry in force when e was
// stored, see Stored.Registry) is not nil, the rules that need it:
//
//   - ToolsPicked does not equal, as a set (with or without web_search),
//     the defaults or a whole preset of reg: that is an expanded tool list,
//     the frozen list of the design's §1.3;
//   - DeferredLoaded names only tools of reg that are deferred, not
//     resident (a loaded tool is one tool_search can load).
//
// The verdict depends on nothing but s, e, msgID and reg, and reg on the
// log and the registry history, so every engine and every replay gives
// the same one.
func (s *State) CheckAt(e events.Envelope, msgID string, reg *resolver.Registry) error {
	p, ok := events.PayloadValue(e.Payload)
	if !ok {
		return fmt.Errorf("%w: event %s has no payload of a known type: %w", ErrRejected, e.ID, events.ErrBrokenRule)
	}
	return s.check(e, p, msgID, reg)
}

func (s *State) check(e events.Envelope, p events.Payload, msgID string, reg *resolver.Registry) error {
	if err := events.CheckStored(e, msgID); err != nil {
		return fmt.Errorf("%w: %w", ErrRejected, err)
	}
	if s.DeletedSeq != 0 {
		return fmt.Errorf("%w: session %q was deleted at sequence %d, no event follows a SessionDeleted: %w", ErrRejected, s.Session, s.DeletedSeq, events.ErrBrokenRule)
	}
	var why string
	switch v := p.(type) {
	case events.PermissionGranted:
		why = grantRule(s, v)
	case events.TurnStarted:
		if s.Turn == math.MaxUint64 || v.Turn != s.Turn+1 {
			why = fmt.Sprintf("TurnStarted turn %d, want the next turn %d", v.Turn, s.Turn+1)
		}
	case events.TurnEnded:
		switch {
		case !s.InTurn:
			why = fmt.Sprintf("TurnEnded turn %d, but no turn is open (the last turn, %d, has ended)", v.Turn, s.Turn)
		case v.Turn != s.Turn:
			why = fmt.Sprintf("TurnEnded turn %d, want the open turn %d", v.Turn, s.Turn)
		case v.Checkpoint != nil && v.Checkpoint.Turn > s.Turn:
			// The rule of a CheckpointRecorded right after it.
			why = fmt.Sprintf("TurnEnded checkpoint at turn %d, after the last started turn %d", v.Checkpoint.Turn, s.Turn)
		}
	case events.DeferredLoaded:
		switch {
		case !s.InTurn:
			why = fmt.Sprintf("DeferredLoaded outside a turn (turn %d has ended); tool_search loads inside an open turn", v.Turn)
		case v.Turn != s.Turn:
			why = fmt.Sprintf("DeferredLoaded turn %d, want the open turn %d", v.Turn, s.Turn)
		default:
			n := len(s.Loaded)
			for i, name := range v.Names {
				if _, found := slices.BinarySearch(s.Loaded, name); !found && !slices.Contains(v.Names[:i], name) {
					n++
				}
			}
			if n > events.MaxListLen {
				why = fmt.Sprintf("DeferredLoaded would load %d tools, at most %d", n, events.MaxListLen)
			}
		}
	case events.DeferredEvicted:
		switch {
		case s.InTurn:
			why = fmt.Sprintf("DeferredEvicted inside turn %d; eviction happens between turns (the turn's array is frozen)", s.Turn)
		case v.Turn != s.Turn:
			why = fmt.Sprintf("DeferredEvicted after turn %d, want the last turn %d", v.Turn, s.Turn)
		}
	case events.ToolDisabled:
		if _, found := slices.BinarySearch(s.Intent.Disabled, v.Name); !found && len(s.Intent.Disabled) >= events.MaxListLen {
			why = fmt.Sprintf("ToolDisabled %q would disable %d tools, at most %d", v.Name, len(s.Intent.Disabled)+1, events.MaxListLen)
		}
	case events.CheckpointRecorded:
		if v.Turn > s.Turn {
			why = fmt.Sprintf("CheckpointRecorded at turn %d, after the last started turn %d", v.Turn, s.Turn)
		}
	case events.SessionCompacted:
		why = compactedRule(s, v)
	}
	if why == "" && reg != nil {
		why = registryRule(p, reg)
	}
	if why != "" {
		return fmt.Errorf("%w: %s: %w", ErrRejected, why, events.ErrBrokenRule)
	}
	return nil
}

// registryRule returns why p breaks a rule that needs reg, the registry in
// force when it was stored, or "".
func registryRule(p events.Payload, reg *resolver.Registry) string {
	switch v := p.(type) {
	case events.ToolsPicked:
		if len(v.Names) == 0 {
			return ""
		}
		picked := make(map[string]bool, len(v.Names))
		for _, n := range v.Names {
			picked[n] = true
		}
		preset, ok := materializes(reg, picked)
		switch {
		case !ok:
			return ""
		case preset == "":
			return fmt.Sprintf("ToolsPicked equals the defaults of registry %s (in force when it was stored), an expanded tool list (docs/semantics.md#picked-lists); store ToolsToggled{enabled:true}%s instead", reg.Version(), webSearchHint(picked))
		default:
			return fmt.Sprintf("ToolsPicked equals the whole preset %q of registry %s (in force when it was stored), an expanded tool list (docs/semantics.md#picked-lists); store PresetChosen{preset:%q}%s instead", preset, reg.Version(), preset, webSearchHint(picked))
		}
	case events.DeferredLoaded:
		for _, n := range v.Names {
			if why, ok := deferredIn(reg, n); !ok {
				return "DeferredLoaded: " + why + " (in force when it was stored); tool_search loads only deferred tools of the registry"
			}
		}
	}
	return ""
}

// refuse records that the event at seq was not applied: it counts it,
// lists it in Rejections and advances LastSeq, so later events keep
// applying. It returns err.
func (s *State) refuse(seq uint64, id, typ, kind string, err error) error {
	s.LastSeq = seq
	if kind == KindRejected {
		s.Rejected++
	} else {
		s.Skipped++
	}
	r := Rejection{Seq: seq, ID: clip.Text(id, 64), Type: clip.Text(typ, 64), Kind: kind, Reason: clip.Text(err.Error(), MaxReasonLen)}
	if len(s.Rejections) >= MaxRejections {
		// Copy-on-write, like every slice of a State.
		s.Rejections = append(slices.Clone(s.Rejections[len(s.Rejections)-MaxRejections+1:]), r)
	} else {
		s.Rejections = append(slices.Clip(s.Rejections), r)
	}
	return err
}

// Clone returns a deep copy of s: no slice, pointer or checkpoint is shared,
// and nil stays nil.
func (s State) Clone() State {
	c := s
	c.Intent = s.Intent.Clone()
	c.Loaded = slices.Clone(s.Loaded)
	c.LoadOrder = slices.Clone(s.LoadOrder)
	c.Referenced = slices.Clone(s.Referenced)
	if s.Checkpoint != nil {
		c.Checkpoint = &Checkpoint{Record: s.Checkpoint.Clone(), Seq: s.Checkpoint.Seq}
	}
	c.Rejections = slices.Clone(s.Rejections)
	return c
}

// InLoadOrder returns the loaded deferred tools in the order the log
// loaded them (LoadOrder), or Loaded when a State built by hand has no
// LoadOrder for it. The slice is shared: treat it as read-only.
func (s State) InLoadOrder() []string {
	if len(s.LoadOrder) == len(s.Loaded) {
		return s.LoadOrder
	}
	return s.Loaded
}

// reorder is the load order after a checkpoint that sets the loaded set
// to next: the names of order that next keeps, in order, then the names
// next adds, in next's order, each once; nil when next is empty.
func reorder(order, next []string) []string {
	if len(next) == 0 {
		return nil
	}
	keep := make(map[string]bool, len(next))
	for _, n := range next {
		keep[n] = true
	}
	out := make([]string, 0, len(keep))
	for _, n := range order {
		if keep[n] {
			out = append(out, n)
			delete(keep, n)
		}
	}
	for _, n := range next {
		if keep[n] {
			out = append(out, n)
			delete(keep, n)
		}
	}
	return out
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
