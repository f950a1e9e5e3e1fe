package embedding

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/internal/embedtest"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
)

// memCache is a Cache in memory, shared by the providers of a test as
// the KV bucket is by engines (the bucket itself is tested in package
// jetstream against a real server).
type memCache struct {
	mu    sync.Mutex
	m     map[string][]byte
	loads int
}

func newMemCache() *memCache { return &memCache{m: map[string][]byte{}} }

func (c *memCache) Load(_ context.Context, prefix string, keys []string) (map[string][]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loads++
	out := map[string][]byte{}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix+".") {
			return nil, fmt.Errorf("key %s outside prefix %s", k, prefix)
		}
		if v, ok := c.m[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

func (c *memCache) Put(_ context.Context, key string, value []byte) error {
	c.mu.Lock()
	c.m[key] = value
	c.mu.Unlock()
	return nil
}

func (c *memCache) len() int { c.mu.Lock(); defer c.mu.Unlock(); return len(c.m) }

// syncBuffer is a log sink safe for the provider's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// mcpRegistry loads a registry of the default tools and n MCP tools.
func mcpRegistry(t testing.TB, n int, version string, edit func([]byte) []byte) *resolver.Registry {
	t.Helper()
	data, err := embedtest.MCPRegistry(n, version)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		data = edit(data)
	}
	reg, err := resolver.Load(data)
	if err != nil {
		t.Fatal(err)
	}
	return reg
}

// deferredCount counts reg's deferred, available tools.
func deferredCount(reg *resolver.Registry) int {
	n := 0
	for _, t := range reg.Tools() {
		if t.Deferred && t.Available {
			n++
		}
	}
	return n
}

// startProvider runs a provider of model at s until the test ends.
func startProvider(t *testing.T, s *embedtest.Server, model string, cache Cache, log *syncBuffer, batch int) *Provider {
	t.Helper()
	cfg := Config{URL: s.URL(), Model: model, BatchSize: batch}
	if log != nil {
		cfg.Logger = zerolog.New(log)
	}
	p, err := New(cfg, cache)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// waitVectors waits until p has the vectors of reg's tools and returns
// them, for reg's search index.
func waitVectors(t *testing.T, p *Provider, reg *resolver.Registry, wait time.Duration) *toolsearch.Vectors {
	t.Helper()
	ix := deferral.IndexFor(reg).Search()
	var vs *toolsearch.Vectors
	natstest.CheckFor(t, wait, 10*time.Millisecond, func() error {
		var ready, total int
		vs, ready, total = p.Vectors(reg, ix)
		if vs == nil {
			return fmt.Errorf("%d of %d tool vectors ready", ready, total)
		}
		return nil
	})
	return vs
}

// Each deferred tool is embedded once per (model, tool contract hash):
// a registry version that changes one tool's description embeds that
// tool only; a provider started afresh on the same cache (a restart, or
// another engine) embeds nothing; a query embedded from a tool's own text
// finds that tool first. Until the vectors are ready, Vectors says how
// far along they are.
func TestProviderCachesByContractHash(t *testing.T) {
	s := embedtest.Start(t)
	cache := newMemCache()
	reg := mcpRegistry(t, 1065, "v1", nil)
	total := deferredCount(reg)
	p := startProvider(t, s, "stand-in", cache, nil, 64)
	if vs, ready, tot := p.Vectors(reg, deferral.IndexFor(reg).Search()); vs != nil || tot != total || ready > total {
		t.Fatalf("before Run's first batch: vectors %v, %d of %d; want none yet, of %d", vs != nil, ready, tot, total)
	}
	vs := waitVectors(t, p, reg, 30*time.Second)
	if vs.Len() != total || s.Inputs() != total || cache.len() != total {
		t.Fatalf("first embedding: %d vectors, %d inputs, %d cached; want %d each", vs.Len(), s.Inputs(), cache.len(), total)
	}

	// One description changed: one tool embedded again.
	reg2 := mcpRegistry(t, 1065, "v2", func(b []byte) []byte {
		return bytes.Replace(b, []byte(`"Create a new issue in a GitHub repository`), []byte(`"Open a brand new issue in a GitHub repository`), 1)
	})
	if resolver.ToolHash(mustTool(t, reg2, "mcp__github__create_issue")) == resolver.ToolHash(mustTool(t, reg, "mcp__github__create_issue")) {
		t.Fatal("the edit did not change mcp__github__create_issue's contract")
	}
	before := s.Inputs()
	vs2 := waitVectors(t, p, reg2, 30*time.Second)
	if got := s.Inputs() - before; got != 1 || s.Embedded("Open a brand new issue") != 1 || vs2.Len() != total {
		t.Fatalf("after one description changed: %d inputs embedded (the changed one %d times), %d vectors; want 1, 1, %d", got, s.Embedded("Open a brand new issue"), vs2.Len(), total)
	}

	// A restart (or another engine) on the same cache embeds nothing.
	requests := s.Requests()
	p2 := startProvider(t, s, "stand-in", cache, nil, 64)
	vs3 := waitVectors(t, p2, reg2, 30*time.Second)
	if s.Requests() != requests || vs3.Len() != total {
		t.Fatalf("a provider on the same cache made %d requests, has %d vectors; want 0 and %d", s.Requests()-requests, vs3.Len(), total)
	}

	// A tool's own text, embedded as a query, ranks that tool first.
	ix := deferral.IndexFor(reg2).Search()
	tool := mustTool(t, reg2, "mcp__slack__slack_post_message")
	q, err := p2.EmbedQuery(context.Background(), Text(tool, DefaultMaxText))
	if err != nil {
		t.Fatal(err)
	}
	if hits := ix.SemanticWith(vs3, q, 3, nil); len(hits) == 0 || hits[0].Name != tool.Name {
		t.Errorf("the query of %s's own text ranks %v first", tool.Name, hits)
	}
}

func mustTool(t *testing.T, reg *resolver.Registry, name string) resolver.Tool {
	t.Helper()
	tool, ok := reg.Tool(name)
	if !ok {
		t.Fatalf("no tool %s", name)
	}
	return tool
}

// Another model (or another name for it) embeds every tool again, under
// keys of its own: the two models' vectors live side by side in one
// cache, and a provider of the first model still needs no request.
func TestProviderModelChange(t *testing.T) {
	s := embedtest.Start(t)
	cache := newMemCache()
	reg := mcpRegistry(t, 100, "v1", nil)
	total := deferredCount(reg)
	waitVectors(t, startProvider(t, s, "model-a", cache, nil, 0), reg, 30*time.Second)
	vb := waitVectors(t, startProvider(t, s, "model-b", cache, nil, 0), reg, 30*time.Second)
	if m := s.Models(); m["model-a"] == 0 || m["model-b"] == 0 || cache.len() != 2*total || vb.Len() != total {
		t.Fatalf("requests per model %v, %d cached; want both models asked and %d cached", m, cache.len(), 2*total)
	}
	requests := s.Requests()
	waitVectors(t, startProvider(t, s, "model-a", cache, nil, 0), reg, 30*time.Second)
	if s.Requests() != requests {
		t.Errorf("model-a again made %d requests; want 0 (its vectors are cached)", s.Requests()-requests)
	}
}

// The tool embedding survives a failing endpoint: 5xx answers and
// answers with vectors of two dimensions are logged and retried after a
// back-off, and the vectors arrive once the endpoint answers well. An
// endpoint that changes dimension under the same model name is refused
// with the fix, and the vectors already there stay in use.
func TestProviderEndpointFaults(t *testing.T) {
	s := embedtest.Start(t)
	log := &syncBuffer{}
	reg := mcpRegistry(t, 50, "v1", nil)
	s.Fail(http.StatusInternalServerError, false)
	p := startProvider(t, s, "stand-in", newMemCache(), log, 0)
	p.Prepare(reg)
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(log.String(), "stand-in told to fail with 500") {
			return errors.New("no failure logged yet")
		}
		return nil
	})
	if vs, _, _ := p.Vectors(reg, deferral.IndexFor(reg).Search()); vs != nil {
		t.Fatal("vectors ready while the endpoint fails")
	}
	s.Fail(0, false)
	s.BadDimension(true)
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(log.String(), "in one request; want one dimension") {
			return errors.New("no dimension failure logged yet")
		}
		return nil
	})
	s.BadDimension(false)
	vs := waitVectors(t, p, reg, 30*time.Second)
	if vs.Dim() != embedtest.DefaultDim {
		t.Fatalf("dimension %d, want %d", vs.Dim(), embedtest.DefaultDim)
	}

	s.SetDim(32)
	reg2 := mcpRegistry(t, 200, "v2", nil)
	p.Prepare(reg2)
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if !strings.Contains(log.String(), "the model behind the name changed") {
			return errors.New("no dimension change logged yet")
		}
		return nil
	})
	if vs2, _, _ := p.Vectors(reg2, deferral.IndexFor(reg2).Search()); vs2 != nil {
		t.Error("vectors of two dimensions mixed")
	}
	if again, _, _ := p.Vectors(reg, deferral.IndexFor(reg).Search()); again == nil {
		t.Error("the first registry's vectors are gone")
	}
}

// A query is embedded within the query deadline or not at all: a slow
// endpoint is ErrTimeout naming the deadline, after which queries fail at
// once with ErrUnavailable for the back-off, then are asked again; 5xx
// is ErrEndpoint; a query embedded before is answered from memory, even
// while the endpoint is down.
func TestProviderQueryDeadline(t *testing.T) {
	s := embedtest.Start(t)
	p, err := New(Config{URL: s.URL(), Model: "stand-in", QueryTimeout: 100 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	known, err := p.EmbedQuery(ctx, "send a message")
	if err != nil || len(known) != embedtest.DefaultDim {
		t.Fatalf("EmbedQuery: %d numbers, %v", len(known), err)
	}
	s.Delay(5*time.Second, true)
	_, err = p.EmbedQuery(ctx, "create an issue")
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "within 100ms") {
		t.Fatalf("slow endpoint: %v; want ErrTimeout within 100ms", err)
	}
	requests := s.Requests()
	if _, err := p.EmbedQuery(ctx, "create an issue"); !errors.Is(err, ErrUnavailable) || s.Requests() != requests {
		t.Fatalf("during the back-off: %v, %d requests; want ErrUnavailable at once, no request", err, s.Requests()-requests)
	}
	if v, err := p.EmbedQuery(ctx, "send a message"); err != nil || len(v) != len(known) {
		t.Errorf("a known query during the back-off: %v; want it from memory", err)
	}
	s.Delay(0, true)
	s.Fail(http.StatusBadGateway, true)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		_, err := p.EmbedQuery(ctx, "create an issue")
		if !errors.Is(err, ErrEndpoint) {
			return fmt.Errorf("after the back-off: %v; want ErrEndpoint (502)", err)
		}
		return nil
	})
	s.Fail(0, true)
	natstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		_, err := p.EmbedQuery(ctx, "create an issue")
		return err
	})
}

// A 10,000-tool registry is embedded in requests of at most BatchSize
// inputs, every tool once, with its progress in the log.
func TestProvider10kToolsInBatches(t *testing.T) {
	s := embedtest.Start(t)
	log := &syncBuffer{}
	reg := mcpRegistry(t, 10_000, "v10k", nil)
	total := deferredCount(reg)
	if total < 10_000 {
		t.Fatalf("registry has %d deferred tools; want at least 10,000", total)
	}
	p := startProvider(t, s, "stand-in", newMemCache(), log, 256)
	vs := waitVectors(t, p, reg, 3*time.Minute)
	sizes := s.Sizes()
	sum := 0
	for _, n := range sizes {
		if n > 256 {
			t.Errorf("a request of %d inputs; want at most 256", n)
		}
		sum += n
	}
	if sum != total || len(sizes) != (total+255)/256 || vs.Len() != total {
		t.Errorf("%d requests of %d inputs in all, %d vectors; want %d requests, %d inputs and vectors", len(sizes), sum, vs.Len(), (total+255)/256, total)
	}
	out := log.String()
	if strings.Count(out, `"message":"tool embeddings: progress"`) < 2 || !strings.Contains(out, fmt.Sprintf(`"ready":%d,"total":%d`, total, total)) ||
		!strings.Contains(out, "tool embeddings ready") {
		t.Errorf("log lacks the progress lines:\n%.2000s", out)
	}
}
