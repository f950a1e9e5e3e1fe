package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
)

// Until bounds a history: events up to and including Seq (0: no bound)
// and stored at or before Time (zero: no bound).
type Until struct {
	Seq  uint64
	Time time.Time
}

func (u Until) stops(r jetstream.Record) bool {
	return (u.Seq != 0 && r.Seq > u.Seq) || (!u.Time.IsZero() && r.Time.After(u.Time))
}

// EventRef names one stored event.
type EventRef struct {
	Seq     uint64    `json:"seq"`
	ID      string    `json:"id"`
	Type    string    `json:"type"`
	Channel string    `json:"channel"`
	Actor   string    `json:"actor"`
	Time    time.Time `json:"time"`
}

// HistoryEntry is one event of a session's timeline, with the state it
// left behind and how the resolved tool set changed (R25).
type HistoryEntry struct {
	EventRef
	// Payload is the decoded event payload (nil when undecodable).
	Payload events.Payload `json:"payload,omitempty"`
	// Error says why the event was not applied: skipped (R26) or rejected
	// (R28); "" when applied.
	Error string `json:"error,omitempty"`
	// Rejected is true when the event was decoded but not applied because
	// it breaks a fold rule (R28); Error names the rule.
	Rejected bool `json:"rejected,omitempty"`
	// Intent is the session's intent after the event.
	Intent resolver.Intent `json:"intent"`
	// Tools is the resolved tool set after the event; Gained and Lost
	// compare it with the set before.
	Tools  []string `json:"tools"`
	Gained []string `json:"gained,omitempty"`
	Lost   []string `json:"lost,omitempty"`
	// Provider and Catalog split Tools for a dispatch at this point.
	Provider []string `json:"provider"`
	Catalog  []string `json:"catalog"`
	// Loaded is the loaded deferred set after the event.
	Loaded []string `json:"loaded"`
	// PrefixHash is the sha256 of the rendered provider array;
	// PrefixChanged says whether it differs from before the event, and
	// Cause why: "intent", "discovery", "checkpoint", "resume" or
	// "registry" (the checkpoint recorded another registry version).
	PrefixHash    string `json:"prefix_hash"`
	PrefixChanged bool   `json:"prefix_changed"`
	Cause         string `json:"cause,omitempty"`
	// Turn and InTurn are the turn state after the event.
	Turn   uint64 `json:"turn"`
	InTurn bool   `json:"in_turn"`
}

// History replays a session's events up to until and returns its timeline:
// at each event the intent it left, the tools it resolved to and what
// changed. Resolutions use the live registry (with req's profile); an entry
// whose checkpoint names another registry version says so.
func (e *Engine) History(ctx context.Context, session string, until Until, req ResolveRequest) ([]HistoryEntry, aggregate.State, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return nil, aggregate.State{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	reg := e.Registry()
	st := aggregate.State{Session: session}
	var out []HistoryEntry
	prevTools, prevPrefix := []string(nil), ""
	if res, err := reg.Resolve(resolver.Request{Override: req.Override, Session: st.Intent, Profile: req.Profile}); err == nil {
		prevTools = names(res.Tools)
		prevPrefix = prefixOf(deferral.SplitTools(res.Tools, nil))
	}
	stop := errors.New("stop")
	err := e.scanSession(ctx, session, until.Seq, func(r jetstream.Record) error {
		if until.stops(r) {
			return stop
		}
		h := HistoryEntry{EventRef: refOf(r)}
		if r.Err == nil {
			h.Payload = r.Envelope.Payload
		}
		if err := st.ApplyStored(storedOf(r)); err != nil {
			h.Error, h.Rejected = err.Error(), errors.Is(err, aggregate.ErrRejected)
		}
		h.Intent, h.Loaded, h.Turn, h.InTurn = st.Intent, st.Loaded, st.Turn, st.InTurn
		res, err := reg.Resolve(resolver.Request{Override: req.Override, Session: st.Intent, Profile: req.Profile})
		if err == nil {
			split := deferral.SplitTools(res.Tools, deferral.NewSet(st.Loaded...).Has)
			h.Tools, h.Provider, h.Catalog = names(res.Tools), names(split.Provider), split.Catalog
			h.PrefixHash = prefixOf(split)
		} else if h.Error == "" {
			h.Error = err.Error()
		}
		h.Gained, h.Lost = diff(prevTools, h.Tools)
		h.PrefixChanged = h.PrefixHash != prevPrefix
		if h.PrefixChanged {
			h.Cause = causeOf(r)
		}
		if cp, ok := h.Payload.(events.CheckpointRecorded); ok && h.Error == "" && cp.RegistryVersion != "" && cp.RegistryVersion != reg.Version() {
			h.Cause = "registry"
		}
		prevTools, prevPrefix = h.Tools, h.PrefixHash
		out = append(out, h)
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return out, st, err
	}
	return out, st, nil
}

// storedOf is r as the fold takes it.
func storedOf(r jetstream.Record) aggregate.Stored {
	return aggregate.Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}
}

func refOf(r jetstream.Record) EventRef {
	return EventRef{Seq: r.Seq, ID: r.Envelope.ID, Type: string(r.Envelope.Type), Channel: r.Envelope.Channel, Actor: r.Envelope.Actor, Time: r.Time}
}

func causeOf(r jetstream.Record) string {
	switch r.Envelope.Payload.(type) {
	case events.DeferredLoaded:
		return "discovery"
	case events.CheckpointRecorded:
		return "checkpoint"
	}
	return "intent"
}

func names(tools []resolver.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func prefixOf(s deferral.Split) string {
	sum := sha256.Sum256(resolver.RenderAnthropic(s.Provider))
	return hex.EncodeToString(sum[:])
}

// diff returns the names in b but not a, and in a but not b, each in the
// order of its own list.
func diff(a, b []string) (gained, lost []string) {
	for _, n := range b {
		if !slices.Contains(a, n) {
			gained = append(gained, n)
		}
	}
	for _, n := range a {
		if !slices.Contains(b, n) {
			lost = append(lost, n)
		}
	}
	return gained, lost
}

// ExplainResult says why a tool is or is not in a session's set.
type ExplainResult struct {
	resolver.Explanation
	// Event is the event that last changed the explanation's outcome or
	// rule: after it the tool was in or out for this rule, and no later
	// event changed that (R25). Nil when no event did: the explanation is
	// the one of a session without events (the profile, the registry or a
	// per-turn override decides).
	Event *EventRef `json:"event,omitempty"`
	// RegistryVersion is the registry the explanation used.
	RegistryVersion string `json:"registry_version"`
	// Seq is the session sequence explained.
	Seq uint64 `json:"seq"`
}

// Explain says why tool is or is not in the session's resolved set at
// until (zero: now), naming the rule (preset, profile, registry rule,
// override) and the event that last changed the outcome or the rule. It
// replays the session's events, explaining the tool after each event that
// changes the intent (see aggregate.Blame); every explanation uses the
// live registry and req's profile and override.
func (e *Engine) Explain(ctx context.Context, session, tool string, until Until, req ResolveRequest) (ExplainResult, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return ExplainResult{}, fmt.Errorf("%w: session %q: %w", ErrInvalid, session, err)
	}
	reg := e.Registry()
	blame := aggregate.NewBlame(reg, session, tool, req.Override, req.Profile)
	var last *EventRef
	stop := errors.New("stop")
	err := e.scanSession(ctx, session, until.Seq, func(r jetstream.Record) error {
		if until.stops(r) {
			return stop
		}
		if blame.Apply(storedOf(r)) {
			ref := refOf(r)
			last = &ref
		}
		return nil
	})
	if err != nil && !errors.Is(err, stop) {
		return ExplainResult{}, err
	}
	st := blame.State()
	return ExplainResult{Explanation: blame.Explanation(), Event: last, RegistryVersion: reg.Version(), Seq: st.LastSeq}, nil
}
