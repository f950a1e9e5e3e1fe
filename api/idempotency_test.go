package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/wire"
)

// Wire.IdempotencyEventIDs (for clients) and the engine's
// jetstream.KeyEventIDs give the same ids.
func TestIdempotencyEventIDsAgree(t *testing.T) {
	keys := []string{"a", "A", "3f1c2a9e-7b4d-4c11-9a60-0e5b8f2d6c71", events.NewID(), strings.Repeat("é", 127) + "x", strings.Repeat("x", 256), "", "a\nb", "\xff"}
	for i, key := range keys {
		for _, session := range []string{"s1", "team.alpha-" + strconv.Itoa(i)} {
			w, j := wire.IdempotencyEventIDs(session, key, 3), jetstream.KeyEventIDs(session, key, 3)
			if strings.Join(w, ",") != strings.Join(j, ",") {
				t.Fatalf("key %q on %s: wire %v, engine %v", key, session, w, j)
			}
		}
	}
	// The carry crosses bytes: FF..FF + 1 wraps, and both agree on it.
	if ids := wire.IdempotencyEventIDs("s", "k", 2); ids[0] == ids[1] || len(ids[0]) != 26 {
		t.Fatalf("ids %v: want two distinct 26-character ids", ids)
	}
}

// Over HTTP and NATS an append takes an idempotency key as
// the Idempotency-Key header or the body's event_id; a retry with the
// same key returns the original sequence and event ids (duplicate) and
// writes nothing; replies name the stored event ids; a header and a
// field that differ, or a key over 255 bytes, are refused; any
// opaque key (a UUID), case-sensitive; the same key with other commands is
// 422 idempotency_key_mismatch.
func TestAppendIdempotencyKey(t *testing.T) {
	e := newEnv(t, Config{})
	decode := func(t *testing.T, body []byte) wire.AppendReply {
		t.Helper()
		var r wire.AppendReply
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("decode %s: %v", body, err)
		}
		return r
	}
	body := `{"commands":[{"type":"ToolDisabled","name":"bash"}]}`
	type send func(t *testing.T, session, body string, headers ...string) (int, []byte)
	transports := map[string]send{
		"http": func(t *testing.T, session, body string, headers ...string) (int, []byte) {
			st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/"+session+"/events", body, headers...)
			return st, b
		},
		"nats": func(t *testing.T, session, body string, headers ...string) (int, []byte) {
			var m map[string]any
			_ = json.Unmarshal([]byte(body), &m)
			m["session"] = session
			b, _ := json.Marshal(m)
			msg := rawNATS(t, e.nc, "tools.api.web.events.append", string(b), headers...)
			if code := msg.Header.Get("Nats-Service-Error-Code"); code != "" {
				var st int
				_ = json.Unmarshal([]byte(code), &st)
				return st, msg.Data
			}
			return http.StatusOK, msg.Data
		},
	}
	for name, do := range transports {
		t.Run(name, func(t *testing.T) {
			for _, via := range []string{"header", "field"} {
				session := name + "-" + via
				key := "3f1c2a9e-7b4d-4c11-9a60-" + via + "-" + name // any opaque string
				keyID := wire.IdempotencyEventIDs(session, key, 1)[0]
				req, headers := body, []string{wire.HeaderIdempotencyKey, key}
				if via == "field" {
					req, headers = `{"event_id":"`+key+`","commands":[{"type":"ToolDisabled","name":"bash"}]}`, nil
				}
				st, b := do(t, session, req, headers...)
				if st != http.StatusOK {
					t.Fatalf("%s: append %d %s", via, st, b)
				}
				first := decode(t, b)
				if first.LastSeq == 0 || first.Duplicate || len(first.EventIDs) != 1 || first.EventIDs[0] != keyID {
					t.Fatalf("%s: first append %+v, want one event with id %s", via, first, keyID)
				}
				// Another write, then the retry.
				if st, b := do(t, session, `{"commands":[{"type":"ToolDisabled","name":"grep"}]}`); st != http.StatusOK {
					t.Fatalf("%s: second append %d %s", via, st, b)
				}
				st, b = do(t, session, req, headers...)
				if st != http.StatusOK {
					t.Fatalf("%s: retry %d %s", via, st, b)
				}
				again := decode(t, b)
				if !again.Duplicate || again.LastSeq != first.LastSeq || len(again.EventIDs) != 1 || again.EventIDs[0] != keyID {
					t.Fatalf("%s: retry %+v, want seq %d, duplicate, id %s", via, again, first.LastSeq, keyID)
				}
				h, err := e.eng.Log().ReadSession(ctxT(t), session, 0, 0)
				if err != nil || len(h) != 2 {
					t.Fatalf("%s: session has %d events (%v), want 2", via, len(h), err)
				}
			}
			// Refusals.
			k1, k2 := events.NewID(), events.NewID()
			if st, b := do(t, name+"-bad", `{"event_id":"`+k1+`","commands":[{"type":"ToolDisabled","name":"bash"}]}`, wire.HeaderIdempotencyKey, k2); st != http.StatusBadRequest {
				t.Fatalf("header and field differ: %d %s, want 400", st, b)
			}
			if st, b := do(t, name+"-bad", body, wire.HeaderIdempotencyKey, strings.Repeat("k", 256)); st != http.StatusBadRequest {
				t.Fatalf("key of 256 bytes: %d %s, want 400", st, b)
			}
			// The same key with other commands is 422
			// idempotency_key_mismatch naming both, and writes nothing.
			k := "order-42/attempt-" + name
			if st, b := do(t, name+"-mismatch", body, wire.HeaderIdempotencyKey, k); st != http.StatusOK {
				t.Fatalf("keyed append %d %s", st, b)
			}
			st, b := do(t, name+"-mismatch", `{"commands":[{"type":"ToolEnabled","name":"bash"}]}`, wire.HeaderIdempotencyKey, k)
			var env struct {
				Error APIError `json:"error"`
			}
			if err := json.Unmarshal(b, &env); err != nil || st != http.StatusUnprocessableEntity || env.Error.Code != wire.CodeKeyMismatch ||
				!strings.Contains(env.Error.Message, k) || !strings.Contains(env.Error.Message, "ToolDisabled") || !strings.Contains(env.Error.Message, "ToolEnabled") {
				t.Fatalf("same key, other commands: %d %s, want 422 %s naming the key and both commands", st, b, wire.CodeKeyMismatch)
			}
			// Case-sensitive: the upper-case key is another key.
			st, b = do(t, name+"-mismatch", `{"commands":[{"type":"ToolEnabled","name":"bash"}]}`, wire.HeaderIdempotencyKey, strings.ToUpper(k))
			if up := decode(t, b); st != http.StatusOK || up.Duplicate || len(up.EventIDs) != 1 {
				t.Fatalf("upper-case key: %d %s, want a new event", st, b)
			}
			if h, err := e.eng.Log().ReadSession(ctxT(t), name+"-mismatch", 0, 0); err != nil || len(h) != 2 {
				t.Fatalf("mismatch session has %d events (%v), want 2", len(h), err)
			}
		})
	}
}

// On the wire, a key used on one session and sent on another
// is 422 with code idempotency_key_in_use over HTTP (status) and NATS
// (Nats-Service-Error-Code), its message naming the key and not the
// session that holds it; the other session then reads and appends.
func TestAppendIdempotencyKeyOtherSession(t *testing.T) {
	e := newEnv(t, Config{})
	key := events.NewID()
	body := `{"commands":[{"type":"ToolDisabled","name":"bash"}]}`
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/holder/events", body, wire.HeaderIdempotencyKey, key); st != http.StatusOK {
		t.Fatalf("first append %d %s", st, b)
	}
	check := func(via string, status string, data []byte) {
		t.Helper()
		var env struct {
			Error APIError `json:"error"`
		}
		if err := json.Unmarshal(data, &env); err != nil || status != "422" || env.Error.Code != wire.CodeKeyInUse ||
			!strings.Contains(env.Error.Message, key) || strings.Contains(env.Error.Message, "holder") {
			t.Fatalf("%s: %s %s, want 422 %s naming the key only", via, status, data, wire.CodeKeyInUse)
		}
	}
	st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/other/events", body, wire.HeaderIdempotencyKey, key)
	check("http", strconv.Itoa(st), b)
	msg := rawNATS(t, e.nc, "tools.api.slack.events.append", `{"session":"other","event_id":"`+key+`","commands":[{"type":"ToolDisabled","name":"bash"}]}`)
	check("nats", msg.Header.Get("Nats-Service-Error-Code"), msg.Data)
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/other/events", body); st != http.StatusOK {
		t.Fatalf("other appends after the refusals: %d %s", st, b)
	}
	if st, _, b := rawHTTP(t, http.MethodGet, e.httpURL+"/v1/sessions/other?min_seq=2", ""); st != http.StatusOK {
		t.Fatalf("other reads its write: %d %s", st, b)
	}
}
