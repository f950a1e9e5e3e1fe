package service

// Pseudonymous actors: the engine seals the actor of every event it
// writes through an ActorSealer (plain, keyed hash, or encrypted under a
// per-person key that can be destroyed), and reads it back through
// RevealActor. Engine-internal actors stay plain.

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolintent/engine/actor"
)

// ActorSealer turns an actor into the form the log stores, and back.
// *actor.Sealer implements it. Both methods may run concurrently.
type ActorSealer interface {
	// Seal returns the stored form of a non-empty actor.
	Seal(ctx context.Context, actor string) (string, error)
	// Reveal returns the actor a stored form names (a hash token comes
	// back as stored); an error matching ErrActorErased when the person
	// was forgotten.
	Reveal(ctx context.Context, stored string) (string, error)
}

// ErrActorErased is matched by a reveal of an actor whose key was
// destroyed (engine actor forget).
var ErrActorErased = actor.ErrErased

// ErasedActor is what RevealActor shows for the actor of a forgotten
// person.
const ErasedActor = "(erased)"

var _ ActorSealer = (*actor.Sealer)(nil)

// SetActorSealer makes the engine seal the actor of every event it
// writes from now on; nil stores actors as given (the default).
func (e *Engine) SetActorSealer(s ActorSealer) {
	if s == nil {
		e.sealer.Store(nil)
		return
	}
	e.sealer.Store(&s)
}

func (e *Engine) getSealer() ActorSealer {
	if p := e.sealer.Load(); p != nil {
		return *p
	}
	return nil
}

// internalActor reports the actors the engine writes as itself: they name
// no person and stay plain in every mode, so an audit reads them as they
// are.
func internalActor(a string) bool {
	return a == "" || a == Anonymous || a == RetentionOrigin.Actor
}

// sealActor is the stored form of a writer's actor.
func (e *Engine) sealActor(ctx context.Context, a string) (string, error) {
	if actor.Sealed(a) {
		// Only the engine seals: a writer sending a sealed form could pass
		// a copied ciphertext or token off as another person's.
		return "", fmt.Errorf("%w: actor %q has the form the engine stores sealed actors in (h1:, e1:); send the person's own id", ErrInvalid, a)
	}
	s := e.getSealer()
	if s == nil || internalActor(a) {
		return a, nil
	}
	out, err := s.Seal(ctx, a)
	if errors.Is(err, actor.ErrTooLong) {
		return "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err != nil {
		return "", fmt.Errorf("seal the actor: %w", err)
	}
	return out, nil
}

// RevealActor returns the actor for display of a stored one: plain and
// hash-token actors as stored, an encrypted one decrypted, ErasedActor
// for a forgotten person, and the stored form when it cannot be read
// (no sealer, wrong key file, key store unreachable). It never fails:
// history shows what it can.
func (e *Engine) RevealActor(ctx context.Context, stored string) string {
	return e.actorRevealer(ctx)(stored)
}

// actorRevealer returns RevealActor for one read, such as a page of
// history: it reads each person's key once for the read, not once per
// entry (a 100-entry page of one person's events made 100 key-store
// reads).
func (e *Engine) actorRevealer(ctx context.Context) func(stored string) string {
	s := e.getSealer()
	if s == nil {
		return func(stored string) string { return stored }
	}
	reveal := s.Reveal
	if p, ok := s.(interface{ Revealer() *actor.Revealer }); ok {
		reveal = p.Revealer().Reveal
	}
	return func(stored string) string {
		if !actor.Sealed(stored) {
			return stored
		}
		a, err := reveal(ctx, stored)
		switch {
		case errors.Is(err, ErrActorErased):
			return ErasedActor
		case err != nil:
			return stored
		}
		return a
	}
}
