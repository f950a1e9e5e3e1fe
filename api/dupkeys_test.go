package api

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/wire"
)

// TestDuplicateJSONKeysRefused: a request body naming a key twice (or two
// spellings encoding/json maps to one field) is refused with 400 naming
// the key, on both transports; nothing is written.
func TestDuplicateJSONKeysRefused(t *testing.T) {
	e := newEnv(t, Config{})
	cases := []struct {
		name, body, want string
	}{
		{"top level", `{"session":"dk1","session":"dk2","commands":[{"type":"ToolDisabled","name":"bash"}]}`, `key "session" appears twice`},
		{"case variant", `{"session":"dk1","Session":"dk2","commands":[{"type":"ToolDisabled","name":"bash"}]}`, `"session" and "Session"`},
		{"nested", `{"session":"dk1","commands":[{"type":"ToolDisabled","name":"bash","name":"web_fetch"}]}`, `"name"`},
		{"expected_seq", `{"session":"dk1","expected_seq":0,"expected_seq":5,"commands":[{"type":"ToolDisabled","name":"bash"}]}`, `key "expected_seq" appears twice`},
	}
	for _, c := range cases {
		status, _, b := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/dk1/events", c.body)
		if status != http.StatusBadRequest || !strings.Contains(apiError(t, b).Message, c.want) {
			t.Errorf("HTTP %s: %d %s, want 400 naming %s", c.name, status, b, c.want)
		}
		m := rawNATS(t, e.nc, "tools.api.cli.events.append", c.body)
		if got := m.Header.Get(HeaderErrorCode); got != CodeInvalid || !strings.Contains(apiError(t, m.Data).Message, c.want) {
			t.Errorf("NATS %s: %s %s, want %s naming %s", c.name, got, m.Data, CodeInvalid, c.want)
		}
	}
	v, err := e.httpClient().Intent(ctxT(t), "dk1", 0)
	if err != nil || v.Seq != 0 {
		t.Fatalf("dk1 after refused requests = %+v, %v; want no events", v, err)
	}
	// A body without duplicates still works.
	if status, _, b := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/dk1/events", `{"commands":[{"type":"ToolDisabled","name":"bash"}]}`); status != http.StatusOK {
		t.Fatalf("clean body: %d %s", status, b)
	}
}

// TestDuplicateMsgpackKeysRefused: the same for a msgpack body, whose map
// would otherwise collapse to the last value when converted.
func TestDuplicateMsgpackKeysRefused(t *testing.T) {
	e := newEnv(t, Config{})
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	for _, err := range []error{
		enc.EncodeMapLen(3),
		enc.EncodeString("session"), enc.EncodeString("dm1"),
		enc.EncodeString("session"), enc.EncodeString("dm2"),
		enc.EncodeString("commands"), enc.Encode([]map[string]string{{"type": "ToolDisabled", "name": "bash"}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	status, _, b := rawHTTP(t, "POST", e.httpURL+"/v1/sessions/dm1/events", buf.String(), "Content-Type", wire.MIMEMsgpack)
	if status != http.StatusBadRequest || !strings.Contains(apiError(t, b).Message, `key "session" appears twice`) {
		t.Errorf("HTTP msgpack: %d %s, want 400 naming the key", status, b)
	}
	m := rawNATS(t, e.nc, "tools.api.cli.events.append", buf.String(), "Content-Type", wire.MIMEMsgpack)
	if got := m.Header.Get(HeaderErrorCode); got != CodeInvalid || !strings.Contains(apiError(t, m.Data).Message, `key "session" appears twice`) {
		t.Errorf("NATS msgpack: %s %s, want %s naming the key", got, m.Data, CodeInvalid)
	}
	for _, s := range []string{"dm1", "dm2"} {
		if v, err := e.httpClient().Intent(ctxT(t), s, 0); err != nil || v.Seq != 0 {
			t.Errorf("%s after refused requests = %+v, %v; want no events", s, v, err)
		}
	}
}
