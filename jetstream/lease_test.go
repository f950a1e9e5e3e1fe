package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/natstest"
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

// An owner name may hold spaces (an embedded engine's owner names its data
// directory): its live lease is held against every other owner, and it
// renews and releases it.
func TestLeaseOfAnOwnerWithSpacesInItsNameIsHeldAgainstOthers(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	m, err := l.OpenMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const spaced = "engine@h:/Users/me/Library/Application Support/My Engine"
	held, err := m.Acquire(ctx, spaced, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, "engine@k:/data", time.Minute); !errors.Is(err, jetstream.ErrLeaseHeld) {
		t.Fatalf("another owner while %q holds the lease: %v, want ErrLeaseHeld", spaced, err)
	}
	if _, err := m.Acquire(ctx, "engine@k:/other dir", time.Minute); !errors.Is(err, jetstream.ErrLeaseHeld) {
		t.Fatalf("another spaced owner while %q holds the lease: %v, want ErrLeaseHeld", spaced, err)
	}
	if _, err := m.Renew(ctx, held, time.Minute); err != nil {
		t.Fatalf("renew %q's lease: %v", spaced, err)
	}
	if ok, err := m.ReleaseOwner(ctx, spaced); err != nil || !ok {
		t.Fatalf("release %q's lease: released %v, %v", spaced, ok, err)
	}
	if _, err := m.Acquire(ctx, "engine@k:/data", time.Minute); err != nil {
		t.Fatalf("another owner after the release: %v", err)
	}
}

// metaThrough opens the meta bucket of the log on srv through p, with a
// Timeout (300 ms) shorter than the hold a test arms.
func metaThrough(t *testing.T, p *natstest.HoldProxy) *jetstream.Meta {
	t.Helper()
	ctx := context.Background()
	l := p.OpenLog(t, 300*time.Millisecond)
	var m *jetstream.Meta
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		var err error
		m, err = l.OpenMeta(ctx)
		return err
	})
	return m
}

// An acquire whose write is still on its way when it times out here, and
// is stored after ReleaseOwner has read the lease as free, does not leave
// the lease held: ReleaseOwner's own write, sent after it, lands after it
// and makes ReleaseOwner read again and release it.
func TestReleaseOwnerReleasesAnAcquireStillOnItsWay(t *testing.T) {
	srv := natstest.Server(t)
	px := natstest.NewHoldProxy(t, srv.ClientURL())
	ma := metaThrough(t, px)
	ctx := context.Background()
	l, err := jetstream.OpenLog(ctx, natstest.Connect(t, srv.ClientURL()), jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := l.OpenMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const rounds = 10
	held, inTime := 0, 0
	for i := 0; i < rounds; i++ {
		px.Arm("PUB $KV."+ma.Bucket()+".runner ", natstest.HoldWrites, 500*time.Millisecond)
		if _, err := ma.Acquire(ctx, "engine-a", 10*time.Second); err == nil { // a machine so busy that the write beat the timeout
			inTime++
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := ma.ReleaseOwner(rctx, "engine-a")
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if err := natstest.LeaseLeftHeld(t, m, "engine-a"); err != nil {
			held++
			t.Logf("round %d: %v", i, err)
		}
	}
	if inTime == rounds {
		t.Fatalf("every acquire was stored in time (%d rounds): nothing tested", rounds)
	}
	if held > 0 {
		t.Errorf("engine-a's lease stayed held (10 s) after its ReleaseOwner in %d of %d rounds", held, rounds)
	}
}

// ReleaseOwner reads the lease from the bucket's leader: a replica that
// has not stored it yet (it answers about half the direct gets, "not
// found") does not make it give up a lease its owner holds.
func TestReleaseOwnerIsNotMisledByAReplicaBehindTheLeader(t *testing.T) {
	l, _ := openLog(t)
	ctx := context.Background()
	m, err := l.OpenMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.ProbeWrite(ctx); err != nil { // the bucket's first message, on a key the lease never uses
		t.Fatal(err)
	}
	natstest.LaggingMirror(t, l.JetStream(), "KV_"+m.Bucket(), "$KV."+m.Bucket()+".probe")
	const rounds = 20
	for i := 0; i < rounds; i++ {
		// Acquire's own read is a direct get: the replica behind makes
		// some acquires lose a race with the lease they did not see.
		natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
			_, err := m.Acquire(ctx, "engine-a", 10*time.Second)
			return err
		})
		if ok, err := m.ReleaseOwner(ctx, "engine-a"); err != nil || !ok {
			t.Fatalf("round %d: ReleaseOwner with a replica behind: released %v, %v; want the lease released", i, ok, err)
		}
	}
}
