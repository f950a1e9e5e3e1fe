package jetstream

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
)

// ErrInvalidSession is matched by a session id that cannot be a single
// subject token: the log checks ids with the one rule,
// events.ValidateSessionID, and this is its sentinel. It is
// events.ErrInvalidSession itself, kept so that callers matching it keep
// compiling; new code matches events.ErrInvalidSession.
var ErrInvalidSession = events.ErrInvalidSession

// IsCASConflict reports whether err is JetStream's refusal of an
// expected-last-sequence header: 10071 (the subject or stream has moved
// on) or 10164 (a replicated stream's leader refuses a CAS publish to a
// subject that already has a write in flight). Both mean "read again and
// retry"; a replicated stream or KV bucket answers 10164 where a single
// server answers 10071, so matching one code alone misses conflicts on a
// cluster.
func IsCASConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == codeWrongLastSeq || apiErr.ErrorCode == codeWrongLastSeqConstant)
}
