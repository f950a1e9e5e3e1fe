package service_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/memlog"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// auditOnly is an Eraser whose audit says which ids were erased.
type auditOnly map[string]bool

func (a auditOnly) Begin(context.Context, string, uint64) error { return errors.New("not here") }
func (a auditOnly) Cancel(context.Context, string) error        { return errors.New("not here") }
func (a auditOnly) Erase(context.Context, string, uint64) (jetstream.EraseReport, error) {
	return jetstream.EraseReport{}, errors.New("not here")
}
func (a auditOnly) Erased(_ context.Context, s string) (bool, error) { return a[s], nil }
func (a auditOnly) Unfinished(context.Context, uint64) (map[string]jetstream.AuditRecord, uint64, error) {
	return nil, 0, nil
}

// Delete over the engine's ports: reads, explain and writes answer
// ErrDeleted (KindDeleted) while history still shows the events, deleting a session without
// events is ErrNotFound; an id the audit records as erased, with no events
// left, answers ErrDeleted on read and on its first write, not the
// defaults of a new session; without an eraser Erase is refused
// (KindForbidden).
func TestDeleteAndErasedIDOnPorts(t *testing.T) {
	t.Parallel()
	log := memlog.New()
	e := service.NewFromPorts(service.Ports{Log: log, Views: memlog.NewViews(log)}, resolver.Default(), service.Config{})
	ctx := context.Background()
	if _, err := e.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: on(false)}, events.TurnStarted{}); err != nil {
		t.Fatal(err)
	}
	d, err := e.Delete(ctx, "s1", web, "test")
	if err != nil || d.Seq != 3 || d.EventID == "" {
		t.Fatalf("delete: %+v %v", d, err)
	}
	if _, err := e.Session(ctx, "s1", 0); !errors.Is(err, service.ErrDeleted) || service.KindOf(err) != service.KindDeleted {
		t.Errorf("read of a deleted session: %v (kind %v)", err, service.KindOf(err))
	}
	if _, err := e.Apply(ctx, "s1", web, nil, events.ToolsToggled{Enabled: on(true)}); service.KindOf(err) != service.KindDeleted {
		t.Errorf("write to a deleted session: %v (kind %v)", err, service.KindOf(err))
	}
	if _, err := e.Explain(ctx, "s1", "bash", service.Until{}, service.ResolveRequest{}); !errors.Is(err, service.ErrDeleted) {
		t.Errorf("explain of a deleted session: %v", err)
	}
	if _, err := e.Explain(ctx, "s1", "bash", service.Until{Seq: 2}, service.ResolveRequest{}); err != nil {
		t.Errorf("explain before the delete: %v", err)
	}
	if h, _, err := e.History(ctx, "s1", service.Until{}, service.ResolveRequest{}); err != nil || len(h) != 3 {
		t.Errorf("history of a deleted session: %d entries, %v", len(h), err)
	}
	if _, err := e.Delete(ctx, "s1", web, ""); service.KindOf(err) != service.KindDeleted {
		t.Errorf("delete again: %v", err)
	}
	if _, err := e.Delete(ctx, "none", web, ""); !errors.Is(err, service.ErrNotFound) || service.KindOf(err) != service.KindNotFound {
		t.Errorf("delete of a session without events: %v", err)
	}
	if _, err := e.Erase(ctx, "s1", web, ""); service.KindOf(err) != service.KindForbidden {
		t.Errorf("erase without an eraser: %v (kind %v)", err, service.KindOf(err))
	}
	e.SetEraser(auditOnly{"gone": true})
	if _, err := e.Session(ctx, "gone", 0); !errors.Is(err, service.ErrDeleted) {
		t.Errorf("read of an erased id: %v", err)
	}
	if _, err := e.Apply(ctx, "gone", web, nil, events.ToolsToggled{Enabled: on(true)}); !errors.Is(err, service.ErrDeleted) {
		t.Errorf("first write to an erased id: %v", err)
	}
	if n, _ := log.LastSeq(ctx, "gone"); n != 0 {
		t.Errorf("the erased id got events up to %d", n)
	}
	if _, err := e.Apply(ctx, "fresh", web, nil, events.ToolsToggled{Enabled: on(true)}); err != nil {
		t.Errorf("a new id: %v", err)
	}
}

// A delete or an erase through an engine that does not
// hold the session does not answer "it has no events" (ErrNotFound) for
// a session a replica behind the stream's leader has not caught up with:
// the client would take it as nothing to erase, and the events would stay
// in the log. Engine B writes, engine A (nothing cached, no projection)
// deletes half the sessions and erases the others (laggingPair).
func TestDeleteAndErasePastLaggingReplica(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, logA := laggingPair(t, true) // B's projection: an erase waits for the views to fold its delete
	for i := 0; i < 12; i++ {
		s := fmt.Sprintf("gone-%d", i)
		if _, err := b.Apply(ctx, s, web, nil, events.ToolDisabled{Name: "bash"}); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if _, err := a.Delete(ctx, s, web, "test"); err != nil {
				t.Fatalf("%s: delete: %v", s, err)
			}
			continue
		}
		res, err := a.Erase(ctx, s, web, "test")
		if err != nil {
			t.Fatalf("%s: erase: %v", s, err)
		}
		if res.Purged != 1 || res.DeleteSeq == 0 {
			t.Fatalf("%s: erase %+v, want its one event purged below its delete", s, res)
		}
		if n, err := logA.LeaderLastSeq(ctx, s); err != nil || n != res.DeleteSeq {
			t.Fatalf("%s: after the erase the leader's last is %d (%v), want its SessionDeleted at %d", s, n, err, res.DeleteSeq)
		}
	}
}
