package memlog

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/toolintent/engine/logport"
)

// Keys is an in-memory idempotency-key index implementing service.Keys
// with the JetStream index's contract (a claim is created once, changed
// only by a compare-and-set on its revision), checked by the same
// conformance suite, keystest.Run. The zero value is an empty index ready
// for use; a Keys is safe for concurrent use. No key can predate it, so
// Legacy is always 0.
type Keys struct {
	mu     sync.Mutex
	claims map[string]logport.KeyClaim // by key; each carries its revision
	rev    uint64                      // the last revision given
}

// NewKeys returns an empty key index.
func NewKeys() *Keys { return &Keys{} }

// put stores c under key at a new revision and returns it (k.mu held).
func (k *Keys) put(key string, c logport.KeyClaim) logport.KeyClaim {
	if k.claims == nil {
		k.claims = make(map[string]logport.KeyClaim)
	}
	k.rev++
	c.Rev = k.rev
	k.claims[key] = c
	return c
}

// Claim claims key for c.Session. When the key is claimed already, it
// returns the claim in force and claimed false.
func (k *Keys) Claim(ctx context.Context, key string, c logport.KeyClaim) (got logport.KeyClaim, claimed bool, err error) {
	if err := ctx.Err(); err != nil {
		return got, false, fmt.Errorf("claim idempotency key %s: %w", key, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if cur, ok := k.claims[key]; ok {
		return cur, false, nil
	}
	return k.put(key, c), true, nil
}

// Get returns the claim of key; found is false when there is none.
func (k *Keys) Get(ctx context.Context, key string) (c logport.KeyClaim, found bool, err error) {
	if err := ctx.Err(); err != nil {
		return c, false, fmt.Errorf("get idempotency key %s: %w", key, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	c, found = k.claims[key]
	return c, found, nil
}

// Settle records where the claimed key's events are (first, count). When
// the claim changed since c was read: settled for the session already,
// it is done; still pending, it is settled; gone, the key is claimed
// settled; claimed by another session, it fails with a KeyInUseError.
// A claim never stored (Rev 0) is stored settled.
func (k *Keys) Settle(ctx context.Context, key string, c logport.KeyClaim, first uint64, count int) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("settle idempotency key %s at %d: %w", key, first, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	cur, ok := k.claims[key]
	switch {
	case !ok && c.Rev != 0:
		c = logport.KeyClaim{Session: c.Session} // released meanwhile: the key is claimed settled
	case !ok, cur.Rev == c.Rev:
	case cur.Session != c.Session:
		return fmt.Errorf("settle idempotency key %s at %d: %w", key, first, &logport.KeyInUseError{Key: key, Session: c.Session})
	case !cur.Pending():
		return nil
	default:
		c = cur
	}
	c.First, c.Count = first, count
	k.put(key, c)
	return nil
}

// Advance moves a pending claim's After to after. A claim changed since c
// was read is left as it is, with an error.
func (k *Keys) Advance(ctx context.Context, key string, c logport.KeyClaim, after uint64) error {
	if !c.Pending() || after <= c.After {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.unchanged(ctx, key, c); err != nil {
		return fmt.Errorf("advance idempotency key %s to %d: %w", key, after, err)
	}
	c.After = after
	k.put(key, c)
	return nil
}

// Release drops a pending claim whose append stored nothing. A claim
// changed since c was read is left as it is, with an error.
func (k *Keys) Release(ctx context.Context, key string, c logport.KeyClaim) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.unchanged(ctx, key, c); err != nil {
		return fmt.Errorf("release idempotency key %s: %w", key, err)
	}
	delete(k.claims, key)
	return nil
}

// unchanged reports an error unless key holds c at its revision (k.mu
// held).
func (k *Keys) unchanged(ctx context.Context, key string, c logport.KeyClaim) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if cur, ok := k.claims[key]; !ok || cur.Rev != c.Rev {
		return fmt.Errorf("the claim is at revision %d, not %d", cur.Rev, c.Rev)
	}
	return nil
}

// Legacy is 0: no key predates an in-memory index.
func (k *Keys) Legacy(time.Time) uint64 { return 0 }

// ForgetSession drops every key claimed for session and returns how many
// it dropped.
func (k *Keys) ForgetSession(ctx context.Context, session string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("forget idempotency keys of %q: %w", session, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for key, c := range k.claims {
		if c.Session == session {
			delete(k.claims, key)
			n++
		}
	}
	return n, nil
}
