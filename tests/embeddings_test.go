package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/embedtest"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/service"
	"github.com/toolintent/engine/wire"
)

// embeddingsRegistry writes a registry of the default tools and n MCP
// tools to a file and returns its path and its deferred tools' count.
func embeddingsRegistry(t *testing.T, n int) string {
	t.Helper()
	data, err := embedtest.MCPRegistry(n, fmt.Sprintf("embeddings-%d", n))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// embeddingArgs are the serve flags of engine-side embeddings at s.
func embeddingArgs(s *embedtest.Server, extra ...string) []string {
	return append([]string{"--embeddings-url", s.URL(), "--embeddings-model", "stand-in", "--embeddings-batch", "256", "--log-level", "info"}, extra...)
}

// waitEmbedded waits until the engine's /metrics says every deferred tool
// of its registry has its vector, and returns how many there are.
func waitEmbedded(t *testing.T, p *engineProc, wait time.Duration) int {
	t.Helper()
	total := 0
	natstest.CheckFor(t, wait, 100*time.Millisecond, func() error {
		m := scrape(t, p.HTTPURL)
		ready, n := m["engine_embedding_tools_ready"], m["engine_embedding_tools"]
		if n == 0 || ready != n {
			return fmt.Errorf("%v of %v tool vectors ready", ready, n)
		}
		total = int(n)
		return nil
	})
	return total
}

// openSearchTurn enables every tool of session and begins its turn.
func openSearchTurn(t *testing.T, p *engineProc, session string) {
	t.Helper()
	ctx := context.Background()
	on := true
	c := p.Client("web")
	if _, err := c.Append(ctx, session, nil, events.ToolsToggled{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.BeginTurn(ctx, wire.BeginTurnRequest{Session: session, Provider: service.ProviderAnthropicEngine}); err != nil {
		t.Fatal(err)
	}
}

// toolSearch runs the model's tool_search {"query": q} in session's turn.
func toolSearch(t *testing.T, p *engineProc, session, q string) (wire.DiscoverReply, time.Duration) {
	t.Helper()
	input, _ := json.Marshal(map[string]string{"query": q})
	start := time.Now()
	r, err := p.Client("web").ToolSearch(context.Background(), session, service.ProviderAnthropicEngine, input)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("tool_search %q: %v", q, err)
	}
	return r, took
}

var pausePlayback = regexp.MustCompile(`^mcp__spotify\d*__pausePlayback$`)

// With the stand-in endpoint configured, the engine binary embeds a
// 10,000-tool registry in batches in the background, with its progress
// in the log; a query no keyword reaches then finds its tool by vector,
// and a search whose query the endpoint does not embed in time answers
// by keywords within the query deadline, with a note saying so.
func TestEmbeddingsBinary10kWithinDeadline(t *testing.T) {
	s := embedtest.Start(t)
	s.Synonyms(map[string]string{"blorft": "pause", "zmiv": "playback"})
	p := startEngine(t, t.TempDir(), embeddingArgs(s, "--registry", embeddingsRegistry(t, 10_000))...)
	total := waitEmbedded(t, p, 5*time.Minute)
	if total < 10_000 {
		t.Fatalf("%d deferred tools embedded; want at least 10,000", total)
	}
	for _, n := range s.Sizes() {
		if n > 256 {
			t.Errorf("a request of %d inputs; want batches of at most 256", n)
		}
	}
	p.waitLog(t, "tool embeddings: progress", "tool embeddings ready")

	openSearchTurn(t, p, "big")
	r, took := toolSearch(t, p, "big", "blorft zmiv")
	if len(r.Loaded) == 0 || !pausePlayback.MatchString(r.Loaded[0]) || strings.Contains(r.Note, "ranked by keywords") {
		t.Fatalf("fused search at 10k tools: loaded %v, note %q", r.Loaded, r.Note)
	}
	t.Logf("fused tool_search over HTTP at %d tools: %v", total, took)

	s.Delay(5*time.Second, true) // queries only: far past the 200 ms deadline
	r, took = toolSearch(t, p, "big", "pause the spotify playback")
	if !strings.Contains(r.Note, "the embedding endpoint did not answer within 200ms; ranked by keywords") || len(r.Matches) == 0 || !pausePlayback.MatchString(r.Matches[0].Name) {
		t.Fatalf("slow endpoint: matches %+v, note %q; want the keyword ranking with a note", r.Matches, r.Note)
	}
	t.Logf("tool_search with the endpoint past its deadline: %v", took)
	if m := scrape(t, p.HTTPURL); m[`engine_tool_search_embedding_total{outcome="timeout"}`] != 1 || m[`engine_tool_search_embedding_total{outcome="fused"}`] != 1 {
		t.Errorf("search outcomes in /metrics: timeout %v, fused %v; want 1 and 1", m[`engine_tool_search_embedding_total{outcome="timeout"}`], m[`engine_tool_search_embedding_total{outcome="fused"}`])
	}
}

// The vectors are kept in the <PREFIX>_EMBEDDINGS bucket: an engine
// restarted on its data directory, and a second engine on the same NATS
// server, serve fused searches without asking the endpoint for any tool
// again.
func TestEmbeddingsBinaryCachedAcrossRestartsAndEngines(t *testing.T) {
	s := embedtest.Start(t)
	reg := embeddingsRegistry(t, 1065)
	dir := t.TempDir()
	p := startEngine(t, dir, embeddingArgs(s, "--registry", reg)...)
	total := waitEmbedded(t, p, 2*time.Minute)
	embedded := s.Inputs()
	if embedded != total {
		t.Fatalf("first start embedded %d texts for %d tools", embedded, total)
	}
	p.Stop(t)
	p = startEngine(t, dir, embeddingArgs(s, "--registry", reg)...)
	waitEmbedded(t, p, 2*time.Minute)
	if s.Inputs() != embedded {
		t.Fatalf("the restarted engine embedded %d tool texts again; want 0 (cached)", s.Inputs()-embedded)
	}
	if m := scrape(t, p.HTTPURL); m[`engine_embedding_cached_total{kind="tools"}`] != float64(total) {
		t.Errorf("restart: %v tool vectors from the cache; want %d", m[`engine_embedding_cached_total{kind="tools"}`], total)
	}
	openSearchTurn(t, p, "restarted")
	if r, _ := toolSearch(t, p, "restarted", "pause playback"); strings.Contains(r.Note, "ranked by keywords") || len(r.Loaded) == 0 {
		t.Errorf("after the restart: loaded %v, note %q; want a fused search", r.Loaded, r.Note)
	}
	p.Stop(t)

	// Two engines on one NATS server: the second reuses the first's.
	srv := natstest.Server(t)
	before := s.Inputs()
	a := startEngine(t, t.TempDir(), embeddingArgs(s, "--registry", reg, "--nats", srv.ClientURL())...)
	waitEmbedded(t, a, 2*time.Minute)
	if s.Inputs() != before+total {
		t.Fatalf("engine A on a fresh server embedded %d texts; want %d", s.Inputs()-before, total)
	}
	b := startEngine(t, t.TempDir(), embeddingArgs(s, "--registry", reg, "--nats", srv.ClientURL())...)
	waitEmbedded(t, b, 2*time.Minute)
	if s.Inputs() != before+total {
		t.Fatalf("engine B embedded %d tool texts; want 0 (A's vectors, from the bucket)", s.Inputs()-before-total)
	}
	openSearchTurn(t, b, "other-engine")
	if r, _ := toolSearch(t, b, "other-engine", "pause playback"); strings.Contains(r.Note, "ranked by keywords") || len(r.Loaded) == 0 {
		t.Errorf("engine B: loaded %v, note %q; want a fused search", r.Loaded, r.Note)
	}
}

// An endpoint outage degrades tool_search to keywords with a note, never
// an error: while the endpoint answers 503 the search loads its keyword
// matches, says the endpoint failed (then that it is in its back-off),
// and /metrics counts both; when it answers again searches are fused
// again.
func TestEmbeddingsBinaryOutageDegradesToKeywords(t *testing.T) {
	s := embedtest.Start(t)
	p := startEngine(t, t.TempDir(), embeddingArgs(s, "--registry", embeddingsRegistry(t, 1065))...)
	waitEmbedded(t, p, 2*time.Minute)
	openSearchTurn(t, p, "outage")
	s.Fail(http.StatusServiceUnavailable, false)
	r, _ := toolSearch(t, p, "outage", "pause the spotify playback")
	if !strings.Contains(r.Note, "the embedding endpoint failed; ranked by keywords") || !slices.Contains(r.Loaded, "mcp__spotify__pausePlayback") {
		t.Fatalf("outage: loaded %v, note %q; want the keyword match loaded and the note", r.Loaded, r.Note)
	}
	r, _ = toolSearch(t, p, "outage", "skip to the next track")
	if !strings.Contains(r.Note, "the embedding endpoint is unavailable after a recent failure; ranked by keywords") || len(r.Loaded) == 0 {
		t.Fatalf("outage, back-off: loaded %v, note %q", r.Loaded, r.Note)
	}
	m := scrape(t, p.HTTPURL)
	if m[`engine_tool_search_embedding_total{outcome="error"}`] != 1 || m[`engine_tool_search_embedding_total{outcome="unavailable"}`] != 1 || m[`engine_embedding_requests_total{kind="query",outcome="error"}`] != 1 {
		t.Errorf("outage metrics: search error %v, unavailable %v, query requests failed %v; want 1 each",
			m[`engine_tool_search_embedding_total{outcome="error"}`], m[`engine_tool_search_embedding_total{outcome="unavailable"}`], m[`engine_embedding_requests_total{kind="query",outcome="error"}`])
	}
	p.waitLog(t, "query embedding failed")
	s.Fail(0, false)
	natstest.CheckFor(t, 30*time.Second, 100*time.Millisecond, func() error {
		r, _ := toolSearch(t, p, "outage", fmt.Sprintf("set the volume %d", time.Now().UnixNano()))
		if strings.Contains(r.Note, "ranked by keywords") {
			return fmt.Errorf("note %q", r.Note)
		}
		return nil
	})
}
