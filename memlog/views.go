package memlog

import (
	"context"
	"fmt"
	"slices"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// Views serves session views of a Log by folding the session's events on
// every read, implementing service.Views with the projection's contract
// (checked by the same conformance suite, viewstest.Run). Every read is
// as fresh as the log, so ReadOptions are always met; a fold that needs
// the registry in force when an event was stored is made without one (no
// registry history is kept), as a projection without one folds it.
type Views struct{ log *Log }

// NewViews returns the views of log.
func NewViews(log *Log) *Views { return &Views{log: log} }

// Read folds the session's events into its view. A session with no
// events reads as the zero state, not an error.
func (v *Views) Read(ctx context.Context, session string, _ logport.ReadOptions) (aggregate.State, error) {
	if err := events.ValidateSessionID(session); err != nil {
		return aggregate.State{}, fmt.Errorf("read session %q: %w", session, err)
	}
	st := aggregate.State{Session: session}
	err := v.log.ScanSession(ctx, session, 0, 0, func(r logport.Record) error {
		ev, _ := v.Stored(ctx, r)
		// A refused event is kept in the log and counted in the state,
		// as the projection's fold does.
		_ = st.ApplyStored(ev)
		return nil
	})
	return st, err
}

// Stored is rec as the views fold it (without a registry).
func (v *Views) Stored(_ context.Context, rec logport.Record) (aggregate.Stored, error) {
	return aggregate.StoredRecord(rec), nil
}

// Sessions lists the sessions that have events, sorted.
func (v *Views) Sessions(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v.log.mu.Lock()
	out := make([]string, 0, len(v.log.last))
	for s := range v.log.last {
		out = append(out, s)
	}
	v.log.mu.Unlock()
	slices.Sort(out)
	return out, nil
}
