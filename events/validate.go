package events

import (
	"fmt"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/internal/toolname"
)

// MaxSessionLen bounds a session id, in bytes.
const MaxSessionLen = 128

// ValidateSessionID reports whether s can be a session id: 1 to
// MaxSessionLen bytes of [A-Za-z0-9_-], so that it is exactly one NATS
// subject token (no dots, no wildcards, no spaces). The error matches
// ErrInvalidSession. It is the one session-id rule of the engine.
func ValidateSessionID(s string) error {
	if len(s) == 0 || len(s) > MaxSessionLen {
		return fmt.Errorf("session id %q has %d bytes, want 1 to %d of [A-Za-z0-9_-]: %w", clip.String(s, clip.Max), len(s), MaxSessionLen, ErrInvalidSession)
	}
	if i := BadTokenByte(s); i >= 0 {
		return fmt.Errorf("session id %q has byte %q at %d, use only [A-Za-z0-9_-]: %w", clip.String(s, clip.Max), s[i], i, ErrInvalidSession)
	}
	return nil
}

// BadTokenByte returns the index of the first byte of s outside
// [A-Za-z0-9_-], the bytes of a subject token the engine builds (session
// ids, channels, prefixes, durable names), or -1 when there is none. It is
// the one token byte rule; callers add their own length bounds.
func BadTokenByte(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return i
		}
	}
	return -1
}

// ValidToken reports whether s is a non-empty subject token of
// [A-Za-z0-9_-] (no length bound beyond non-empty).
func ValidToken(s string) bool { return s != "" && BadTokenByte(s) < 0 }

// ValidateToolName reports whether name matches toolname.Pattern
// (^[A-Za-z][A-Za-z0-9_-]{0,63}$), the form of tool and preset names. The
// error matches ErrInvalidName.
func ValidateToolName(name string) error {
	if !validName(name) {
		return fmt.Errorf("name %q does not match %s, use letters, digits, '_' or '-', starting with a letter: %w", clip.String(name, clip.Max), toolname.Pattern, ErrInvalidName)
	}
	return nil
}

// ValidateToolPattern reports whether s is a tool name or a name pattern
// (toolname.ValidPattern): the entries of the disabled and picked lists,
// which may say mcp__github__* for every tool of a server. The error
// matches ErrInvalidName.
func ValidateToolPattern(s string) error {
	if !toolname.ValidPattern(s) {
		return fmt.Errorf("name %q is not %s: %w", clip.String(s, clip.Max), toolname.PatternRule, ErrInvalidName)
	}
	return nil
}

// validName is the shared tool-name rule.
func validName(s string) bool { return toolname.Valid(s) }

// Validate checks the envelope with the rules Decode applies to a
// version-2 event: a valid ULID, a valid session id, a non-empty channel and
// actor (version 2 records who wrote every event), a known payload whose
// type matches Type (an empty Type is accepted and means the payload's),
// Version 0 or SchemaVersion, bounded text, and valid, bounded tool-name
// lists.
func (e Envelope) Validate() error { return e.validate(true) }

// validate is Validate; requireOrigin is false only for events upcast from
// version 1, which did not record channel and actor.
func (e Envelope) validate(requireOrigin bool) error {
	if _, err := ulid.ParseStrict(e.ID); err != nil {
		return fmt.Errorf("event id %q is not a ULID (26 chars of Crockford base32), generate one with NewID: %w", clip.String(e.ID, clip.Max), ErrInvalidEvent)
	}
	if err := ValidateSessionID(e.Session); err != nil {
		return err
	}
	if err := validateText("channel", e.Channel); err != nil {
		return err
	}
	if err := validateText("actor", e.Actor); err != nil {
		return err
	}
	if e.Version != 0 && e.Version != SchemaVersion {
		return fmt.Errorf("envelope version %d, only version %d (or 0) can be written: %w", e.Version, SchemaVersion, ErrInvalidEvent)
	}
	if e.Payload == nil {
		return fmt.Errorf("envelope %s has no payload, set Payload: %w", e.ID, ErrInvalidEvent)
	}
	p, ok := deref(e.Payload)
	if !ok {
		return fmt.Errorf("payload %T is not an events payload type (or a nil pointer): %w", e.Payload, ErrInvalidEvent)
	}
	if e.Type != "" && e.Type != p.EventType() {
		return fmt.Errorf("envelope type %q does not match payload type %q, leave Type empty or make them agree: %w", e.Type, p.EventType(), ErrInvalidEvent)
	}
	if err := validatePayload(p); err != nil {
		return err
	}
	if requireOrigin && (e.Channel == "" || e.Actor == "") {
		return fmt.Errorf("event %s has channel %q and actor %q: a version-2 event names both (who wrote it), set them: %w", clip.String(e.ID, clip.Max), e.Channel, e.Actor, ErrInvalidEvent)
	}
	return nil
}

func validateText(field, s string) error {
	if len(s) > MaxTextLen {
		return fmt.Errorf("%s has %d bytes, at most %d allowed: %w", field, len(s), MaxTextLen, ErrInvalidEvent)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s %q is not valid UTF-8: %w", field, clip.String(s, clip.Max), ErrInvalidEvent)
	}
	return nil
}

// validateTexts checks texts given as field, value pairs, in order.
func validateTexts(fieldValues ...string) error {
	for i := 0; i+1 < len(fieldValues); i += 2 {
		if err := validateText(fieldValues[i], fieldValues[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func validateNames(field string, names []string) error {
	if len(names) > MaxListLen {
		return fmt.Errorf("%s has %d names, at most %d allowed: %w", field, len(names), MaxListLen, ErrInvalidEvent)
	}
	for _, n := range names {
		if err := ValidateToolName(n); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
	}
	return nil
}

// validatePayload checks a payload in value form.
func validatePayload(p Payload) error {
	r := payloadByType[p.EventType()]
	if r == nil {
		return fmt.Errorf("payload %T is not an events payload type: %w", p, ErrInvalidEvent)
	}
	return r.validate(p)
}

func validatePreset(v PresetChosen) error {
	if v.Preset == "" {
		return nil
	}
	if err := ValidateToolName(v.Preset); err != nil {
		return fmt.Errorf("preset: %w", err)
	}
	return nil
}

// validatePattern checks a tool name or pattern.
func validatePattern(field, name string) error {
	if err := ValidateToolPattern(name); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// validatePatterns checks a bounded list of tool names or patterns, the
// field prefix.name (name alone for prefix ""); the name is formatted only
// for an error.
func validatePatterns(prefix, name string, names []string) error {
	field := func() string {
		if prefix == "" {
			return name
		}
		return prefix + "." + name
	}
	if len(names) > MaxListLen {
		return fmt.Errorf("%s has %d names, at most %d allowed: %w", field(), len(names), MaxListLen, ErrInvalidEvent)
	}
	for _, n := range names {
		if err := ValidateToolPattern(n); err != nil {
			return fmt.Errorf("%s: %w", field(), err)
		}
	}
	return nil
}

func validateTurnEnded(v TurnEnded) error {
	if v.Checkpoint == nil {
		return nil
	}
	if err := validateCheckpoint(*v.Checkpoint); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func validateGrant(v PermissionGranted) error {
	if err := ValidateToolName(v.Tool); err != nil {
		return fmt.Errorf("tool: %w", err)
	}
	if v.Scope != ScopeSession && v.Scope != ScopeOnce {
		return fmt.Errorf("scope %q: want %q or %q: %w", v.Scope, ScopeSession, ScopeOnce, ErrInvalidEvent)
	}
	if v.By == "" {
		return fmt.Errorf("by is empty, name who answered: %w", ErrInvalidEvent)
	}
	return validateText("by", v.By)
}

func validateEvicted(v DeferredEvicted) error {
	if len(v.Names) == 0 {
		return fmt.Errorf("names is empty, list the evicted tools: %w", ErrInvalidEvent)
	}
	if err := validateNames("names", v.Names); err != nil {
		return err
	}
	return validateText("reason", v.Reason)
}

// validateCheckpoint checks a CheckpointRecorded payload, or the
// checkpoint of a TurnEnded: bounded text, valid, bounded lists.
func validateCheckpoint(v CheckpointRecorded) error {
	if err := validateNames("loaded_deferred_tools", v.Loaded); err != nil {
		return err
	}
	if err := validateTexts("contract_hash", v.ContractHash, "registry_version", v.RegistryVersion); err != nil {
		return err
	}
	if len(v.Contract) > MaxContractLen {
		return fmt.Errorf("contract has %d entries, at most %d allowed: %w", len(v.Contract), MaxContractLen, ErrInvalidEvent)
	}
	for i, c := range v.Contract {
		if err := ValidateToolName(c.Name); err != nil {
			return fmt.Errorf("contract[%d].name: %w", i, err)
		}
		if err := validateText("contract hash", c.Hash); err != nil {
			return fmt.Errorf("contract[%d]: %w", i, err)
		}
	}
	return nil
}
