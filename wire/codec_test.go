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
	// Under and over encoding/json's nesting limit of 10,000, closed and
	// left open.
	for _, depth := range []int{9_000, 20_000} {
		for _, closed := range []bool{true, false} {
			body := []byte(strings.Repeat("[", depth))
			if closed {
				body = append(body, strings.Repeat("]", depth)...)
			}
			var req struct {
				Session string `json:"session"`
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err := DecodeJSON(body, &req)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("%d nested arrays (closed %v): %v, want a bad request", depth, closed, err)
			}
			if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(1_000*depth); got > bound {
				t.Fatalf("decoding %d nested arrays (closed %v) allocated %d bytes, want under %d", depth, closed, got, bound)
			}
		}
	}
}

// A duplicate key deep in nested arrays is named with the innermost array
// levels and a count of the others, in memory linear in the depth.
func TestDecodeJSONDuplicateKeyDeepInArrays(t *testing.T) {
	const depth = 9_000
	body := []byte(strings.Repeat("[", depth) + `{"a":1,"a":2}` + strings.Repeat("]", depth))
	var req struct {
		Session string `json:"session"`
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := DecodeJSON(body, &req)
	runtime.ReadMemStats(&after)
	want := `key "a" appears twice in element 0 of element 0 of element 0 of element 0 of element 0 of element 0 of element 0 of element 0 of 8992 more arrays of the top-level object`
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), want) {
		t.Fatalf("duplicate key under %d arrays: %v, want %q", depth, err, want)
	}
	if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(1_000*depth); got > bound {
		t.Fatalf("decoding it allocated %d bytes, want under %d", got, bound)
	}
	shallow := DecodeJSON([]byte(`[[{"a":1,"a":2}]]`), &req)
	if want := `key "a" appears twice in element 0 of element 0 of the top-level object`; shallow == nil || !strings.Contains(shallow.Error(), want) {
		t.Fatalf("duplicate key under 2 arrays: %v, want %q", shallow, want)
	}
}
