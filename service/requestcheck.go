package service

// The checks every request passes before its operation runs: which
// channels may delete and purge, and the session, token and actor rules.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/wire"
)

// DefaultEraseChannel is the channel allowed to purge sessions' events
// when ChannelRules.Erase is empty.
const DefaultEraseChannel = "ops"

// ChannelRules say which channels may delete sessions and purge their
// events.
type ChannelRules struct {
	// Erase is the one channel that may purge events: erase (a delete
	// with erase) and the operations that purge (wire.Operation.Purges,
	// compaction).
	Erase string
	// Delete, when set, are the channels besides Erase that may delete
	// sessions; empty, every writing channel may.
	Delete []string
}

// Check refuses, with a forbidden *wire.Error, a request of op from
// channel that the rules do not allow, before anything is written.
func (c ChannelRules) Check(op wire.Operation, req any, channel string) error {
	d, isDelete := req.(*wire.DeleteRequest)
	if (op.Purges || isDelete && d.Erase) && channel != c.Erase {
		what := "erase"
		if op.Purges {
			what = "compact"
		}
		return &wire.Error{Status: http.StatusForbidden, Code: wire.CodeForbidden,
			Message: fmt.Sprintf("channel %q may not %s sessions: only the erase channel %q may (engine serve --erase-channel)", channel, what, c.Erase)}
	}
	if isDelete && len(c.Delete) > 0 && channel != c.Erase && !slices.Contains(c.Delete, channel) {
		return &wire.Error{Status: http.StatusForbidden, Code: wire.CodeForbidden,
			Message: fmt.Sprintf("channel %q may not delete sessions: only %s and the erase channel %q may (engine serve --delete-channel)", channel, strings.Join(c.Delete, ", "), c.Erase)}
	}
	return nil
}

// CheckRequest validates the fields every operation's request shares
// (session, provider, actor) and fills o.Actor from the body's "actor"
// when the transport gave none.
func CheckRequest(req any, o *Origin) error {
	if s, ok := wire.FieldString(req, "session"); ok {
		if err := ValidSession(s); err != nil {
			return err
		}
	}
	if p, ok := wire.FieldString(req, "provider"); ok && p != "" && !slices.Contains(Providers, p) {
		return wire.BadRequest("provider %q is unknown: use one of %s", clip.String(p, clip.Max), strings.Join(Providers, ", "))
	}
	if o.Actor == "" {
		o.Actor, _ = wire.FieldString(req, "actor")
	}
	return ValidActor(o.Actor)
}

// ValidSession checks a request's session id, naming it.
func ValidSession(s string) error {
	if s == "" {
		return wire.BadRequest(`field "session" is required: a session id of 1 to 128 [A-Za-z0-9_-]`)
	}
	if err := events.ValidateSessionID(s); err != nil {
		return wire.BadRequest("session %q: %v", clip.String(s, clip.Max), err)
	}
	return nil
}

// ValidToken checks a channel name (what says which): one NATS subject
// token of [A-Za-z0-9_-], at most 64 bytes.
func ValidToken(what, s string) error {
	if len(s) == 0 || len(s) > 64 {
		return wire.BadRequest("%s %q has %d bytes, want 1 to 64 of [A-Za-z0-9_-]", what, clip.String(s, clip.Max), len(s))
	}
	if i := events.BadTokenByte(s); i >= 0 {
		return wire.BadRequest("%s %q has byte %q at %d, use only [A-Za-z0-9_-]", what, clip.String(s, clip.Max), s[i], i)
	}
	return nil
}

// ValidActor checks an actor: valid UTF-8 of at most events.MaxTextLen
// bytes.
func ValidActor(s string) error {
	if len(s) > events.MaxTextLen {
		return wire.BadRequest("actor has %d bytes, at most %d allowed", len(s), events.MaxTextLen)
	}
	if !utf8.ValidString(s) {
		return wire.BadRequest("actor %q is not valid UTF-8", clip.String(s, clip.Max))
	}
	return nil
}
