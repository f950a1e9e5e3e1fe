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

var compactedCodec = codec[SessionCompacted]{
	uintAt("first_seq", func(p *SessionCompacted) *uint64 { return &p.FirstSeq }),
	uintAt("last_seq", func(p *SessionCompacted) *uint64 { return &p.LastSeq }),
	uintAt("count", func(p *SessionCompacted) *uint64 { return &p.Count }),
	uintAt("turn", func(p *SessionCompacted) *uint64 { return &p.Turn }),
	uintAt("turn_seq", func(p *SessionCompacted) *uint64 { return &p.TurnSeq }),
	uintAt("checkpoint_seq", func(p *SessionCompacted) *uint64 { return &p.CheckpointSeq }),
	uintAt("events", func(p *SessionCompacted) *uint64 { return &p.Events }),
	uintAt("skipped", func(p *SessionCompacted) *uint64 { return &p.Skipped }),
	uintAt("rejected", func(p *SessionCompacted) *uint64 { return &p.Rejected }),
	uintAt("grants_turn", func(p *SessionCompacted) *uint64 { return &p.GrantsTurn }),
	intAt("first_time_ms", func(p *SessionCompacted) *int64 { return &p.FirstMs }),
	intAt("last_time_ms", func(p *SessionCompacted) *int64 { return &p.LastMs }),
	textAt("reason", func(p *SessionCompacted) *string { return &p.Reason }),
	structAt("intent", intentCodec, func(p *SessionCompacted) *intent.Intent { return &p.Intent }),
	namesAt("loaded", func(p *SessionCompacted) *[]string { return &p.Loaded }),
	namesAt("referenced", func(p *SessionCompacted) *[]string { return &p.Referenced }),
	ptrAt("checkpoint", checkpointCodec, func(p *SessionCompacted) **CheckpointRecorded { return &p.Checkpoint }),
	listAt("rejections", MaxCompactedRejections, codec[CompactedRejection]{
		uintAt("seq", func(p *CompactedRejection) *uint64 { return &p.Seq }),
		textAt("id", func(p *CompactedRejection) *string { return &p.ID }),
		textAt("type", func(p *CompactedRejection) *string { return &p.Type }),
		nameAt("kind", func(p *CompactedRejection) *string { return &p.Kind }),
		textAt("reason", func(p *CompactedRejection) *string { return &p.Reason }),
	}, func(p *SessionCompacted) *[]CompactedRejection { return &p.Rejections }),
	listAt("grants", 2*MaxListLen, codec[CompactedGrant]{
		nameAt("tool", func(p *CompactedGrant) *string { return &p.Tool }),
		nameAt("scope", func(p *CompactedGrant) *string { return &p.Scope }),
		nameAt("by", func(p *CompactedGrant) *string { return &p.By }),
		textAt("channel", func(p *CompactedGrant) *string { return &p.Channel }),
		uintAt("turn", func(p *CompactedGrant) *uint64 { return &p.Turn }),
		uintAt("seq", func(p *CompactedGrant) *uint64 { return &p.Seq }),
	}, func(p *SessionCompacted) *[]CompactedGrant { return &p.Grants }),
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
		if err := validateTexts("grants.by", g.By, "grants.channel", g.Channel); err != nil {
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
