// Package intent holds the one definition of what a session stores about
// its tools and of a per-turn override: Intent and Override,
// with Clone, Equal and Fingerprint. Every layer uses these types: the
// events record them, the resolver expands them, the aggregate folds them
// and the wire carries them.
//
// The package is a leaf: it imports only the standard library and
// internal/clip (itself standard library only). Its
// struct tags are part of the wire: the msgpack keys are the keys events
// and snapshots are written with, the JSON names are the API's.
package intent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/toolintent/engine/internal/clip"
)

// ErrInvalid reports an override kind that is not one of the constants.
// resolver.ErrInvalidRequest is this error.
var ErrInvalid = errors.New("invalid request")

// Intent is what a session stores about its tools: nothing else.
// The zero value means "follow the profile".
type Intent struct {
	// Enabled is the master switch: true, false, or nil (follow profile).
	Enabled *bool `json:"enabled,omitempty" msgpack:"enabled"`
	// WebSearch is the web_search overlay: true adds web_search to
	// the expansion when it lacks it; false and nil (unset) add nothing and
	// remove nothing. A UI may store false as its "off" default.
	WebSearch *bool `json:"web_search,omitempty" msgpack:"web_search"`
	// Preset is the chosen preset name, "" when unset.
	Preset string `json:"preset,omitempty" msgpack:"preset"`
	// Disabled lists names switched off by hand, kept sorted.
	Disabled []string `json:"disabled,omitempty" msgpack:"disabled"`
	// Picked is an explicit, short, user-curated list in the user's order,
	// or nil when unset.
	Picked []string `json:"picked,omitempty" msgpack:"picked"`
}

// NumFields is the number of fields of Intent; see Intent.Field.
const NumFields = 5

// Field returns the msgpack key of field i of Intent (0 <= i < NumFields,
// in struct and wire order) and the address of that field in in: a **bool
// (a switch: true, false or nil), a *string ("" when unset) or a *[]string
// (a list of names or patterns, nil when unset). Clone, Alike and
// Fingerprint, and the msgpack codecs of events and of stored views, go
// through it, so a new intent field is its struct field and one case here.
// For i out of range it returns "" and nil.
func (in *Intent) Field(i int) (string, any) {
	switch i {
	case 0:
		return "enabled", &in.Enabled
	case 1:
		return "web_search", &in.WebSearch
	case 2:
		return "preset", &in.Preset
	case 3:
		return "disabled", &in.Disabled
	case 4:
		return "picked", &in.Picked
	}
	return "", nil
}

// Clone returns a deep copy of in: no pointer or slice is shared, and a
// nil list stays nil while an empty one stays empty.
func (in Intent) Clone() Intent {
	for i := range NumFields {
		switch p := field(&in, i).(type) {
		case **bool:
			*p = CloneBool(*p)
		case *[]string:
			*p = slices.Clone(*p)
		}
	}
	return in
}

// Equal reports whether in and o hold the same intent field by field:
// switches by value, lists element by element, and Picked nil apart from
// an empty Picked (they resolve alike, but the fold keeps the difference).
func (in Intent) Equal(o Intent) bool {
	return in.Alike(&o) && (in.Picked == nil) == (o.Picked == nil)
}

// Alike reports whether in and o resolve alike: Equal, except that a nil
// and an empty list are the same (Fingerprint hashes them alike too). The
// resolver's cache compares requests with it.
func (in *Intent) Alike(o *Intent) bool {
	for i := range NumFields {
		var same bool
		switch a := field(in, i).(type) {
		case **bool:
			same = eqBool(*a, *field(o, i).(**bool))
		case *string:
			same = *a == *field(o, i).(*string)
		case *[]string:
			same = slices.Equal(*a, *field(o, i).(*[]string))
		}
		if !same {
			return false
		}
	}
	return true
}

// field is the address of field i of in (see Intent.Field).
func field(in *Intent, i int) any {
	_, p := in.Field(i)
	return p
}

// FNV-1a 64 parameters of Fingerprint.
const (
	// FingerprintSeed is the state to start a Fingerprint chain from.
	FingerprintSeed = 14695981039346656037
	fnvPrime64      = 1099511628211
)

// Fingerprint folds in into the FNV-1a 64 state h (start from
// FingerprintSeed) and returns the new state. Every field counts, with
// lengths as separators; a nil and an empty list hash alike, as they
// resolve alike. It does not allocate.
func (in *Intent) Fingerprint(h uint64) uint64 {
	// The switches first, two bits each in one byte, then the other
	// fields in order.
	var switches uint64
	for i := range NumFields {
		if p, ok := field(in, i).(**bool); ok {
			switches = switches<<2 | tri(*p)
		}
	}
	h = fnvByte(h, byte(switches))
	for i := range NumFields {
		switch p := field(in, i).(type) {
		case *string:
			h = fnvString(h, *p)
		case *[]string:
			h = fnvList(h, *p)
		}
	}
	return h
}

// OverrideKind says which form a per-turn override takes.
type OverrideKind uint8

const (
	// OverrideNone means no per-turn override: the session intent applies.
	OverrideNone OverrideKind = iota
	// OverrideEmpty is an empty list: no tools this turn.
	OverrideEmpty
	// OverrideIntent is an intent, expanded live.
	OverrideIntent
	// OverrideNames is a non-empty list: exactly those names, in order.
	OverrideNames
)

var overrideKindNames = [...]string{"none", "empty", "intent", "names"}

// String returns "none", "empty", "intent" or "names", or
// "OverrideKind(N)" for a value outside the constants.
func (k OverrideKind) String() string {
	if int(k) < len(overrideKindNames) {
		return overrideKindNames[k]
	}
	return "OverrideKind(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText encodes the kind as its String name.
func (k OverrideKind) MarshalText() ([]byte, error) {
	if int(k) >= len(overrideKindNames) {
		return nil, fmt.Errorf("%w: override kind %d: use one of none, empty, intent, names", ErrInvalid, k)
	}
	return []byte(overrideKindNames[k]), nil
}

// UnmarshalText decodes "none", "empty", "intent" or "names" ("" is none).
func (k *OverrideKind) UnmarshalText(b []byte) error {
	s := string(b)
	if s == "" {
		*k = OverrideNone
		return nil
	}
	for i, n := range overrideKindNames {
		if s == n {
			*k = OverrideKind(i)
			return nil
		}
	}
	return fmt.Errorf("%w: override kind %q: use one of none, empty, intent, names", ErrInvalid, s)
}

// Override is a per-turn override. It wins over the session intent.
// Its zero value (Kind OverrideNone) means "no override".
type Override struct {
	// Kind selects the form; the other fields are read only for their form.
	Kind OverrideKind `json:"kind"`
	// Intent is expanded live when Kind is OverrideIntent.
	Intent Intent `json:"intent,omitzero"`
	// Allowed, with Kind OverrideIntent, filters DEFAULT_TOOLS (it
	// filters the defaults, never the full set, and adds nothing). Empty
	// means no filter. With an intent whose base is not the defaults
	// (enabled=false, picked, a preset, a profile's tools or preset) it is
	// refused with ErrInvalidRequest rather than ignored.
	Allowed []string `json:"allowed,omitempty"`
	// Names, with Kind OverrideNames, are exactly the tools of the turn, in
	// the user's order. An empty Names list means no tools.
	Names []string `json:"names,omitempty"`
}

// overrideError is an override object refused by UnmarshalJSON: its text
// is the whole message (the API sends it as is) and it matches ErrInvalid.
type overrideError string

func (e overrideError) Error() string { return string(e) }

func (e overrideError) Is(target error) bool { return target == ErrInvalid }

// UnmarshalJSON decodes the API's override object strictly: an
// unknown field is refused, "kind" is required and must name a kind, and
// each kind takes only its own fields ("none" and "empty" none, "intent"
// intent and allowed, "names" a non-empty names). A refusal matches
// ErrInvalid and its text is the message the API sends. null leaves o as
// is. Tool names are checked by the engine, not here.
func (o *Override) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var raw struct {
		Kind    *string  `json:"kind"`
		Intent  *Intent  `json:"intent"`
		Allowed []string `json:"allowed"`
		Names   []string `json:"names"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	if raw.Kind == nil || *raw.Kind == "" {
		return overrideError(`override: field "kind" is required: use one of none, empty, intent, names`)
	}
	var k OverrideKind
	if err := k.UnmarshalText([]byte(*raw.Kind)); err != nil {
		return overrideError(fmt.Sprintf("override kind %q is unknown: use one of none, empty, intent, names", clip.String(*raw.Kind, clip.Max)))
	}
	out := Override{Kind: k}
	switch k {
	case OverrideNone, OverrideEmpty:
		if raw.Intent != nil || raw.Allowed != nil || raw.Names != nil {
			return overrideError(fmt.Sprintf("override kind %q takes no other field (got intent, allowed or names)", k))
		}
	case OverrideIntent:
		if raw.Names != nil {
			return overrideError(`override kind "intent" takes intent and allowed, not names: use kind "names" for a list`)
		}
		if raw.Intent != nil {
			out.Intent = *raw.Intent
		}
		out.Allowed = raw.Allowed
	case OverrideNames:
		if raw.Intent != nil || raw.Allowed != nil {
			return overrideError(`override kind "names" takes names only, not intent or allowed: use kind "intent"`)
		}
		if len(raw.Names) == 0 {
			return overrideError(`override kind "names" needs at least one name: use kind "empty" for no tools`)
		}
		out.Names = raw.Names
	}
	*o = out
	return nil
}

// Clone returns a deep copy of o; nil lists stay nil.
func (o Override) Clone() Override {
	return Override{Kind: o.Kind, Intent: o.Intent.Clone(), Allowed: slices.Clone(o.Allowed), Names: slices.Clone(o.Names)}
}

// Equal reports whether o and p are the same override field by field
// (Intent as Intent.Equal; Allowed and Names element by element, nil
// apart from empty).
func (o Override) Equal(p Override) bool {
	return o.Kind == p.Kind && o.Intent.Equal(p.Intent) &&
		slices.Equal(o.Allowed, p.Allowed) && (o.Allowed == nil) == (p.Allowed == nil) &&
		slices.Equal(o.Names, p.Names) && (o.Names == nil) == (p.Names == nil)
}

// Fingerprint folds o into the FNV-1a 64 state h, like Intent.Fingerprint.
func (o *Override) Fingerprint(h uint64) uint64 {
	h = fnvByte(h, byte(o.Kind))
	h = o.Intent.Fingerprint(h)
	h = fnvList(h, o.Allowed)
	return fnvList(h, o.Names)
}

// FingerprintString folds s into the FNV-1a 64 state h with its length as
// a separator, for callers that fingerprint an intent with other fields.
func FingerprintString(h uint64, s string) uint64 { return fnvString(h, s) }

// CloneBool returns a copy of the switch p: nil stays nil, a set value
// is a new pointer.
func CloneBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func eqBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// Tri-state codes of a *bool in a fingerprint.
const (
	triUnset = iota
	triNo
	triYes
)

func tri(p *bool) uint64 {
	switch {
	case p == nil:
		return triUnset
	case *p:
		return triYes
	default:
		return triNo
	}
}

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime64 }

func fnvUint(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h = fnvByte(h, byte(v>>(8*i)))
	}
	return h
}

func fnvString(h uint64, s string) uint64 {
	h = fnvUint(h, uint64(len(s)))
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}

func fnvList(h uint64, list []string) uint64 {
	h = fnvUint(h, uint64(len(list)))
	for _, s := range list {
		h = fnvString(h, s)
	}
	return h
}

// InsertSorted adds name to the sorted set xs, the form of Disabled. It
// copies on write, so a clone's lists are never written through.
func InsertSorted(xs []string, name string) []string {
	i, found := slices.BinarySearch(xs, name)
	if found {
		return xs
	}
	out := make([]string, 0, len(xs)+1)
	out = append(out, xs[:i]...)
	out = append(out, name)
	return append(out, xs[i:]...)
}

// RemoveSorted removes name from the sorted set xs, copying on write; the
// empty set is nil.
func RemoveSorted(xs []string, name string) []string {
	i, found := slices.BinarySearch(xs, name)
	if !found {
		return xs
	}
	if len(xs) == 1 {
		return nil
	}
	out := make([]string, 0, len(xs)-1)
	out = append(out, xs[:i]...)
	return append(out, xs[i+1:]...)
}
