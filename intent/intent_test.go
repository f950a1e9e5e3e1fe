package intent

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func bptr(b bool) *bool { return &b }

// Clone shares nothing with its source and keeps nil apart from empty.
func TestCloneIsDeep(t *testing.T) {
	in := Intent{Enabled: bptr(true), WebSearch: bptr(false), Preset: "research", Disabled: []string{"bash"}, Picked: []string{}}
	c := in.Clone()
	if !c.Equal(in) {
		t.Fatalf("clone %+v differs from %+v", c, in)
	}
	*c.Enabled = false
	c.Disabled[0] = "grep"
	if !*in.Enabled || in.Disabled[0] != "bash" {
		t.Fatalf("clone shares memory with its source: %+v", in)
	}
	if c.Picked == nil {
		t.Fatal("clone turned an empty picked list (pick none) into nil (unset)")
	}
	o := Override{Kind: OverrideIntent, Intent: in, Allowed: []string{"grep"}}
	oc := o.Clone()
	oc.Allowed[0] = "bash"
	if o.Allowed[0] != "grep" || !o.Clone().Equal(o) {
		t.Fatalf("override clone is not deep or not equal: %+v", o)
	}
}

// Equal compares switches by value and keeps Picked nil apart from
// empty (the fold keeps the difference).
func TestEqual(t *testing.T) {
	if !(Intent{Enabled: bptr(true)}).Equal(Intent{Enabled: bptr(true)}) {
		t.Fatal("equal switches at different addresses compare unequal")
	}
	for _, pair := range [][2]Intent{
		{{}, {Enabled: bptr(false)}},
		{{Picked: nil}, {Picked: []string{}}},
		{{Disabled: []string{"a"}}, {Disabled: []string{"b"}}},
		{{Preset: "a"}, {}},
	} {
		if pair[0].Equal(pair[1]) {
			t.Fatalf("%+v equals %+v", pair[0], pair[1])
		}
	}
	if (Override{Kind: OverrideNames, Names: []string{"a"}}).Equal(Override{Kind: OverrideEmpty}) {
		t.Fatal("different override kinds compare equal")
	}
}

// The fingerprint sees every field and does not depend on addresses.
func TestFingerprint(t *testing.T) {
	base := Override{Kind: OverrideIntent, Intent: Intent{Enabled: bptr(true), Preset: "p", Disabled: []string{"x"}}}
	h := base.Fingerprint(FingerprintSeed)
	same := base.Clone()
	if same.Fingerprint(FingerprintSeed) != h {
		t.Fatal("a clone fingerprints differently")
	}
	for name, o := range map[string]Override{
		"kind":     {Kind: OverrideNames, Intent: base.Intent},
		"enabled":  {Kind: OverrideIntent, Intent: Intent{Enabled: bptr(false), Preset: "p", Disabled: []string{"x"}}},
		"preset":   {Kind: OverrideIntent, Intent: Intent{Enabled: bptr(true), Preset: "q", Disabled: []string{"x"}}},
		"disabled": {Kind: OverrideIntent, Intent: Intent{Enabled: bptr(true), Preset: "p", Disabled: []string{"xx"}}},
		"allowed":  {Kind: OverrideIntent, Intent: base.Intent, Allowed: []string{"x"}},
		"names":    {Kind: OverrideIntent, Intent: base.Intent, Names: []string{"x"}},
	} {
		if o.Fingerprint(FingerprintSeed) == h {
			t.Errorf("changing %s leaves the fingerprint unchanged", name)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = base.Fingerprint(FingerprintSeed) }); n != 0 {
		t.Fatalf("Fingerprint allocates %v times", n)
	}
}

// Kinds travel as their names; an unknown name is ErrInvalid.
func TestOverrideKindText(t *testing.T) {
	b, err := json.Marshal(Override{Kind: OverrideNames, Names: []string{"grep"}})
	if err != nil || string(b) != `{"kind":"names","names":["grep"]}` {
		t.Fatalf("override JSON = %s, %v", b, err)
	}
	var o Override
	if err := json.Unmarshal([]byte(`{"kind":"intent","intent":{"preset":"p"}}`), &o); err != nil || o.Kind != OverrideIntent || o.Intent.Preset != "p" {
		t.Fatalf("decode = %+v, %v", o, err)
	}
	var k OverrideKind
	if err := k.UnmarshalText([]byte("all")); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown kind: err = %v, want ErrInvalid", err)
	}
	if OverrideKind(9).String() != "OverrideKind(9)" {
		t.Fatalf("String of an unknown kind = %q", OverrideKind(9).String())
	}
}

// Alike is Equal up to nil versus empty lists, as Resolve treats them
// (the resolver cache relies on it to share one resolution).
func TestAlike(t *testing.T) {
	a, b := Intent{Picked: nil, Disabled: []string{}}, Intent{Picked: []string{}}
	if !a.Alike(&b) || a.Equal(b) {
		t.Fatalf("nil and empty lists: Alike %v (want true), Equal %v (want false)", a.Alike(&b), a.Equal(b))
	}
	c := Intent{Enabled: bptr(true)}
	if a.Alike(&c) {
		t.Fatal("different switches resolve alike")
	}
	if a.Fingerprint(FingerprintSeed) != b.Fingerprint(FingerprintSeed) {
		t.Fatal("intents that resolve alike fingerprint differently")
	}
}

// Full sets every field, so an encoder that drops one is caught.
func TestFullSetsEveryField(t *testing.T) {
	f := Full()
	if f.Enabled == nil || f.WebSearch == nil || f.Preset == "" || len(f.Disabled) == 0 || len(f.Picked) == 0 {
		t.Fatalf("Full() = %+v leaves a field zero", f)
	}
	if !f.Clone().Equal(f) {
		t.Fatal("Clone of Full differs")
	}
}

// Equal, Alike and Fingerprint see every field: zeroing any one field of
// Full changes all three. A new field fails here until they cover it.
func TestEveryFieldCounts(t *testing.T) {
	full := Full()
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		z := full.Clone()
		reflect.ValueOf(&z).Elem().Field(i).SetZero()
		name := v.Type().Field(i).Name
		if z.Equal(full) || z.Alike(&full) || z.Fingerprint(FingerprintSeed) == full.Fingerprint(FingerprintSeed) {
			t.Errorf("field %s: Equal, Alike or Fingerprint ignores it", name)
		}
		c := full.Clone()
		if !reflect.DeepEqual(c, full) {
			t.Errorf("Clone drops field %s", name)
		}
	}
}

// Field names every field of Intent, in order, by its msgpack key, with
// the address of the field itself: copying each field of Full through it
// into a zero intent gives Full back.
func TestFieldCoversIntent(t *testing.T) {
	rt := reflect.TypeFor[Intent]()
	if NumFields != rt.NumField() {
		t.Fatalf("NumFields is %d, Intent has %d fields", NumFields, rt.NumField())
	}
	full := Full()
	var got Intent
	for i := range NumFields {
		key, dst := got.Field(i)
		_, src := full.Field(i)
		if tag := rt.Field(i).Tag.Get("msgpack"); tag != key {
			t.Errorf("field %d: key %q, msgpack tag %q", i, key, tag)
		}
		switch d := dst.(type) {
		case **bool:
			*d = *src.(**bool)
		case *string:
			*d = *src.(*string)
		case *[]string:
			*d = *src.(*[]string)
		default:
			t.Errorf("field %q: address of kind %T", key, dst)
		}
	}
	if !got.Equal(full) {
		t.Errorf("Field missed a field:\n got %+v\nwant %+v", got, full)
	}
}
