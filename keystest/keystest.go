// Package keystest is the conformance suite of an idempotency-key index:
// the contract service.Keys states, which the JetStream index
// (jetstream.Keys) and the in-memory one (memlog.Keys) both pass. It
// needs no NATS server.
package keystest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// Keys is the index under test.
type Keys interface {
	Claim(ctx context.Context, key string, c logport.KeyClaim) (got logport.KeyClaim, claimed bool, err error)
	Get(ctx context.Context, key string) (c logport.KeyClaim, found bool, err error)
	Settle(ctx context.Context, key string, c logport.KeyClaim, first uint64, count int) error
	Advance(ctx context.Context, key string, c logport.KeyClaim, after uint64) error
	Release(ctx context.Context, key string, c logport.KeyClaim) error
	ForgetSession(ctx context.Context, session string) (int, error)
}

// Run runs the suite; open returns an empty index for each case.
func Run(t *testing.T, open func(t *testing.T) Keys) {
	cases := []struct {
		name string
		run  func(t *testing.T, k Keys)
	}{
		{"a key is claimed once, by the first session", claimOnce},
		{"of concurrent claims exactly one wins", concurrentClaims},
		{"a settled claim is final", settleFinal},
		{"a claim of another session is not settled", settleOtherSession},
		{"a released claim is settled anew", settleAfterRelease},
		{"a claim a twin changed is settled", settleAfterTwin},
		{"advance moves a pending claim only as read", advance},
		{"release frees the key only as read", release},
		{"forgetting a session drops its keys alone", forgetSession},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

var ctx = context.Background()

func claim(t *testing.T, k Keys, key string, c logport.KeyClaim) logport.KeyClaim {
	t.Helper()
	got, claimed, err := k.Claim(ctx, key, c)
	if err != nil || !claimed {
		t.Fatalf("claim %s for %q: claimed %v, %v", key, c.Session, claimed, err)
	}
	return got
}

func get(t *testing.T, k Keys, key string) (logport.KeyClaim, bool) {
	t.Helper()
	c, found, err := k.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	return c, found
}

func claimOnce(t *testing.T, k Keys) {
	key := events.NewID()
	first := claim(t, k, key, logport.KeyClaim{Session: "a", Channel: "web", After: 4, IDs: logport.KeyIDsV1, Digest: "d", Commands: "ToolsToggled"})
	if first.Rev == 0 || first.Session != "a" || first.After != 4 || !first.Pending() {
		t.Fatalf("claimed %+v: want a's pending claim after 4 with a revision", first)
	}
	got, claimed, err := k.Claim(ctx, key, logport.KeyClaim{Session: "b", Channel: "slack"})
	if err != nil || claimed || got != first {
		t.Fatalf("second claim: %+v claimed %v, %v; want a's claim %+v, not claimed", got, claimed, err, first)
	}
	if c, found := get(t, k, key); !found || c != first {
		t.Fatalf("get: %+v found %v, want %+v", c, found, first)
	}
	if _, found := get(t, k, events.NewID()); found {
		t.Fatal("get of a key never claimed: found")
	}
}

func concurrentClaims(t *testing.T, k Keys) {
	key := events.NewID()
	const n = 16
	var wg sync.WaitGroup
	won := make([]bool, n)
	got := make([]logport.KeyClaim, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], won[i], errs[i] = k.Claim(ctx, key, logport.KeyClaim{Session: string(rune('a' + i))})
		}()
	}
	wg.Wait()
	winners := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("claim %d: %v", i, errs[i])
		}
		if won[i] {
			winners++
		}
		if got[i].Session != got[0].Session {
			t.Fatalf("claims disagree on the owner: %q and %q", got[i].Session, got[0].Session)
		}
	}
	if winners != 1 {
		t.Fatalf("%d of %d concurrent claims won, want 1", winners, n)
	}
}

func settleFinal(t *testing.T, k Keys) {
	key := events.NewID()
	c := claim(t, k, key, logport.KeyClaim{Session: "a", Channel: "web", After: 2})
	if err := k.Settle(ctx, key, c, 10, 2); err != nil {
		t.Fatal(err)
	}
	s, found := get(t, k, key)
	if !found || s.First != 10 || s.Count != 2 || s.Pending() || s.Channel != "web" || s.After != 2 {
		t.Fatalf("settled: %+v, want a's claim at 10, 2 events, channel and after kept", s)
	}
	// A twin settling from the claim it read before: done, unchanged.
	if err := k.Settle(ctx, key, c, 20, 1); err != nil {
		t.Fatalf("settle again from a stale claim: %v", err)
	}
	if again, _ := get(t, k, key); again.First != 10 || again.Count != 2 {
		t.Fatalf("settled again: %+v, want it at 10, 2 still", again)
	}
}

func settleOtherSession(t *testing.T, k Keys) {
	key := events.NewID()
	claim(t, k, key, logport.KeyClaim{Session: "a"})
	err := k.Settle(ctx, key, logport.KeyClaim{Session: "b"}, 5, 1)
	if !errors.Is(err, logport.ErrKeyInUse) {
		t.Fatalf("b settling a's key: %v, want ErrKeyInUse", err)
	}
	if c, _ := get(t, k, key); c.Session != "a" || !c.Pending() {
		t.Fatalf("a's claim after b's settle: %+v, want it pending", c)
	}
}

func settleAfterRelease(t *testing.T, k Keys) {
	key := events.NewID()
	c := claim(t, k, key, logport.KeyClaim{Session: "a"})
	if err := k.Release(ctx, key, c); err != nil {
		t.Fatal(err)
	}
	if err := k.Settle(ctx, key, c, 7, 1); err != nil {
		t.Fatalf("settle a released claim: %v", err)
	}
	if s, found := get(t, k, key); !found || s.Session != "a" || s.First != 7 || s.Count != 1 {
		t.Fatalf("after settling a released claim: %+v found %v, want a's at 7", s, found)
	}
}

func settleAfterTwin(t *testing.T, k Keys) {
	key := events.NewID()
	c := claim(t, k, key, logport.KeyClaim{Session: "a", After: 1})
	twin, _ := get(t, k, key)
	if err := k.Advance(ctx, key, twin, 9); err != nil {
		t.Fatal(err)
	}
	if err := k.Settle(ctx, key, c, 12, 3); err != nil {
		t.Fatalf("settle a claim a twin advanced: %v", err)
	}
	if s, _ := get(t, k, key); s.First != 12 || s.Count != 3 || s.After != 9 {
		t.Fatalf("settled after the twin: %+v, want at 12, 3 events, after 9 (the twin's)", s)
	}
}

func advance(t *testing.T, k Keys) {
	key := events.NewID()
	c := claim(t, k, key, logport.KeyClaim{Session: "a", After: 3})
	if err := k.Advance(ctx, key, c, 7); err != nil {
		t.Fatal(err)
	}
	now, _ := get(t, k, key)
	if now.After != 7 || !now.Pending() {
		t.Fatalf("advanced: %+v, want pending after 7", now)
	}
	// From the claim as it was before: refused, nothing changed.
	if err := k.Advance(ctx, key, c, 11); err == nil {
		t.Fatal("advance from a stale claim: no error")
	}
	if s, _ := get(t, k, key); s != now {
		t.Fatalf("after a stale advance: %+v, want %+v", s, now)
	}
	// Not past where it is, or settled: nothing to do.
	if err := k.Advance(ctx, key, now, 5); err != nil {
		t.Fatalf("advance backwards: %v", err)
	}
	if err := k.Settle(ctx, key, now, 20, 1); err != nil {
		t.Fatal(err)
	}
	settled, _ := get(t, k, key)
	if err := k.Advance(ctx, key, settled, 30); err != nil {
		t.Fatalf("advance a settled claim: %v", err)
	}
	if s, _ := get(t, k, key); s != settled {
		t.Fatalf("a settled claim advanced: %+v, want %+v", s, settled)
	}
}

func release(t *testing.T, k Keys) {
	key := events.NewID()
	c := claim(t, k, key, logport.KeyClaim{Session: "a"})
	now, _ := get(t, k, key)
	if err := k.Advance(ctx, key, now, 4); err != nil {
		t.Fatal(err)
	}
	// From the claim as it was before the advance: refused, kept.
	if err := k.Release(ctx, key, c); err == nil {
		t.Fatal("release from a stale claim: no error")
	}
	cur, found := get(t, k, key)
	if !found || cur.After != 4 {
		t.Fatalf("after a stale release: %+v found %v, want the claim kept", cur, found)
	}
	if err := k.Release(ctx, key, cur); err != nil {
		t.Fatal(err)
	}
	if _, found := get(t, k, key); found {
		t.Fatal("released key still claimed")
	}
	if got := claim(t, k, key, logport.KeyClaim{Session: "b"}); got.Session != "b" {
		t.Fatalf("claim after release: %+v, want b's", got)
	}
}

func forgetSession(t *testing.T, k Keys) {
	a1, a2, b1 := events.NewID(), events.NewID(), events.NewID()
	claim(t, k, a1, logport.KeyClaim{Session: "a"})
	c := claim(t, k, a2, logport.KeyClaim{Session: "a"})
	if err := k.Settle(ctx, a2, c, 3, 1); err != nil {
		t.Fatal(err)
	}
	claim(t, k, b1, logport.KeyClaim{Session: "b"})
	n, err := k.ForgetSession(ctx, "a")
	if err != nil || n != 2 {
		t.Fatalf("forget a: %d, %v; want its 2 keys", n, err)
	}
	for _, key := range []string{a1, a2} {
		if _, found := get(t, k, key); found {
			t.Fatalf("a's key %s kept", key)
		}
	}
	if c, found := get(t, k, b1); !found || c.Session != "b" {
		t.Fatalf("b's key after forgetting a: %+v found %v", c, found)
	}
}
