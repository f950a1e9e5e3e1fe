package intent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// What a Go client marshals, the engine's decoder reads back as
// the same override (the wire type is this type).
func TestOverrideJSONRoundTrip(t *testing.T) {
	for _, o := range []Override{
		{},
		{Kind: OverrideEmpty},
		{Kind: OverrideIntent},
		{Kind: OverrideIntent, Intent: Intent{Preset: "research", Picked: []string{"grep"}}, Allowed: []string{"bash"}},
		{Kind: OverrideNames, Names: []string{"grep", "read_file"}},
	} {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatalf("marshal %+v: %v", o, err)
		}
		var got Override
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("unmarshal %s: %v", b, err)
		}
		if !got.Equal(o) {
			t.Errorf("%s decodes to %+v, want %+v", b, got, o)
		}
	}
}

// An override object with no kind, an unknown kind or a field
// of another kind is refused with ErrInvalid and a message naming what to
// send; the refused value is left as it was.
func TestOverrideJSONRefusals(t *testing.T) {
	for body, want := range map[string]string{
		`{}`:                          `override: field "kind" is required: use one of none, empty, intent, names`,
		`{"kind":null,"names":["a"]}`: `field "kind" is required`,
		`{"kind":"some"}`:             `override kind "some" is unknown: use one of none, empty, intent, names`,
		`{"kind":"` + strings.Repeat("x", 200) + `"}`: `"` + strings.Repeat("x", 80) + `..." is unknown`,
		`{"kind":"empty","names":[]}`:                 `"empty" takes no other field`,
		`{"kind":"none","allowed":["a"]}`:             `"none" takes no other field`,
		`{"kind":"intent","names":["a"]}`:             `use kind "names"`,
		`{"kind":"names","allowed":["a"]}`:            "names only",
		`{"kind":"names","names":[]}`:                 "at least one name",
	} {
		o := Override{Kind: OverrideEmpty}
		err := json.Unmarshal([]byte(body), &o)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrInvalid with %q", body, err, want)
		}
		if o.Kind != OverrideEmpty {
			t.Errorf("%s: refused value changed to %+v", body, o)
		}
	}
	var o Override
	if err := json.Unmarshal([]byte(`{"kind":"empty","why":1}`), &o); err == nil || !strings.Contains(err.Error(), `unknown field "why"`) {
		t.Errorf("unknown field: %v", err)
	}
}
