package resolver

import "errors"

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
	// as an override kind outside the OverrideKind constants.
	ErrInvalidRequest = errors.New("invalid request")
)
