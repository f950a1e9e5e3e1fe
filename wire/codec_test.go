package wire

import (
	"errors"
	"net/url"
	"runtime"
	"strings"
	"testing"
)

// The strict request decoding lives in wire so that the server and
// any client or CLI refuse the same bodies with the same messages
// (duplicated keys; unknown and mistyped fields name themselves).
func TestDecodeJSONIsStrict(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"session":"a","session":"b"}`, `key "session" appears twice in the top-level object`},
		{`{"session":"a","Session":"b"}`, `keys "session" and "Session" of the top-level object name the same field`},
		{`{"session":"a","bogus":1}`, `unknown field "bogus": the request's fields are session, min_seq`},
		{`{"min_seq":"7"}`, `field "min_seq" must be a non-negative integer, got a JSON string`},
		{`{"session":"a"} {}`, `unexpected data after the JSON object`},
	} {
		var req IntentRequest
		err := DecodeJSON([]byte(c.body), &req)
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeJSON(%s) = %v, want ErrBadRequest with %q", c.body, err, c.want)
		}
	}
	var req IntentRequest
	if err := DecodeJSON([]byte(`{"session":"s1","min_seq":3}`), &req); err != nil || req.Session != "s1" || req.MinSeq != 3 {
		t.Fatalf("DecodeJSON = %+v, %v", req, err)
	}
}

// Query parameters bind strictly to the same request fields.
func TestBindQueryIsStrict(t *testing.T) {
	var req IntentRequest
	if err := BindQuery(&req, url.Values{"min_seq": {"4"}}, []string{"session"}); err != nil || req.MinSeq != 4 {
		t.Fatalf("BindQuery = %+v, %v", req, err)
	}
	err := BindQuery(&req, url.Values{"session": {"x"}}, []string{"session"})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), `unknown query parameter "session": this operation takes min_seq`) {
		t.Errorf("a path field as query parameter: %v", err)
	}
	if err := BindPath(&req, "session", "s2"); err != nil || req.Session != "s2" {
		t.Fatalf("BindPath = %+v, %v", req, err)
	}
	if err := BindPath(&req, "session", "s3"); !errors.Is(err, ErrBadRequest) {
		t.Errorf("BindPath over a different body value = %v, want ErrBadRequest", err)
	}
}

// Deeply nested arrays cost memory linear in their depth: the duplicate-key
// check spells out where it is only for an error (a path per value was
// quadratic: these 18 KB allocated 1.87 GB).
func TestDecodeJSONDeepArraysAllocateLinearly(t *testing.T) {
	const depth = 9_000 // under encoding/json's nesting limit of 10,000
	body := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
	var req struct {
		Session string `json:"session"`
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := DecodeJSON(body, &req)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrBadRequest) {
		t.Fatalf("an array for an object: %v, want a bad request", err)
	}
	if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(1_000*depth); got > bound {
		t.Fatalf("decoding %d nested arrays allocated %d bytes, want under %d", depth, got, bound)
	}
}
