package service_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/memlog"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// foldViews serves views by folding the log on every read: the simplest
// service.Views, enough to run the engine on any service.Log.
type foldViews struct{ log service.Log }

func (v foldViews) Read(ctx context.Context, session string, _ projection.ReadOptions) (aggregate.State, error) {
	st := aggregate.State{Session: session}
	err := v.log.ScanSession(ctx, session, 0, 0, func(r jetstream.Record) error {
		st.ApplyStored(aggregate.Stored{Seq: r.Seq, MsgID: r.MsgID, Envelope: r.Envelope, Err: r.Err}) //nolint:errcheck // a test fold
		return nil
	})
	return st, err
}

func (foldViews) Registries() *projection.Registries { return nil }

func (foldViews) Sessions(context.Context) ([]string, error) { return nil, nil }

// The engine runs on its ports alone: over the in-memory log
// it writes, reads back, answers a pinned stale sequence with a conflict,
// and refuses a keyed write when it was given no key store.
func TestEngineOnMemlog(t *testing.T) {
	log := memlog.New()
	e := service.NewFromPorts(service.Ports{Log: log, Views: foldViews{log}}, resolver.Default(), service.Config{})
	ctx := context.Background()
	res, err := e.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: on(false)})
	if err != nil || res.Last == 0 {
		t.Fatalf("apply: %+v, %v", res, err)
	}
	st, err := e.Session(ctx, "s1", res.Last)
	if err != nil || st.LastSeq != res.Last {
		t.Fatalf("session read at %d, %v; want %d", st.LastSeq, err, res.Last)
	}
	if n, _ := log.LastSeq(ctx, "s1"); n != res.Last {
		t.Fatalf("log at %d, want %d", n, res.Last)
	}
	stale := uint64(0)
	_, err = e.Apply(ctx, "s1", web, &stale, events.ToolsToggled{Enabled: on(true)})
	if service.KindOf(err) != service.KindConflict {
		t.Fatalf("apply at a stale sequence: %v, want a conflict", err)
	}
	_, err = e.ApplyKeyed(ctx, "s1", web, nil, events.NewID(), events.ToolsToggled{Enabled: on(true)})
	if !errors.Is(err, service.ErrInvalid) || !strings.Contains(err.Error(), "no key store") {
		t.Fatalf("keyed apply without a key store: %v, want ErrInvalid", err)
	}
	if e.Log() != nil || e.Projection() != nil {
		t.Fatal("an engine over other ports has no JetStream log or projection to hand out")
	}
}
