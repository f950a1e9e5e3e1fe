package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/toolintent/engine/events"
)

// #20 item 4: over HTTP and NATS an append takes an idempotency key as
// the Idempotency-Key header or the body's event_id; a retry with the
// same key returns the original sequence and event ids (duplicate) and
// writes nothing; replies name the stored event ids; a header and a
// field that differ, or a key that is not a ULID, are refused.
func TestAppendIdempotencyKey(t *testing.T) {
	e := newEnv(t, Config{})
	decode := func(t *testing.T, body []byte) AppendResponse {
		t.Helper()
		var r AppendResponse
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
				key := events.NewID()
				req, headers := body, []string{HeaderIdempotencyKey, key}
				if via == "field" {
					req, headers = `{"event_id":"`+key+`","commands":[{"type":"ToolDisabled","name":"bash"}]}`, nil
				}
				st, b := do(t, session, req, headers...)
				if st != http.StatusOK {
					t.Fatalf("%s: append %d %s", via, st, b)
				}
				first := decode(t, b)
				if first.LastSeq == 0 || first.Duplicate || len(first.EventIDs) != 1 || first.EventIDs[0] != key {
					t.Fatalf("%s: first append %+v, want one event with id %s", via, first, key)
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
				if !again.Duplicate || again.LastSeq != first.LastSeq || len(again.EventIDs) != 1 || again.EventIDs[0] != key {
					t.Fatalf("%s: retry %+v, want seq %d, duplicate, id %s", via, again, first.LastSeq, key)
				}
				h, err := e.eng.Log().ReadSession(ctxT(t), session, 0, 0)
				if err != nil || len(h) != 2 {
					t.Fatalf("%s: session has %d events (%v), want 2", via, len(h), err)
				}
			}
			// Refusals.
			k1, k2 := events.NewID(), events.NewID()
			if st, b := do(t, name+"-bad", `{"event_id":"`+k1+`","commands":[{"type":"ToolDisabled","name":"bash"}]}`, HeaderIdempotencyKey, k2); st != http.StatusBadRequest {
				t.Fatalf("header and field differ: %d %s, want 400", st, b)
			}
			if st, b := do(t, name+"-bad", body, HeaderIdempotencyKey, "retry-1"); st != http.StatusBadRequest {
				t.Fatalf("key not a ULID: %d %s, want 400", st, b)
			}
		})
	}
}

// #24 row 4: on the wire, a key used on one session and sent on another
// is 422 with code idempotency_key_in_use over HTTP (status) and NATS
// (Nats-Service-Error-Code), its message naming the key and not the
// session that holds it; the other session then reads and appends.
func TestAppendIdempotencyKeyOtherSession(t *testing.T) {
	e := newEnv(t, Config{})
	key := events.NewID()
	body := `{"commands":[{"type":"ToolDisabled","name":"bash"}]}`
	if st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/holder/events", body, HeaderIdempotencyKey, key); st != http.StatusOK {
		t.Fatalf("first append %d %s", st, b)
	}
	check := func(via string, status string, data []byte) {
		t.Helper()
		var env struct {
			Error APIError `json:"error"`
		}
		if err := json.Unmarshal(data, &env); err != nil || status != "422" || env.Error.Code != CodeKeyInUse ||
			!strings.Contains(env.Error.Message, key) || strings.Contains(env.Error.Message, "holder") {
			t.Fatalf("%s: %s %s, want 422 %s naming the key only", via, status, data, CodeKeyInUse)
		}
	}
	st, _, b := rawHTTP(t, http.MethodPost, e.httpURL+"/v1/sessions/other/events", body, HeaderIdempotencyKey, key)
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
