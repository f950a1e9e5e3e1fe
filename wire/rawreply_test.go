package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

type splitView struct {
	Session   string          `json:"session"`
	Rendering json.RawMessage `json:"rendering"`
	Tools     []string        `json:"tools"`
	Note      string          `json:"note"`
}

func (v splitView) SplitRaw(mark json.RawMessage) (any, []byte) {
	raw := v.Rendering
	v.Rendering = mark
	return v, raw
}

// A RawReply's spliced encoding is byte-identical to encoding/json's
// for a compact rendering, large or small, with nil lists still [] and a
// note that spells the placeholder's text (its quotes escaped) left alone.
func TestMarshalRawReplyMatchesEncoder(t *testing.T) {
	big := `[` + strings.Repeat(`{"name":"t","description":"<b>&</b> \u00e9 \"q\"","input_schema":{"type":"object"}},`, 40) + `{"name":"last"}]`
	for _, v := range []splitView{
		{Session: "s1", Rendering: json.RawMessage(big), Tools: []string{"a"}},
		{Session: "s2", Rendering: json.RawMessage(big)},
		{Session: "s3", Rendering: json.RawMessage(`[{"name":"small"}]`)},
		{Session: "s4", Rendering: json.RawMessage(big), Note: string(rawMark)},
	} {
		got, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: spliced\n%s\nwant\n%s", v.Session, got, want)
		}
		if !json.Valid(got) || !bytes.Contains(got, []byte(`"tools":[`)) {
			t.Errorf("%s: reply %s", v.Session, got)
		}
	}
}
