package service

// History and explain of a compacted session: the SessionCompacted
// entry says what it replaced, and a point before it answers that its
// events were compacted, with the range, count, times and who compacted,
// rather than an empty history or a bare error.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/wire"
)

// ErrCompacted: the events asked for were replaced by a SessionCompacted
// and purged. A *CompactedError says which and when; it matches
// ErrNotFound too (KindNotFound: the log no longer holds those events).
var ErrCompacted = errors.New("events compacted")

// Compaction describes a SessionCompacted: the events it replaced and who
// compacted them, when; history entries carry it.
type Compaction = wire.Compaction

// compactionOf describes r when it is a decoded SessionCompacted.
func compactionOf(r logport.Record) (*Compaction, bool) {
	p, ok := r.Envelope.Payload.(events.SessionCompacted)
	if !ok || r.Err != nil {
		return nil, false
	}
	return &Compaction{Seq: r.Seq, FirstSeq: p.FirstSeq, LastSeq: p.LastSeq, Count: p.Count,
		FirstTime: time.UnixMilli(p.FirstMs).UTC(), LastTime: time.UnixMilli(p.LastMs).UTC(),
		Channel: r.Envelope.Channel, Actor: r.Envelope.Actor, Time: r.Time, Reason: p.Reason}, true
}

// CompactedError answers a history or explain of a point before a
// session's compaction.
type CompactedError struct {
	Session string
	// Until is the point asked for.
	Until Until
	Compaction
}

func (e *CompactedError) Error() string {
	at := fmt.Sprintf("sequence %d", e.Until.Seq)
	if e.Until.Seq == 0 {
		at = e.Until.Time.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("session %q at %s: its events %d..%d (%d events, written %s to %s) were compacted into one snapshot at sequence %d by %s/%s at %s: the log no longer holds them; history and explain start at sequence %d",
		e.Session, at, e.FirstSeq, e.LastSeq, e.Count, e.FirstTime.Format(time.RFC3339), e.LastTime.Format(time.RFC3339),
		e.Seq, e.Channel, e.Actor, e.Time.UTC().Format(time.RFC3339), e.Seq)
}

// Unwrap makes the error match ErrCompacted and ErrNotFound.
func (e *CompactedError) Unwrap() []error { return []error{ErrCompacted, ErrNotFound} }

// compactedBefore returns a *CompactedError when the session's first
// event is a SessionCompacted that until stops before: the point asked for
// was compacted. nil otherwise (the session has no events, or until
// reaches its first one).
func (e *Engine) compactedBefore(ctx context.Context, session string, until Until) error {
	if until.Seq == 0 && until.Time.IsZero() {
		return nil
	}
	var first *logport.Record
	stop := errors.New("stop")
	err := e.pager.ScanSession(ctx, session, 0, 0, func(r logport.Record) error {
		first = &r
		return stop
	})
	if err != nil && !errors.Is(err, stop) {
		return err
	}
	if first == nil || !until.stops(*first) {
		return nil
	}
	c, ok := compactionOf(*first)
	if !ok {
		return nil
	}
	c.Actor = e.RevealActor(ctx, c.Actor)
	return &CompactedError{Session: session, Until: until, Compaction: *c}
}
