package wire

import (
	"encoding/json"
	"testing"
)

// WithArrays fills nested nil lists and maps without writing
// to the value it was given.
func TestWithArraysCopies(t *testing.T) {
	type inner struct {
		L []string         `json:"l"`
		M map[string][]int `json:"m"`
		R json.RawMessage  `json:"r,omitempty"`
	}
	type outer struct {
		In  *inner  `json:"in"`
		Ins []inner `json:"ins"`
		Any any     `json:"any"`
	}
	orig := outer{In: &inner{M: map[string][]int{"a": nil}}, Ins: []inner{{}}, Any: inner{}}
	b, err := json.Marshal(withArrays(orig))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"in":{"l":[],"m":{"a":[]}},"ins":[{"l":[],"m":{}}],"any":{"l":[],"m":{}}}`
	if string(b) != want {
		t.Errorf("withArrays = %s, want %s", b, want)
	}
	if orig.In.L != nil || orig.In.M["a"] != nil || orig.Ins[0].L != nil {
		t.Errorf("withArrays wrote to its argument: %+v %+v", *orig.In, orig.Ins)
	}
}
