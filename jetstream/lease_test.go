package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolintent/engine/jetstream"
)

// ReleaseOwner gives up the owner's lease at the revision it now has (a
// renewal whose reply the runner never read moved it on), so another
// owner takes it at once; it leaves another owner's lease held.
func TestReleaseOwnerFreesTheLeaseAtARevisionTheRunnerNeverLearnt(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	m, err := l.OpenMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held, err := m.Acquire(ctx, "engine-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Renew(ctx, held, time.Minute); err != nil { // the renewal the runner did not learn of
		t.Fatal(err)
	}
	if err := m.Release(ctx, held); err == nil {
		t.Fatal("release at the revision the runner knew succeeded; the test needs it stale")
	}
	if ok, err := m.ReleaseOwner(ctx, "engine-a"); err != nil || !ok {
		t.Fatalf("release engine-a's lease: released %v, %v", ok, err)
	}
	if _, err := m.Acquire(ctx, "engine-b", time.Minute); err != nil {
		t.Fatalf("engine-b after engine-a released: %v", err)
	}
	if ok, err := m.ReleaseOwner(ctx, "engine-a"); err != nil || ok {
		t.Fatalf("engine-a released engine-b's lease: released %v, %v", ok, err)
	}
	if _, err := m.Acquire(ctx, "engine-c", time.Minute); !errors.Is(err, jetstream.ErrLeaseHeld) {
		t.Fatalf("engine-c while engine-b holds the lease: %v, want ErrLeaseHeld", err)
	}
}
