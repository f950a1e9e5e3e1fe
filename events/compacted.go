package events

// SessionCompacted: the snapshot event a compaction appends. It
// carries the session's folded state (what every fold keeps of the events
// before it) and says what it replaced, so that the events it covers can
// be purged from the log: a cold load then reads this one message and the
// tail after it, and folds to the same state as the whole history.

import (
	"fmt"
	"slices"

	"github.com/toolintent/engine/intent"
)

// MaxCompactedRejections bounds SessionCompacted.Rejections (the fold
// keeps the last 8 refused events).
const MaxCompactedRejections = 8

// SessionCompacted replaces the session's events FirstSeq..LastSeq (Count
// messages, written FirstMs..LastMs) by the state they fold to. The
// engine appends it with the expected last subject sequence LastSeq, so it
// covers exactly the events before it, and then purges them; a fold that
// meets it applies the state it carries, whether it folded those events
// or never saw them. It is never appended inside an open turn, nor after
// a SessionDeleted (the fold refuses both).
type SessionCompacted struct {
	// FirstSeq and LastSeq bound the stream sequences it replaces; LastSeq
	// is the session's last event when it was appended.
	FirstSeq uint64 `msgpack:"first_seq" json:"first_seq"`
	LastSeq  uint64 `msgpack:"last_seq" json:"last_seq"`
	// Count is the number of messages replaced (the session's messages in
	// FirstSeq..LastSeq, other sessions' events interleave).
	Count uint64 `msgpack:"count" json:"count"`
	// FirstMs and LastMs are the write times of the first and the last
	// replaced event, unix milliseconds.
	FirstMs int64 `msgpack:"first_time_ms" json:"first_time_ms"`
	LastMs  int64 `msgpack:"last_time_ms" json:"last_time_ms"`
	// Reason optionally says why ("retention: idle since ...").
	Reason string `msgpack:"reason" json:"reason"`

	// Intent is the session's stored intent, as folded.
	Intent intent.Intent `msgpack:"intent" json:"intent"`
	// Loaded are the loaded deferred tools in load order; nil when none.
	Loaded []string `msgpack:"loaded" json:"loaded"`
	// Referenced are the deferred tools the history references.
	Referenced []string `msgpack:"referenced" json:"referenced"`
	// Turn is the last started turn (it has ended); TurnSeq the sequence
	// of its TurnStarted (0 when not kept).
	Turn    uint64 `msgpack:"turn" json:"turn"`
	TurnSeq uint64 `msgpack:"turn_seq" json:"turn_seq"`
	// Checkpoint is the last checkpoint, nil if none, recorded at
	// CheckpointSeq.
	Checkpoint    *CheckpointRecorded `msgpack:"checkpoint" json:"checkpoint,omitempty"`
	CheckpointSeq uint64              `msgpack:"checkpoint_seq" json:"checkpoint_seq"`
	// Events, Skipped and Rejected are the fold's counters of the
	// replaced events: applied, skipped, rejected.
	Events   uint64 `msgpack:"events" json:"events"`
	Skipped  uint64 `msgpack:"skipped" json:"skipped"`
	Rejected uint64 `msgpack:"rejected" json:"rejected"`
	// Rejections are the last events the fold refused, oldest first.
	Rejections []CompactedRejection `msgpack:"rejections" json:"rejections,omitempty"`
	// Grants are the user's answers to asks the replaced events recorded
	//: the session grants, one per tool, and the once grants of
	// turn GrantsTurn; sorted by scope, then tool.
	Grants     []CompactedGrant `msgpack:"grants" json:"grants,omitempty"`
	GrantsTurn uint64           `msgpack:"grants_turn" json:"grants_turn"`
}

// CompactedRejection is one refused event a SessionCompacted keeps.
type CompactedRejection struct {
	Seq    uint64 `msgpack:"seq" json:"seq"`
	ID     string `msgpack:"id" json:"id"`
	Type   string `msgpack:"type" json:"type"`
	Kind   string `msgpack:"kind" json:"kind"`
	Reason string `msgpack:"reason" json:"reason"`
}

// CompactedGrant is one PermissionGranted a SessionCompacted keeps, with
// the channel it was given on (an answer counts only on a channel whose
// policy lets the tool be used).
type CompactedGrant struct {
	Tool    string `msgpack:"tool" json:"tool"`
	Scope   string `msgpack:"scope" json:"scope"`
	By      string `msgpack:"by" json:"by"`
	Channel string `msgpack:"channel" json:"channel"`
	Turn    uint64 `msgpack:"turn" json:"turn"`
	Seq     uint64 `msgpack:"seq" json:"seq"`
}

// EventType implements Payload.
func (SessionCompacted) EventType() Type { return TypeSessionCompacted }

// Clone returns a deep copy of c.
func (c SessionCompacted) Clone() SessionCompacted {
	out := c
	out.Intent = c.Intent.Clone()
	out.Loaded = slices.Clone(c.Loaded)
	out.Referenced = slices.Clone(c.Referenced)
	if c.Checkpoint != nil {
		cp := c.Checkpoint.Clone()
		out.Checkpoint = &cp
	}
	out.Rejections = slices.Clone(c.Rejections)
	out.Grants = slices.Clone(c.Grants)
	return out
}

func encodeCompacted(s *sticky, v SessionCompacted) {
	s.mapLen(19)
	for _, f := range [...]struct {
		k string
		v uint64
	}{{"first_seq", v.FirstSeq}, {"last_seq", v.LastSeq}, {"count", v.Count}, {"turn", v.Turn}, {"turn_seq", v.TurnSeq},
		{"checkpoint_seq", v.CheckpointSeq}, {"events", v.Events}, {"skipped", v.Skipped}, {"rejected", v.Rejected}, {"grants_turn", v.GrantsTurn}} {
		s.str(f.k)
		s.uint(f.v)
	}
	s.str("first_time_ms")
	s.int(v.FirstMs)
	s.str("last_time_ms")
	s.int(v.LastMs)
	s.str("reason")
	s.str(v.Reason)
	s.str("intent")
	in := v.Intent
	encodeTurnIntent(s, &in)
	s.str("loaded")
	s.strs(v.Loaded)
	s.str("referenced")
	s.strs(v.Referenced)
	s.str("checkpoint")
	if v.Checkpoint == nil {
		s.do(s.e.EncodeNil())
	} else {
		encodeCheckpoint(s, *v.Checkpoint)
	}
	s.str("rejections")
	if v.Rejections == nil {
		s.do(s.e.EncodeNil())
	} else {
		s.do(s.e.EncodeArrayLen(len(v.Rejections)))
		for _, r := range v.Rejections {
			s.mapLen(5)
			s.str("seq")
			s.uint(r.Seq)
			s.str("id")
			s.str(r.ID)
			s.str("type")
			s.str(r.Type)
			s.str("kind")
			s.str(r.Kind)
			s.str("reason")
			s.str(r.Reason)
		}
	}
	s.str("grants")
	if v.Grants == nil {
		s.do(s.e.EncodeNil())
	} else {
		s.do(s.e.EncodeArrayLen(len(v.Grants)))
		for _, g := range v.Grants {
			s.mapLen(6)
			s.str("tool")
			s.str(g.Tool)
			s.str("scope")
			s.str(g.Scope)
			s.str("by")
			s.str(g.By)
			s.str("channel")
			s.str(g.Channel)
			s.str("turn")
			s.uint(g.Turn)
			s.str("seq")
			s.uint(g.Seq)
		}
	}
}

func decodeCompacted(m map[string]any) (Payload, error) {
	var p SessionCompacted
	var err error
	for _, f := range [...]struct {
		k string
		v *uint64
	}{{"first_seq", &p.FirstSeq}, {"last_seq", &p.LastSeq}, {"count", &p.Count}, {"turn", &p.Turn}, {"turn_seq", &p.TurnSeq},
		{"checkpoint_seq", &p.CheckpointSeq}, {"events", &p.Events}, {"skipped", &p.Skipped}, {"rejected", &p.Rejected}, {"grants_turn", &p.GrantsTurn}} {
		if *f.v, err = uintField(m, f.k); err != nil {
			return nil, err
		}
	}
	if p.FirstMs, err = intField(m, "first_time_ms", false); err != nil {
		return nil, err
	}
	if p.LastMs, err = intField(m, "last_time_ms", false); err != nil {
		return nil, err
	}
	if p.Reason, err = strField(m, "reason", false); err != nil {
		return nil, err
	}
	in, err := turnIntentField(m, "intent")
	if err != nil {
		return nil, err
	}
	if in != nil {
		p.Intent = *in
	}
	if p.Loaded, err = strsField(m, "loaded", MaxListLen); err != nil {
		return nil, err
	}
	if p.Referenced, err = strsField(m, "referenced", MaxListLen); err != nil {
		return nil, err
	}
	cm, err := mapField(m, "checkpoint")
	if err != nil {
		return nil, err
	}
	if cm != nil {
		c, err := decodeCheckpoint(cm)
		if err != nil {
			return nil, fmt.Errorf("checkpoint: %w", err)
		}
		p.Checkpoint = &c
	}
	rs, err := mapsField(m, "rejections", MaxCompactedRejections)
	if err != nil {
		return nil, err
	}
	if rs != nil {
		p.Rejections = make([]CompactedRejection, len(rs))
		for i, rm := range rs {
			r := &p.Rejections[i]
			if r.Seq, err = uintField(rm, "seq"); err == nil {
				if r.ID, err = strField(rm, "id", false); err == nil {
					if r.Type, err = strField(rm, "type", false); err == nil {
						if r.Kind, err = strField(rm, "kind", true); err == nil {
							r.Reason, err = strField(rm, "reason", false)
						}
					}
				}
			}
			if err != nil {
				return nil, fmt.Errorf("rejections[%d]: %w", i, err)
			}
		}
	}
	gs, err := mapsField(m, "grants", 2*MaxListLen)
	if err != nil {
		return nil, err
	}
	if gs != nil {
		p.Grants = make([]CompactedGrant, len(gs))
		for i, gm := range gs {
			g := &p.Grants[i]
			if g.Tool, err = strField(gm, "tool", true); err == nil {
				if g.Scope, err = strField(gm, "scope", true); err == nil {
					if g.By, err = strField(gm, "by", true); err == nil {
						if g.Channel, err = strField(gm, "channel", false); err == nil {
							if g.Turn, err = uintField(gm, "turn"); err == nil {
								g.Seq, err = uintField(gm, "seq")
							}
						}
					}
				}
			}
			if err != nil {
				return nil, fmt.Errorf("grants[%d]: %w", i, err)
			}
		}
	}
	return p, nil
}

// mapsField reads a list of maps; nil/absent stays nil.
func mapsField(m map[string]any, key string, max int) ([]map[string]any, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	arr, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want an array of maps: %w", key, kind(raw), ErrMalformed)
	}
	if len(arr) > max {
		return nil, fmt.Errorf("key %q has %d entries, at most %d allowed: %w", key, len(arr), max, ErrMalformed)
	}
	out := make([]map[string]any, len(arr))
	for i, x := range arr {
		mm, ok := x.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("key %q entry %d holds %s, want a map: %w", key, i, kind(x), ErrMalformed)
		}
		out[i] = mm
	}
	return out, nil
}

// validateCompacted checks the shape of a SessionCompacted: names well
// formed, texts and lists bounded.
func validateCompacted(v SessionCompacted) error {
	if err := validateText("reason", v.Reason); err != nil {
		return err
	}
	in := v.Intent
	if err := validateTurnIntent("intent", &in); err != nil {
		return err
	}
	if err := validateNames("loaded", v.Loaded); err != nil {
		return err
	}
	if err := validateNames("referenced", v.Referenced); err != nil {
		return err
	}
	if v.Checkpoint != nil {
		if err := validateCheckpoint(*v.Checkpoint); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	if len(v.Rejections) > MaxCompactedRejections {
		return fmt.Errorf("rejections has %d entries, at most %d: %w", len(v.Rejections), MaxCompactedRejections, ErrInvalidEvent)
	}
	for i, r := range v.Rejections {
		for _, t := range [...]struct{ k, v string }{{"id", r.ID}, {"type", r.Type}, {"kind", r.Kind}, {"reason", r.Reason}} {
			if err := validateText(fmt.Sprintf("rejections[%d].%s", i, t.k), t.v); err != nil {
				return err
			}
		}
	}
	if len(v.Grants) > 2*MaxListLen {
		return fmt.Errorf("grants has %d entries, at most %d: %w", len(v.Grants), 2*MaxListLen, ErrInvalidEvent)
	}
	for i, g := range v.Grants {
		if err := ValidateToolName(g.Tool); err != nil {
			return fmt.Errorf("grants[%d].tool: %w", i, err)
		}
		if g.Scope != ScopeSession && g.Scope != ScopeOnce {
			return fmt.Errorf("grants[%d].scope %q: want %q or %q: %w", i, g.Scope, ScopeSession, ScopeOnce, ErrInvalidEvent)
		}
		if g.By == "" {
			return fmt.Errorf("grants[%d].by is empty: %w", i, ErrInvalidEvent)
		}
		if err := validateText("grants.by", g.By); err != nil {
			return err
		}
		if err := validateText("grants.channel", g.Channel); err != nil {
			return err
		}
	}
	return nil
}

// checkCompacted is the fold rule of a SessionCompacted that needs nothing
// but the event: the range is coherent (first_seq <= last_seq,
// count within it, times in order), the state it carries is one a fold
// can reach (a picked list within MaxPicked and without duplicates, the
// loaded tools each once, the disabled and referenced lists sorted sets, the checkpoint valid and at a
// started turn, the checkpoint and turn sequences inside the range, the
// counters covering the rejections it lists), and its grants are each
// given once.
func checkCompacted(v SessionCompacted) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("SessionCompacted "+format+": %w", append(args, ErrBrokenRule)...)
	}
	switch {
	case v.FirstSeq == 0 || v.LastSeq < v.FirstSeq:
		return bad("range %d..%d is not a range of stream sequences", v.FirstSeq, v.LastSeq)
	case v.Count == 0 || v.Count > v.LastSeq-v.FirstSeq+1:
		return bad("count %d does not fit the range %d..%d", v.Count, v.FirstSeq, v.LastSeq)
	case v.LastMs < v.FirstMs:
		return bad("last time %d is before the first %d", v.LastMs, v.FirstMs)
	case v.Events+v.Skipped+v.Rejected < v.Count:
		return bad("counts %d applied + %d skipped + %d rejected are fewer than the %d events it replaces", v.Events, v.Skipped, v.Rejected, v.Count)
	case uint64(len(v.Rejections)) > v.Skipped+v.Rejected:
		return bad("lists %d refused events but counts %d", len(v.Rejections), v.Skipped+v.Rejected)
	case v.TurnSeq > v.LastSeq || v.CheckpointSeq > v.LastSeq:
		return bad("turn or checkpoint sequence after the range it replaces")
	case (v.Checkpoint == nil) != (v.CheckpointSeq == 0):
		return bad("checkpoint and checkpoint_seq must come together")
	case len(v.Loaded) > MaxListLen:
		return bad("loads %d tools, at most %d", len(v.Loaded), MaxListLen)
	}
	if v.Intent.Picked != nil {
		if len(v.Intent.Picked) > MaxPicked {
			return bad("picked list has %d names, at most %d", len(v.Intent.Picked), MaxPicked)
		}
		for i, n := range v.Intent.Picked {
			if slices.Contains(v.Intent.Picked[:i], n) {
				return bad("picked list names %q twice", n)
			}
		}
	}
	for _, l := range [...]struct {
		name  string
		names []string
	}{{"intent disabled", v.Intent.Disabled}, {"referenced", v.Referenced}} {
		for i := 1; i < len(l.names); i++ {
			if l.names[i-1] >= l.names[i] {
				return bad("%s list is not sorted without duplicates at %q", l.name, l.names[i])
			}
		}
	}
	for i, n := range v.Loaded {
		if slices.Contains(v.Loaded[:i], n) {
			return bad("loads %q twice", n)
		}
	}
	if c := v.Checkpoint; c != nil {
		if err := checkCheckpoint(*c); err != nil {
			return fmt.Errorf("SessionCompacted checkpoint: %w", err)
		}
		if c.Turn > v.Turn {
			return bad("checkpoint at turn %d, after the last started turn %d", c.Turn, v.Turn)
		}
	}
	for i, g := range v.Grants {
		for _, h := range v.Grants[:i] {
			if h.Tool == g.Tool && h.Scope == g.Scope {
				return bad("grants %s to %q twice", g.Scope, g.Tool)
			}
		}
		if g.Scope == ScopeOnce && g.Turn != v.GrantsTurn {
			return bad("once grant of %q in turn %d, not the grants' turn %d", g.Tool, g.Turn, v.GrantsTurn)
		}
	}
	return nil
}
