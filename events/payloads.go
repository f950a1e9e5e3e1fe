package events

// The payload table: one row per event type, holding its wire fields (the
// codec every reader and writer of the msgpack map derives from), its
// validation, for an event that changes the stored intent its fold step,
// and, for a command, its command options and whether the engine may
// re-decide it on a conflict. Encode, both paths of Decode, Validate, the
// command table, PayloadValue, FoldIntent and RetrySafe read this table
// only; a new event type is its payload struct, its Type, and one row.

import (
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/toolintent/engine/intent"
)

// payloadType is one row of the table.
type payloadType struct {
	zero     Payload
	encode   func(s *sticky, p Payload)
	decode   func(m map[string]any) (Payload, error)
	fast     func(r *fastReader, n int) (Payload, bool)
	validate func(p Payload) error
	value    func(p Payload) (Payload, bool)
	// fold applies the payload to the session's stored intent; nil for
	// an event that does not change it.
	fold func(p Payload, in *intent.Intent)
	// overlay is the intent key of the overlay switch the event sets
	// ("" for none); switchOf returns the value it sets and the payload
	// with that value copied.
	overlay  string
	switchOf func(p Payload) (*bool, Payload)
	keys     []string
	// command is nil for an event no command writes.
	command *commandOpts
}

// commandOpts are a command's options: the fields that do not follow the
// default rule (see commandSpec) and whether the engine may re-decide it
// against a newer state when its append conflicts.
type commandOpts struct {
	retrySafe bool
	optional  []string // fields optional although the rule says required
	nullable  []string // string fields where null means ""
}

// row builds the row of payload type P from its codec, its validation (nil:
// every value decoded is valid) and its command options.
func row[P Payload](c codec[P], validate func(P) error, cmd *commandOpts) payloadType {
	return intentRow(c, validate, cmd, nil)
}

// intentRow is row for an event that changes the stored intent: fold
// applies it.
func intentRow[P Payload](c codec[P], validate func(P) error, cmd *commandOpts, fold func(v P, in *intent.Intent)) payloadType {
	var zero P
	var folds func(p Payload, in *intent.Intent)
	if fold != nil {
		folds = func(p Payload, in *intent.Intent) { fold(p.(P), in) }
	}
	// The codecs take a *P through function values, which the compiler
	// must assume keep it: scratch values from a pool spare Encode and
	// the fast path an allocation per event.
	scratch := sync.Pool{New: func() any { return new(P) }}
	return payloadType{
		zero: zero, command: cmd, keys: c.allKeys(), fold: folds,
		encode: func(s *sticky, p Payload) {
			v := scratch.Get().(*P)
			*v = p.(P)
			c.encode(s, v)
			*v = zero
			scratch.Put(v)
		},
		decode: func(m map[string]any) (Payload, error) { return c.decode(m) },
		fast: func(r *fastReader, n int) (Payload, bool) {
			v := scratch.Get().(*P)
			ok := c.fast(r, n, v)
			p := *v
			*v = zero
			scratch.Put(v)
			return p, ok
		},
		validate: func(p Payload) error {
			if validate == nil {
				return nil
			}
			return validate(p.(P))
		},
		value: func(p Payload) (Payload, bool) {
			switch v := any(p).(type) {
			case P:
				return p, true // already boxed: no copy
			case *P:
				if v != nil {
					return *v, true
				}
			}
			return nil, false
		},
	}
}

// overlayRow is the row of an event that sets the overlay switch of the
// stored intent under key (intent.Intent.Field), held by the payload at
// on: its fold sets the switch, and Overlay reports it.
func overlayRow[P Payload](key string, c codec[P], cmd *commandOpts, on func(*P) **bool) payloadType {
	r := intentRow(c, nil, cmd, func(v P, in *intent.Intent) { *intentSwitch(in, key) = intent.CloneBool(*on(&v)) })
	r.overlay = key
	r.switchOf = func(p Payload) (*bool, Payload) {
		v := p.(P)
		*on(&v) = intent.CloneBool(*on(&v))
		return *on(&v), v
	}
	return r
}

// intentSwitch is the address of the switch of in under key.
func intentSwitch(in *intent.Intent, key string) **bool {
	for i := range intent.NumFields {
		if k, p := in.Field(i); k == key {
			return p.(**bool)
		}
	}
	panic("events: the intent has no switch " + key)
}

// payloadTable lists the event types in command order (CommandTypes);
// allTypes keeps the order of Types.
var payloadTable = [...]payloadType{
	intentRow(codec[ToolsToggled]{triAt("enabled", func(p *ToolsToggled) **bool { return &p.Enabled })},
		nil, &commandOpts{retrySafe: true}, func(v ToolsToggled, in *intent.Intent) {
			in.Enabled = intent.CloneBool(v.Enabled)
			in.Picked = nil // a master-switch change is the user's new choice
		}),
	overlayRow("web_search", codec[WebSearchSet]{triAt("enabled", func(p *WebSearchSet) **bool { return &p.Enabled })},
		&commandOpts{retrySafe: true}, func(p *WebSearchSet) **bool { return &p.Enabled }),
	intentRow(codec[PresetChosen]{textAt("preset", func(p *PresetChosen) *string { return &p.Preset })},
		validatePreset, &commandOpts{retrySafe: true, nullable: []string{"preset"}},
		func(v PresetChosen, in *intent.Intent) { in.Preset = v.Preset }),
	intentRow(codec[ToolDisabled]{nameAt("name", func(p *ToolDisabled) *string { return &p.Name })},
		func(v ToolDisabled) error { return validatePattern("name", v.Name) }, &commandOpts{retrySafe: true},
		func(v ToolDisabled, in *intent.Intent) { in.Disabled = intent.InsertSorted(in.Disabled, v.Name) }),
	intentRow(codec[ToolEnabled]{nameAt("name", func(p *ToolEnabled) *string { return &p.Name })},
		func(v ToolEnabled) error { return validatePattern("name", v.Name) }, &commandOpts{retrySafe: true},
		func(v ToolEnabled, in *intent.Intent) { in.Disabled = intent.RemoveSorted(in.Disabled, v.Name) }),
	intentRow(codec[ToolsPicked]{namesAt("names", func(p *ToolsPicked) *[]string { return &p.Names })},
		func(v ToolsPicked) error { return validatePatterns("", "names", v.Names) }, &commandOpts{},
		func(v ToolsPicked, in *intent.Intent) { in.Picked = slices.Clone(v.Names) }),
	row(codec[DeferredLoaded]{
		namesAt("names", func(p *DeferredLoaded) *[]string { return &p.Names }),
		uintAt("turn", func(p *DeferredLoaded) *uint64 { return &p.Turn }),
	}, func(v DeferredLoaded) error { return validateNames("names", v.Names) }, &commandOpts{retrySafe: true}),
	row(codec[DeferredEvicted]{
		namesAt("names", func(p *DeferredEvicted) *[]string { return &p.Names }),
		textAt("reason", func(p *DeferredEvicted) *string { return &p.Reason }),
		uintAt("turn", func(p *DeferredEvicted) *uint64 { return &p.Turn }),
	}, validateEvicted, &commandOpts{optional: []string{"reason"}}),
	row(turnStartedCodec, validateTurnStarted, &commandOpts{}),
	row(codec[TurnEnded]{
		uintAt("turn", func(p *TurnEnded) *uint64 { return &p.Turn }),
		// Without a checkpoint, byte for byte the older form {"turn"}.
		ptrAt("checkpoint", checkpointCodec, func(p *TurnEnded) **CheckpointRecorded { return &p.Checkpoint }).
			omitted(func(p *TurnEnded) bool { return p.Checkpoint == nil }),
	}, validateTurnEnded, &commandOpts{}),
	row(checkpointCodec, validateCheckpoint,
		&commandOpts{optional: []string{"loaded_deferred_tools", "contract"}}),
	row(codec[PermissionGranted]{
		nameAt("by", func(p *PermissionGranted) *string { return &p.By }),
		nameAt("scope", func(p *PermissionGranted) *string { return &p.Scope }),
		nameAt("tool", func(p *PermissionGranted) *string { return &p.Tool }),
		uintAt("turn", func(p *PermissionGranted) *uint64 { return &p.Turn }),
	}, validateGrant, &commandOpts{}),
	// A delete re-decided is still a delete.
	row(codec[SessionDeleted]{textAt("reason", func(p *SessionDeleted) *string { return &p.Reason })},
		func(v SessionDeleted) error { return validateText("reason", v.Reason) },
		&commandOpts{retrySafe: true, optional: []string{"reason"}}),
	row(compactedCodec, validateCompacted, nil),
}

// intentCodec is an intent.Intent as events record it: every field of
// intent.Intent.Field written, nil lists and unset switches as nil.
var intentCodec = func() codec[intent.Intent] {
	var c codec[intent.Intent]
	for i := range intent.NumFields {
		key, kind := (&intent.Intent{}).Field(i)
		switch kind.(type) {
		case **bool:
			c = append(c, triAt(key, func(in *intent.Intent) **bool { return intentField[**bool](in, i) }))
		case *string:
			c = append(c, textAt(key, func(in *intent.Intent) *string { return intentField[*string](in, i) }))
		case *[]string:
			c = append(c, namesAt(key, func(in *intent.Intent) *[]string { return intentField[*[]string](in, i) }))
		default:
			panic(fmt.Sprintf("events: intent field %q has a kind no codec reads", key))
		}
	}
	return c
}()

// intentField is the address of field i of in, of type A.
func intentField[A any](in *intent.Intent, i int) A {
	_, p := in.Field(i)
	return p.(A)
}

// checkpointCodec is the data of a CheckpointRecorded and the checkpoint
// of a TurnEnded or a SessionCompacted alike.
var checkpointCodec = codec[CheckpointRecorded]{
	namesAt("loaded_deferred_tools", func(p *CheckpointRecorded) *[]string { return &p.Loaded }),
	textAt("contract_hash", func(p *CheckpointRecorded) *string { return &p.ContractHash }),
	textAt("registry_version", func(p *CheckpointRecorded) *string { return &p.RegistryVersion }),
	uintAt("turn", func(p *CheckpointRecorded) *uint64 { return &p.Turn }),
	listAt("contract", MaxContractLen, codec[ContractEntry]{
		nameAt("name", func(p *ContractEntry) *string { return &p.Name }),
		textAt("hash", func(p *ContractEntry) *string { return &p.Hash }),
	}, func(p *CheckpointRecorded) *[]ContractEntry { return &p.Contract }),
}

// Lookups of the table, built once.
var (
	payloadByType   = map[Type]*payloadType{}
	payloadByGoType = map[reflect.Type]*payloadType{}
)

func init() {
	for i := range payloadTable {
		r := &payloadTable[i]
		t := r.zero.EventType()
		payloadByType[t] = r
		payloadByGoType[reflect.TypeOf(r.zero)] = r
		payloadByGoType[reflect.PointerTo(reflect.TypeOf(r.zero))] = r
		for _, k := range r.keys {
			knownKeys[k] = k
		}
	}
	if len(payloadByType) != len(allTypes) {
		panic(fmt.Sprintf("events: the payload table has %d types, allTypes %d", len(payloadByType), len(allTypes)))
	}
	for _, t := range allTypes {
		if payloadByType[t] == nil {
			panic(fmt.Sprintf("events: type %s has no row in the payload table", t))
		}
	}
}

// deref turns a pointer payload into its value form, so that the codec
// handles one form only. ok is false for nil, a nil pointer or a foreign
// type.
func deref(p Payload) (Payload, bool) {
	if p == nil {
		return nil, false
	}
	r := payloadByGoType[reflect.TypeOf(p)]
	if r == nil {
		return nil, false
	}
	return r.value(p)
}

// FoldIntent applies p to the session's stored intent in when p is an
// event that changes it, and reports whether it is one: ToolsToggled sets
// Enabled and clears Picked (whatever its value: on, off or follow the
// profile), an overlay event (see Overlay) sets its switch (WebSearchSet
// sets WebSearch), PresetChosen sets Preset,
// ToolDisabled adds to Disabled and ToolEnabled removes from it (a sorted
// set, copied on write), ToolsPicked sets Picked (nil unsets). Nothing of
// p is shared with in. It is the fold step of these events; the rules
// that may refuse them are the fold's (see package aggregate).
func FoldIntent(p Payload, in *intent.Intent) bool {
	v, ok := deref(p)
	if !ok {
		return false
	}
	r := payloadByType[v.EventType()]
	if r.fold == nil {
		return false
	}
	r.fold(v, in)
	return true
}

// Overlay reports whether p sets an overlay switch of the stored intent
// (WebSearchSet): key is the switch's intent key (intent.Intent.Field),
// which is also the name of the tool the overlay adds when on; on is the
// value p sets, and set is p in value form with that value copied, so
// that it shares no pointer with p.
func Overlay(p Payload) (key string, on *bool, set Payload, ok bool) {
	v, ok := deref(p)
	if !ok {
		return "", nil, nil, false
	}
	r := payloadByType[v.EventType()]
	if r.overlay == "" {
		return "", nil, nil, false
	}
	on, set = r.switchOf(v)
	return r.overlay, on, set, true
}

// RetrySafe reports whether the engine may re-decide command p against a
// newer state and append it again when its append conflicts: a command in
// value form that is a blind write of one intent field or a set addition
// (its effect does not depend on the state it was decided against). A
// pointer payload is not re-decided.
func RetrySafe(p Payload) bool {
	if p == nil {
		return false
	}
	r := payloadByGoType[reflect.TypeOf(p)]
	return r != nil && reflect.TypeOf(p) == reflect.TypeOf(r.zero) && r.command != nil && r.command.retrySafe
}
