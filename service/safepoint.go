package service

// The safe points of a turn (Checkpoint, EndTurn) and Resume, which checks
// the last checkpoint against the current contract.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/checkpoint"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
)

// Checkpoint records a safe point of the open turn: its loaded deferred
// tools and the hash of the contract they belong to.
func (e *Engine) Checkpoint(ctx context.Context, session string, origin Origin) (aggregate.Checkpoint, error) {
	return e.safePoint(ctx, session, origin, false)
}

// EndTurn ends the open turn at a safe point: one TurnEnded that carries
// the checkpoint, one log write (logs written before hold TurnEnded
// and CheckpointRecorded, appended as one atomic batch, which fold the
// same).
func (e *Engine) EndTurn(ctx context.Context, session string, origin Origin) (aggregate.Checkpoint, error) {
	return e.safePoint(ctx, session, origin, true)
}

// safePoint records the open turn's loaded set, as the log holds it, at
// the session's last sequence; when another writer moves the session in
// between, it reads the log again and retries (the checkpoint is derived
// from the log, so this is safe). The first try starts from this engine's
// state of the session (no read of the log on the turn's path, as
// BeginTurn): the append expects that state's last sequence, so a state
// behind the log is a conflict, and the retry reads the log. A state that
// shows no open turn is checked against the log first (another engine may
// have begun one).
func (e *Engine) safePoint(ctx context.Context, session string, origin Origin, end bool) (aggregate.Checkpoint, error) {
	for attempt := 0; ; attempt++ {
		st, err := e.current(ctx, session, attempt > 0, 0)
		if err == nil && !st.InTurn && attempt == 0 {
			st, err = e.latest(ctx, session, 0)
		}
		if err != nil {
			return aggregate.Checkpoint{}, err
		}
		var out aggregate.Checkpoint
		err = e.withTurn(ctx, st, func(ot *openTurn, st aggregate.State) error {
			rec, err := checkpoint.New(ot.turn.Number(), ot.res, ot.turn.Loaded())
			if err != nil {
				return fmt.Errorf("%w: %w", ErrInvalid, err)
			}
			var cmd events.Payload = rec
			if end {
				cmd = events.TurnEnded{Turn: ot.turn.Number(), Checkpoint: &rec}
			}
			expected := st.LastSeq
			res, err := e.Apply(ctx, session, origin, &expected, cmd)
			if err != nil {
				return err
			}
			if end {
				e.ts.turns.Remove(session)
			} else {
				e.settled(session, ot, res.First, res.Last)
			}
			out = aggregate.Checkpoint{Record: rec, Seq: res.Last}
			return nil
		})
		if errors.Is(err, ErrConflict) && attempt < e.cfg.MaxRetries {
			continue
		}
		return out, err
	}
}

// ResumeResult is the outcome of Resume.
type ResumeResult struct {
	// Outcome says what was restored and, when nothing was, why.
	Outcome checkpoint.Outcome `json:"outcome"`
	// Checkpoint is the checkpoint resumed from (nil: none recorded).
	Checkpoint *checkpoint.Record `json:"checkpoint,omitempty"`
	// Seq is where the resumed state was recorded (0: nothing written).
	Seq uint64 `json:"seq"`
}

// Resume restores a session after a crash: it verifies the
// last checkpoint's contract hash against the contract the live registry
// now gives for the session's intent; an equal hash restores the
// checkpoint's loaded deferred tools exactly, a different one restores
// each loaded tool whose own contract entry is unchanged and that the
// current resolution still has deferred, and says per tool why the others
// were dropped. Searches are never replayed and no tool-result text is
// read. The restored set is recorded as a new checkpoint, so the session's
// loaded set is exactly what was restored; the open turn, if any, is
// closed.
func (e *Engine) Resume(ctx context.Context, session string, origin Origin, req ResolveRequest) (ResumeResult, error) {
	if err := req.validate(); err != nil {
		return ResumeResult{}, err
	}
	req.Channel = origin.Channel // a resume resolves under its channel's policy
	st, err := e.proj.Read(ctx, session, projection.ReadOptions{Latest: true, MinSeq: e.floor(session, 0)})
	if err != nil {
		return ResumeResult{}, err
	}
	st.Session = session
	if err := alive(session, st); err != nil {
		return ResumeResult{}, err
	}
	reg := e.Registry()
	res, err := e.resolve(st, req)
	if err != nil {
		return ResumeResult{}, err
	}
	var rec *checkpoint.Record
	if cp := st.Checkpoint; cp != nil {
		rec = &cp.Record
	}
	var explain checkpoint.Explainer
	if reg.Version() == res.RegistryVersion { // not swapped in between
		rq := resolver.Request{Override: req.Override, Session: st.Intent, Profile: req.Profile, Channel: req.Channel}
		explain = func(tool string) resolver.Explanation { return reg.Explain(rq, tool) }
	}
	src := checkpoint.Sources{Explain: explain}
	if rec != nil && rec.ContractHash != res.ContractHash {
		src.Recorded = e.recordedContract(ctx, st, rec, req)
	}
	out := ResumeResult{Outcome: checkpoint.ResumeFrom(rec, res, src), Checkpoint: rec}
	e.ts.turns.Remove(session)
	restored, err := checkpoint.New(st.Turn, res, out.Outcome.Restored)
	if err != nil {
		return out, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	needTurnEnd := st.InTurn
	same := !needTurnEnd && rec != nil && rec.ContractHash == res.ContractHash && slices.Equal(st.Loaded, restored.Loaded)
	if same || (rec == nil && len(st.Loaded) == 0 && !needTurnEnd) {
		return out, nil
	}
	// One event, one log write: the open turn's end carries the
	// restored checkpoint.
	var cmd events.Payload = restored
	if needTurnEnd {
		cmd = events.TurnEnded{Turn: st.Turn, Checkpoint: &restored}
	}
	expected := st.LastSeq
	ar, err := e.Apply(ctx, session, origin, &expected, cmd)
	if err != nil {
		return out, err
	}
	out.Seq = ar.Last
	return out, nil
}

// CheckpointResult is a recorded safe point: the checkpoint record and the
// sequence of its event.
//
// Use aggregate.Checkpoint, which this is.
type CheckpointResult = aggregate.Checkpoint

// recordedContract rebuilds the contract checkpoint rec was recorded
// against from the registry history: the request of its turn's
// TurnStarted (when rec belongs to the session's last turn) or, failing
// that, the resumed request, each resolved against rec's registry
// version. It returns nil when neither gives rec's contract hash (the
// version was pruned, or the intent changed since): Resume then reports
// the changes of the loaded tools only. Each try costs one read.
func (e *Engine) recordedContract(ctx context.Context, st aggregate.State, rec *checkpoint.Record, req ResolveRequest) *resolver.Resolution {
	if rec.Turn == st.Turn && st.TurnSeq > 0 {
		recs, err := e.log.ReadSession(ctx, st.Session, st.TurnSeq, st.TurnSeq)
		if err == nil && len(recs) == 1 && recs[0].Err == nil {
			if ts, ok := recs[0].Envelope.Payload.(events.TurnStarted); ok && ts.Recorded() && ts.ContractHash == rec.ContractHash {
				if res, _, _, err := e.replayTurn(ctx, ts, recs[0].Envelope.Channel, st); err == nil {
					return res
				}
			}
		}
	}
	rq := resolver.Request{Override: req.Override, Session: st.Intent, Profile: req.Profile, Channel: req.Channel}
	res, _, err := e.resolveRecorded(ctx, rec.RegistryVersion, rec.ContractHash, rq)
	if err != nil {
		return nil
	}
	return res
}
