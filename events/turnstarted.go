package events

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/toolintent/engine/intent"
	"github.com/toolintent/engine/internal/clip"
)

// TurnStarted on the wire: a msgpack map whose keys are written in
// this order, each only when set, so that an event without a recorded
// request is byte for byte the older form {"turn"}:
//
//	turn, intent{enabled, web_search, preset, disabled, picked}, profile,
//	override{kind, intent{...}, allowed, names}, registry_version,
//	contract_hash, provider

var turnStartedCodec = codec[TurnStarted]{
	uintAt("turn", func(p *TurnStarted) *uint64 { return &p.Turn }),
	ptrAt("intent", intentCodec, func(p *TurnStarted) **intent.Intent { return &p.Intent }).
		omitted(func(p *TurnStarted) bool { return p.Intent == nil }),
	textAt("profile", func(p *TurnStarted) *string { return &p.Profile }).
		omitted(func(p *TurnStarted) bool { return p.Profile == "" }),
	ptrAt("override", codec[TurnOverride]{
		nameAt("kind", func(p *TurnOverride) *string { return &p.Kind }),
		ptrAt("intent", intentCodec, func(p *TurnOverride) **intent.Intent { return &p.Intent }).
			omitted(func(p *TurnOverride) bool { return p.Intent == nil }),
		namesAt("allowed", func(p *TurnOverride) *[]string { return &p.Allowed }).
			omitted(func(p *TurnOverride) bool { return p.Allowed == nil }),
		namesAt("names", func(p *TurnOverride) *[]string { return &p.Names }).
			omitted(func(p *TurnOverride) bool { return p.Names == nil }),
	}, func(p *TurnStarted) **TurnOverride { return &p.Override }).
		omitted(func(p *TurnStarted) bool { return p.Override == nil }).readLast(),
	textAt("registry_version", func(p *TurnStarted) *string { return &p.RegistryVersion }).
		omitted(func(p *TurnStarted) bool { return p.RegistryVersion == "" }),
	textAt("contract_hash", func(p *TurnStarted) *string { return &p.ContractHash }).
		omitted(func(p *TurnStarted) bool { return p.ContractHash == "" }),
	textAt("provider", func(p *TurnStarted) *string { return &p.Provider }).
		omitted(func(p *TurnStarted) bool { return p.Provider == "" }),
}

// mapField reads a nested map; absent or nil is nil.
func mapField(m map[string]any, key string) (map[string]any, error) {
	raw, ok := m[key]
	if !ok || raw == nil {
		return nil, nil
	}
	out, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("key %q holds %s, want a map: %w", key, kind(raw), ErrMalformed)
	}
	return out, nil
}

// validateTurnStarted checks the shape of a TurnStarted's recorded request:
// names and patterns well formed, texts bounded.
func validateTurnStarted(v TurnStarted) error {
	if err := validateTexts("profile", v.Profile, "registry_version", v.RegistryVersion,
		"provider", v.Provider, "contract_hash", v.ContractHash); err != nil {
		return err
	}
	if err := validateTurnIntent("intent", v.Intent); err != nil {
		return err
	}
	if o := v.Override; o != nil {
		if err := validateTurnIntent("override.intent", o.Intent); err != nil {
			return err
		}
		if err := validatePatterns("override", "allowed", o.Allowed); err != nil {
			return err
		}
		return validatePatterns("override", "names", o.Names)
	}
	return nil
}

func validateTurnIntent(field string, in *intent.Intent) error {
	if in == nil {
		return nil
	}
	if in.Preset != "" {
		if err := ValidateToolName(in.Preset); err != nil {
			return fmt.Errorf("%s.preset: %w", field, err)
		}
	}
	if err := validatePatterns(field, "disabled", in.Disabled); err != nil {
		return err
	}
	return validatePatterns(field, "picked", in.Picked)
}

// checkTurnStarted is the fold rule of a TurnStarted's recorded request
// : the registry version and the contract hash come
// together, the hash is a SHA-256 in hex, the override is one of its
// forms with only its own fields, and no list in it is an expanded tool
// list (a picked list or override names longer than MaxPicked, or naming
// a tool twice).
func checkTurnStarted(v TurnStarted) error {
	if (v.RegistryVersion == "") != (v.ContractHash == "") {
		return fmt.Errorf("TurnStarted records registry_version %q and contract_hash %q: record both (the request's registry and its contract) or neither: %w", clip.String(v.RegistryVersion, clip.Max), clip.String(v.ContractHash, clip.Max), ErrBrokenRule)
	}
	if v.ContractHash != "" && !ValidHash(v.ContractHash) {
		return fmt.Errorf("TurnStarted contract_hash %q is not %d lower-case hex digits (a SHA-256): %w", clip.String(v.ContractHash, clip.Max), HashLen, ErrBrokenRule)
	}
	if err := checkCurated("TurnStarted intent.picked", picked(v.Intent)); err != nil {
		return err
	}
	o := v.Override
	if o == nil {
		return nil
	}
	switch o.Kind {
	case OverrideEmpty:
		if o.Intent != nil || o.Allowed != nil || o.Names != nil {
			return fmt.Errorf("TurnStarted override kind %q carries intent, allowed or names; an empty override has none: %w", o.Kind, ErrBrokenRule)
		}
	case OverrideIntent:
		if o.Names != nil {
			return fmt.Errorf("TurnStarted override kind %q carries names; names belong to kind %q: %w", o.Kind, OverrideNames, ErrBrokenRule)
		}
		if err := checkCurated("TurnStarted override.intent.picked", picked(o.Intent)); err != nil {
			return err
		}
	case OverrideNames:
		if o.Intent != nil || o.Allowed != nil || len(o.Names) == 0 {
			return fmt.Errorf("TurnStarted override kind %q needs names and nothing else: %w", o.Kind, ErrBrokenRule)
		}
		if err := checkCurated("TurnStarted override.names", o.Names); err != nil {
			return err
		}
	default:
		return fmt.Errorf("TurnStarted override kind %q is not %q, %q or %q: %w", clip.String(o.Kind, clip.Max), OverrideEmpty, OverrideIntent, OverrideNames, ErrBrokenRule)
	}
	return nil
}

func picked(in *intent.Intent) []string {
	if in == nil {
		return nil
	}
	return in.Picked
}

// checkCurated is the rule of a user-curated list: at most MaxPicked
// names, each once (a longer list is an expanded tool list).
func checkCurated(field string, names []string) error {
	if len(names) > MaxPicked {
		return fmt.Errorf("%s has %d names, at most %d: a long list is an expanded tool list (docs/semantics.md#picked-lists); record the intent instead: %w", field, len(names), MaxPicked, ErrBrokenRule)
	}
	for i, n := range names {
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("%s names %q twice; list each tool once: %w", field, n, ErrBrokenRule)
		}
	}
	return nil
}

// MarshalJSON writes a TurnStarted as its JSON tags say, except that an
// intent (the session's or the override's) always carries "picked", null
// when nil: in a command, nil (unset) and empty (pick none) differ, and
// intent.Intent's own JSON omits both.
func (t TurnStarted) MarshalJSON() ([]byte, error) {
	in, err := turnIntentJSON(t.Intent)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Turn            uint64          `json:"turn"`
		Intent          json.RawMessage `json:"intent,omitempty"`
		Profile         string          `json:"profile,omitempty"`
		Override        *TurnOverride   `json:"override,omitempty"`
		RegistryVersion string          `json:"registry_version,omitempty"`
		ContractHash    string          `json:"contract_hash,omitempty"`
		Provider        string          `json:"provider,omitempty"`
	}{t.Turn, in, t.Profile, t.Override, t.RegistryVersion, t.ContractHash, t.Provider})
}

// MarshalJSON writes a TurnOverride as its JSON tags say, its intent with
// "picked" always present (see TurnStarted.MarshalJSON).
func (o TurnOverride) MarshalJSON() ([]byte, error) {
	in, err := turnIntentJSON(o.Intent)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Kind    string          `json:"kind"`
		Intent  json.RawMessage `json:"intent,omitempty"`
		Allowed []string        `json:"allowed,omitempty"`
		Names   []string        `json:"names,omitempty"`
	}{o.Kind, in, o.Allowed, o.Names})
}

// turnIntentJSON is in's JSON with "picked" written last even when nil or
// empty; nil for a nil in.
func turnIntentJSON(in *intent.Intent) (json.RawMessage, error) {
	if in == nil {
		return nil, nil
	}
	rest := *in
	rest.Picked = nil
	b, err := json.Marshal(rest)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(in.Picked)
	if err != nil {
		return nil, err
	}
	b = b[:len(b)-1] // drop the closing brace
	if len(b) > 1 {
		b = append(b, ',')
	}
	b = append(b, `"picked":`...)
	b = append(append(b, p...), '}')
	return b, nil
}

// RecordOverride is o as a TurnStarted records it; nil for no override.
// A names override with no names is recorded as kind "empty", its
// meaning.
func RecordOverride(o intent.Override) *TurnOverride {
	switch o.Kind {
	case intent.OverrideEmpty:
		return &TurnOverride{Kind: OverrideEmpty}
	case intent.OverrideIntent:
		in := o.Intent
		return &TurnOverride{Kind: OverrideIntent, Intent: &in, Allowed: o.Allowed}
	case intent.OverrideNames:
		if len(o.Names) == 0 {
			return &TurnOverride{Kind: OverrideEmpty}
		}
		return &TurnOverride{Kind: OverrideNames, Names: o.Names}
	}
	return nil
}

// Override is the override o records; the zero Override (none) for nil
// or a kind the fold refuses.
func (o *TurnOverride) Override() intent.Override {
	if o == nil {
		return intent.Override{}
	}
	switch o.Kind {
	case OverrideEmpty:
		return intent.Override{Kind: intent.OverrideEmpty}
	case OverrideIntent:
		var in intent.Intent
		if o.Intent != nil {
			in = *o.Intent
		}
		return intent.Override{Kind: intent.OverrideIntent, Intent: in, Allowed: o.Allowed}
	case OverrideNames:
		return intent.Override{Kind: intent.OverrideNames, Names: o.Names}
	}
	return intent.Override{}
}
