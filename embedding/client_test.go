package embedding

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/internal/embedtest"
)

// Endpoint appends /v1/embeddings to a base URL, /embeddings to one
// ending in /v1, nothing to one ending in /embeddings, keeps a query, and
// refuses what is not an http(s) URL with a host, naming an example.
func TestEndpoint(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:11434":                    "http://localhost:11434/v1/embeddings",
		"http://localhost:11434/":                   "http://localhost:11434/v1/embeddings",
		"https://api.openai.com/v1":                 "https://api.openai.com/v1/embeddings",
		"http://tei:8080/v1/embeddings":             "http://tei:8080/v1/embeddings",
		"https://x.example/openai/v1?api-version=1": "https://x.example/openai/v1/embeddings?api-version=1",
	} {
		if got, err := Endpoint(in); err != nil || got != want {
			t.Errorf("Endpoint(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "localhost:11434", "ftp://host/v1", "http://"} {
		if _, err := Endpoint(bad); err == nil || !strings.Contains(err.Error(), "http://localhost:11434") {
			t.Errorf("Endpoint(%q) = %v; want an error naming an example", bad, err)
		}
	}
}

// The client posts {"model","input":[...]} and returns the vectors in
// input order with the endpoint's token count; an error status is
// ErrEndpoint quoting the endpoint's message, a slow endpoint past the
// deadline ErrTimeout, and vectors of two dimensions in one answer
// ErrEndpoint.
func TestClientEmbed(t *testing.T) {
	s := embedtest.Start(t)
	c, err := NewClient(s.URL(), "stand-in", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := c.Embed(ctx, []string{"create an issue", "send a message", "create an issue"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Vectors) != 3 || len(res.Vectors[0]) != embedtest.DefaultDim || res.Tokens != 9 {
		t.Fatalf("Embed: %d vectors of %d, %d tokens; want 3 of %d, 9 tokens", len(res.Vectors), len(res.Vectors[0]), res.Tokens, embedtest.DefaultDim)
	}
	want := embedtest.Vector("stand-in", "send a message", embedtest.DefaultDim)
	for i := range want {
		if res.Vectors[1][i] != want[i] || res.Vectors[0][i] != res.Vectors[2][i] {
			t.Fatalf("vector 1 is not the stand-in's vector of its input, or equal inputs differ")
		}
	}
	if s.Models()["stand-in"] != 1 {
		t.Errorf("requests per model %v; want the client's model named", s.Models())
	}

	s.Fail(http.StatusServiceUnavailable, false)
	_, err = c.Embed(ctx, []string{"x"})
	if !errors.Is(err, ErrEndpoint) || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "stand-in told to fail with 503") {
		t.Errorf("5xx: %v; want ErrEndpoint with the status and the endpoint's message", err)
	}
	s.Fail(0, false)

	s.Delay(2*time.Second, false)
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Embed(tctx, []string{"x"})
	cancel()
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("slow endpoint: %v; want ErrTimeout", err)
	}
	s.Delay(0, false)

	s.BadDimension(true)
	_, err = c.Embed(ctx, []string{"a", "b"})
	if !errors.Is(err, ErrEndpoint) || !strings.Contains(err.Error(), "one dimension") {
		t.Errorf("two dimensions in one answer: %v; want ErrEndpoint", err)
	}
}
