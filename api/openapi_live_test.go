package api

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolintent/engine/wire"
)

// The live endpoints are in the OpenAPI document: a real request
// and a real 200 text/event-stream reply (the frames read so far) and a
// real 400 error reply validate against it, and every data line of the
// stream has the fields of the document's x-event-data schema.
func TestOpenAPILiveEndpoints(t *testing.T) {
	e := newEnv(t, Config{})
	v := openAPIValidator(t, e)
	first := toggle(t, e, "oa", true)
	second := toggle(t, e, "oa", false)
	for _, path := range []string{"/v1/sessions/oa/events/live?after_seq=", "/v1/events/live?after_seq="} {
		url := e.httpURL + path + jsonNum(first-1)
		s, code, body := openSSE(t, url)
		if s == nil {
			t.Fatalf("%s: %d %s", url, code, body)
		}
		var frames bytes.Buffer
		for _, want := range []uint64{first, second} {
			f, ev := s.event()
			if ev.Seq != want {
				t.Fatalf("%s: seq %d, want %d", url, ev.Seq, want)
			}
			frames.WriteString("id: " + f.id + "\nevent: " + f.event + "\ndata: " + f.data + "\n\n")
			checkEventData(t, f.data)
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set(wire.HeaderLastEventID, jsonNum(first-1))
		if ok, errs := v.ValidateHttpRequest(req); !ok {
			for _, e := range errs {
				t.Errorf("request %s does not match the document: %s: %s", url, e.Message, e.Reason)
			}
		}
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {wire.MIMEEventStream}},
			Body: io.NopCloser(bytes.NewReader(frames.Bytes())), Request: req}
		if ok, errs := v.ValidateHttpResponse(req, resp); !ok {
			for _, e := range errs {
				t.Errorf("stream reply of %s does not match the document: %s: %s", url, e.Message, e.Reason)
			}
		}
	}
	bad := e.httpURL + "/v1/sessions/oa/events/live?after_seq=x"
	_, code, body := openSSE(t, bad)
	req, _ := http.NewRequest(http.MethodGet, bad, nil)
	checkOpenAPI(t, v, "live with a bad after_seq", req, nil, code, body)
}

// checkEventData checks that data has every required field of
// LiveEvent's schema (the document's x-event-data) and no other.
func checkEventData(t *testing.T, data string) {
	t.Helper()
	s := OpenAPI()["paths"].(map[string]any)[wire.OpLive.Path].(map[string]any)["get"].(map[string]any)["responses"].(map[string]any)["200"].(map[string]any)["content"].(map[string]any)[wire.MIMEEventStream].(map[string]any)["x-event-data"].(Schema)
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props2, _ := s["properties"].(map[string]Schema)
		props = map[string]any{}
		for k, v := range props2 {
			props[k] = v
		}
	}
	for _, name := range []string{"seq", "id", "type", "channel", "actor", "time", "session", "payload"} {
		if _, ok := props[name]; !ok {
			t.Errorf("x-event-data lacks %q", name)
		}
		if !strings.Contains(data, `"`+name+`":`) {
			t.Errorf("event data lacks %q: %s", name, data)
		}
	}
}
