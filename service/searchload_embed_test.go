package service_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/embedding"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/embedtest"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// With an embedder, a query the keywords miss finds its tool by the
// operator's model: "blorft zmiv" shares no word with any tool, and the
// stand-in endpoint embeds it as "pause playback". Until the tools'
// vectors are computed, and whenever the endpoint fails, is slow or
// answers a vector of another dimension, the search ranks by keywords
// and its note says why: never a failed search. A caller's query_vector
// keeps its own path (the registry's embeddings), and each query's
// outcome reaches the SearchEmbedded hook.
func TestDiscoverRanksByEngineEmbeddings(t *testing.T) {
	t.Parallel()
	s := embedtest.Start(t)
	s.Synonyms(map[string]string{"blorft": "pause", "zmiv": "playback"})
	data, err := embedtest.MCPRegistry(1065, "embed-v1")
	if err != nil {
		t.Fatal(err)
	}
	reg, err := resolver.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var outcomes []string
	hooks := service.Hooks{SearchEmbedded: func(o string) { mu.Lock(); outcomes = append(outcomes, o); mu.Unlock() }}
	e, _ := stackOn(t, natstest.Server(t).ClientURL(), jetstream.LogConfig{}, reg, service.Config{Hooks: hooks}, true)
	// A back-off of 400 ms (1 s by default) keeps the waits for its end
	// short; the search right after a failure still falls inside it.
	p, err := embedding.New(embedding.Config{URL: s.URL(), Model: "stand-in", QueryTimeout: 150 * time.Millisecond, Backoff: 400 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetEmbedder(p)
	ctx := context.Background()
	const sess = "embedded"
	on := true
	if _, err := e.Apply(ctx, sess, web, nil, events.ToolsToggled{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BeginTurn(ctx, sess, web, service.ResolveRequest{Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
	search := func(q string) wire.DiscoverReply {
		t.Helper()
		d, err := e.Discover(ctx, sess, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Query: q}})
		if err != nil {
			t.Fatalf("search %q: %v", q, err)
		}
		return d
	}
	const want = "mcp__spotify__pausePlayback"

	// Run has not started: the vectors are not there yet.
	d := search("blorft zmiv")
	if len(d.Loaded) != 0 || !strings.Contains(d.Note, "tool embeddings are being computed (0 of ") || !strings.Contains(d.Note, "ranked by keywords") {
		t.Fatalf("before the vectors: loaded %v, note %q", d.Loaded, d.Note)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(runCtx) }()
	t.Cleanup(func() { cancel(); <-done })
	natstest.CheckFor(t, 60*time.Second, 20*time.Millisecond, func() error {
		if d = search("blorft zmiv"); !slices.Contains(d.Loaded, want) && !slices.Contains(loadedIn(d), want) {
			return fmt.Errorf("loaded %v, note %q", d.Loaded, d.Note)
		}
		return nil
	})
	if strings.Contains(d.Note, "ranked by keywords") || d.Matches[0].Name != want {
		t.Errorf("fused: matches %+v, note %q; want %s first, not ranked by keywords", d.Matches, d.Note, want)
	}

	// Outage: the endpoint fails queries (5xx), then is not asked during
	// its back-off; the searches answer by keywords.
	s.Fail(http.StatusServiceUnavailable, true)
	if d = search("pause the music"); !strings.Contains(d.Note, "the embedding endpoint failed; ranked by keywords") || len(d.Matches) == 0 {
		t.Errorf("endpoint failing: matches %+v, note %q", d.Matches, d.Note)
	}
	if d = search("resume the music"); !strings.Contains(d.Note, "the embedding endpoint is unavailable after a recent failure; ranked by keywords") {
		t.Errorf("during the back-off: note %q", d.Note)
	}
	// Slow: past the deadline.
	s.Fail(0, true)
	s.Delay(3*time.Second, true)
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if d = search(fmt.Sprintf("skip track %d", time.Now().UnixNano())); !strings.Contains(d.Note, "the embedding endpoint did not answer within 150ms; ranked by keywords") {
			return fmt.Errorf("note %q", d.Note)
		}
		return nil
	})
	// Another dimension than the tools' vectors.
	s.Delay(0, true)
	s.SetDim(32)
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if d = search(fmt.Sprintf("volume up %d", time.Now().UnixNano())); !strings.Contains(d.Note, "the embedding endpoint's query vector has 32 numbers, the tool vectors 64; ranked by keywords") {
			return fmt.Errorf("note %q", d.Note)
		}
		return nil
	})
	// A caller's vector ranks by the registry's embeddings (none here).
	d2, err := e.Discover(ctx, sess, web, service.DiscoverRequest{Provider: service.ProviderAnthropicEngine, Search: deferral.SearchRequest{Query: "blorft zmiv", QueryVector: []float32{1, 0, 0}}})
	if err != nil || !strings.Contains(d2.Note, "this registry carries no tool embeddings") {
		t.Errorf("caller's query_vector: note %q, %v", d2.Note, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, o := range []string{service.EmbedNotReady, service.EmbedFused, service.EmbedError, service.EmbedUnavailable, service.EmbedTimeout, service.EmbedDimension} {
		if !slices.Contains(outcomes, o) {
			t.Errorf("hook outcomes %v lack %s", outcomes, o)
		}
	}
}

// loadedIn names the tools a search returned (loaded now or before).
func loadedIn(d wire.DiscoverReply) []string {
	var out []string
	for _, tool := range d.Tools {
		out = append(out, tool.Name)
	}
	return out
}
