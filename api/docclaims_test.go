package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// An append whose every command changes nothing
// writes nothing and answers first_seq = last_seq = 0 without event_ids,
// and sequences are the stream's (a second session's first event is not
// 1); the page says both. Over both transports.
func TestNoOpAppendAndStreamSequencesAsDocumented(t *testing.T) {
	doc := readAPIDoc(t)
	for _, want := range []string{"answers `first_seq` = `last_seq` = 0", "are the stream's, counted across every session"} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/api.md does not say %q", want)
		}
	}
	env := newEnv(t, Config{})
	type reply struct {
		FirstSeq uint64   `json:"first_seq"`
		LastSeq  uint64   `json:"last_seq"`
		EventIDs []string `json:"event_ids"`
	}
	appendOnce := func(transport, req string) (reply, string) {
		body, status := callDocumented(t, env, transport, "append", req)
		if status != http.StatusOK {
			t.Fatalf("append over %s: %d %s", transport, status, body)
		}
		var r reply
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		return r, string(body)
	}
	for _, transport := range []string{"nats", "http"} {
		req := `{"session":"noop-` + transport + `","commands":[{"type":"ToolsToggled","enabled":true}]}`
		first, body := appendOnce(transport, req)
		if first.FirstSeq <= 1 && transport == "http" {
			t.Errorf("the second session's first event has sequence %d: sequences are the stream's: %s", first.FirstSeq, body)
		}
		again, body := appendOnce(transport, req)
		if again.FirstSeq != 0 || again.LastSeq != 0 || len(again.EventIDs) != 0 || strings.Contains(body, `"event_ids"`) {
			t.Errorf("no-op append over %s: %s, want first_seq = last_seq = 0 and no event_ids", transport, body)
		}
	}
}
