package resolver

import (
	"errors"

	"github.com/toolintent/engine/intent"
)

// Sentinel errors; match them with errors.Is.
var (
	// ErrInvalidRegistry is wrapped by every registry load problem.
	ErrInvalidRegistry = errors.New("invalid registry")
	// ErrUnknownPreset is returned when an intent names a preset the
	// registry does not define.
	ErrUnknownPreset = errors.New("unknown preset")
	// ErrUnknownProfile is returned when a request names an agent profile
	// the registry does not define and the expansion needs it.
	ErrUnknownProfile = errors.New("unknown profile")
	// ErrInvalidRequest is returned for a request that has no meaning, such
	// as an override kind outside the OverrideKind constants. It is
	// intent.ErrInvalid, so the kind's text decoding matches it too.
	ErrInvalidRequest = intent.ErrInvalid
)
