package embedding

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/rs/zerolog"

	lrucache "github.com/toolintent/engine/internal/lru"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
)

// Defaults of a zero Config.
const (
	DefaultQueryTimeout   = 200 * time.Millisecond
	DefaultBatchSize      = 128
	DefaultRequestTimeout = 2 * time.Minute
	// MaxBatchSize is the most inputs one request may carry (OpenAI's
	// bound).
	MaxBatchSize = 2048
	// queryCacheSize bounds the query vectors kept: a repeated query costs
	// no request.
	queryCacheSize = 4096
	// keepRegistries is how many registries' tool lists are tracked (the
	// live one and the versions open turns may still search).
	keepRegistries = 4
)

// DefaultBackoff is Config.Backoff's default; a pause after failures in a
// row is at most backoffMax.
const (
	DefaultBackoff = time.Second
	backoffMax     = time.Minute
)

// Config configures a Provider. URL and Model are required; the other
// fields have defaults.
type Config struct {
	// URL is the endpoint's base URL (see Endpoint): http://localhost:11434
	// for Ollama, https://api.openai.com for OpenAI.
	URL string
	// Model is the embedding model's name, as the endpoint knows it.
	Model string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// QueryTimeout bounds the embedding of a query at search time; past
	// it the search ranks by keywords. Default 200 ms.
	QueryTimeout time.Duration
	// BatchSize is how many tool texts one request embeds. Default 128,
	// at most 2048.
	BatchSize int
	// RequestTimeout bounds one batch request. Default 2 min.
	RequestTimeout time.Duration
	// QueryPrefix and DocumentPrefix are put before a query's and a
	// tool's text, for models trained with them (nomic-embed-text:
	// "search_query: " and "search_document: "). A DocumentPrefix is part
	// of the cache key.
	QueryPrefix, DocumentPrefix string
	// MaxText bounds a tool's text in runes. Default DefaultMaxText.
	MaxText int
	// Backoff is the pause after a failed request before the endpoint is
	// asked again, by the tool embedding and by queries (which rank by
	// keywords meanwhile); it doubles with each failure in a row, to at
	// most a minute. Default DefaultBackoff (1 s).
	Backoff time.Duration
	// HTTPClient is the client requests go through; nil: one of the
	// provider's own.
	HTTPClient *http.Client
	// Logger receives the progress of the tool embedding and its
	// failures; the zero Logger discards them.
	Logger zerolog.Logger
	// Hooks observe the provider, for metrics.
	Hooks Hooks
}

// Hooks observe a Provider. Every field may be nil; they are called from
// the provider's goroutines.
type Hooks struct {
	// Request is called after each request to the endpoint: kind "tools"
	// (a batch of tool texts) or "query", the inputs sent, the tokens the
	// endpoint counted, the time taken and the error (nil when it
	// answered).
	Request func(kind string, inputs, tokens int, took time.Duration, err error)
	// Cached is called with the number of tool vectors read from the
	// cache instead of embedded, and of query vectors found in memory.
	Cached func(kind string, n int)
	// Progress is called as tool vectors arrive: how many of the
	// deferred tools of the registry being embedded have one, of how
	// many.
	Progress func(ready, total int)
}

// Validate reports every problem of the configuration at once, naming
// the `engine serve` flag of each.
func (c Config) Validate() error {
	var errs []error
	if _, err := Endpoint(c.URL); err != nil {
		errs = append(errs, fmt.Errorf("--embeddings-url: %w", err))
	}
	if c.Model == "" {
		errs = append(errs, errors.New("--embeddings-model is empty: give the model's name as the endpoint knows it, e.g. nomic-embed-text (Ollama) or text-embedding-3-small (OpenAI)"))
	}
	if c.QueryTimeout < 0 {
		errs = append(errs, fmt.Errorf("--embeddings-query-timeout %v: want a positive duration such as 200ms", c.QueryTimeout))
	}
	if c.BatchSize < 0 || c.BatchSize > MaxBatchSize {
		errs = append(errs, fmt.Errorf("--embeddings-batch %d: want 1 to %d (inputs per request)", c.BatchSize, MaxBatchSize))
	}
	if c.RequestTimeout < 0 {
		errs = append(errs, fmt.Errorf("--embeddings-request-timeout %v: want a positive duration such as 2m", c.RequestTimeout))
	}
	if c.MaxText < 0 {
		errs = append(errs, fmt.Errorf("embedding text bound %d: want a positive number of runes", c.MaxText))
	}
	if c.Backoff < 0 {
		errs = append(errs, fmt.Errorf("embedding back-off %v: want a positive duration such as 1s", c.Backoff))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	c.QueryTimeout = cmp.Or(c.QueryTimeout, DefaultQueryTimeout)
	c.BatchSize = cmp.Or(c.BatchSize, DefaultBatchSize)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	c.MaxText = cmp.Or(c.MaxText, DefaultMaxText)
	c.Backoff = cmp.Or(c.Backoff, DefaultBackoff)
	return c
}

// Provider computes and keeps tool_search's vectors with one model. Run
// embeds, in the background, the deferred tools of each registry Prepare
// or Vectors is given, most recent registry first; Vectors hands a
// search the vectors of a registry's tools once every one has its
// vector, and EmbedQuery embeds a query under the query deadline. A
// Provider is safe for concurrent use.
type Provider struct {
	cfg    Config
	client *Client
	cache  Cache // nil: vectors live in memory only
	key    string
	log    zerolog.Logger

	mu   sync.Mutex
	vecs map[string][]float32 // tool hash → unit vector
	dim  int                  // the dimension of vecs; 0 before the first vector
	regs []*regState          // most recent first, at most keepRegistries
	wake chan struct{}

	queries *lrucache.Cache[string, []float32]
	qmu     sync.Mutex
	qDown   time.Time // queries skip the endpoint until then
	qErr    error     // the failure that set qDown
	qPause  time.Duration
}

// regState is one registry's deferred tools and their vectors' progress.
type regState struct {
	reg    *resolver.Registry
	total  int               // deferred, available tools
	items  []item            // computed by the worker; nil before
	byName map[string]string // tool name → hash, with items
	ready  int               // items with a vector
	done   bool
	ix     *toolsearch.Index   // the index vs was built for
	vs     *toolsearch.Vectors // vectors of ix's tools, once done
}

// item is one tool to embed.
type item struct {
	name, hash, text string
}

// New returns a provider of cfg's model at cfg's endpoint, keeping its
// vectors in cache (nil: in memory only). It embeds nothing before Run.
func New(cfg Config, cache Cache) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c, err := NewClient(cfg.URL, cfg.Model, cfg.APIKey, cfg.HTTPClient)
	if err != nil {
		return nil, err
	}
	return &Provider{
		cfg: cfg, client: c, cache: cache, key: modelKey(cfg.Model, cfg.DocumentPrefix), log: cfg.Logger,
		vecs: map[string][]float32{}, wake: make(chan struct{}, 1),
		queries: lrucache.New[string, []float32](queryCacheSize),
	}, nil
}

// Model returns the model's name.
func (p *Provider) Model() string { return p.cfg.Model }

// QueryTimeout returns the deadline of a query's embedding.
func (p *Provider) QueryTimeout() time.Duration { return p.cfg.QueryTimeout }

// Prepare has Run embed reg's deferred tools (in the background) unless
// it has already.
func (p *Provider) Prepare(reg *resolver.Registry) {
	p.mu.Lock()
	p.state(reg)
	p.mu.Unlock()
}

// state returns reg's state, tracking it (and waking Run) on first use.
// p.mu is held.
func (p *Provider) state(reg *resolver.Registry) *regState {
	for i, st := range p.regs {
		if st.reg == reg {
			copy(p.regs[1:i+1], p.regs[:i])
			p.regs[0] = st
			return st
		}
	}
	st := &regState{reg: reg}
	for _, t := range reg.Tools() {
		if t.Deferred && t.Available {
			st.total++
		}
	}
	st.done = st.total == 0
	if len(p.regs) < keepRegistries {
		p.regs = append(p.regs, nil)
	}
	copy(p.regs[1:], p.regs)
	p.regs[0] = st
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return st
}

// Vectors returns the vectors of the tools of ix (the search index of
// reg's tools) once every deferred tool of reg has one; until then it
// returns nil and how many of them have one, of how many. The first call
// for a registry has Run embed its tools.
func (p *Provider) Vectors(reg *resolver.Registry, ix *toolsearch.Index) (vs *toolsearch.Vectors, ready, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.state(reg)
	if !st.done {
		return nil, st.ready, st.total
	}
	if st.ix != ix || st.vs == nil {
		// Built once per index, under the lock: a search of this
		// registry waits for it once (about 10 ms at 10,000 tools).
		st.ix = ix
		st.vs = ix.NewVectors(p.dim, func(i int) []float32 {
			if h, ok := st.byName[ix.Name(i)]; ok {
				return p.vecs[h]
			}
			return nil
		})
	}
	return st.vs, st.total, st.total
}

// Run embeds the deferred tools of the registries Prepare and Vectors
// were given, the most recent first, until ctx ends: the vectors the
// cache holds are read, the others embedded in batches of BatchSize and
// stored in the cache; progress and failures are logged, and a failed
// request is retried after a back-off (Config.Backoff, doubling to 1 min).
func (p *Provider) Run(ctx context.Context) {
	pause := p.cfg.Backoff
	for {
		st := p.next()
		if st == nil {
			select {
			case <-ctx.Done():
				return
			case <-p.wake:
				continue
			}
		}
		if err := p.embedRegistry(ctx, st); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Error().Err(err).Str("registry", st.reg.Version()).Dur("retry_in", pause).Msg("tool embeddings: searches rank by keywords until the endpoint answers")
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(2*pause, backoffMax)
			continue
		}
		pause = p.cfg.Backoff
	}
}

// next returns the most recent registry whose tools are not all
// embedded, or nil.
func (p *Provider) next() *regState {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, st := range p.regs {
		if !st.done {
			return st
		}
	}
	return nil
}

// embedRegistry gives every deferred tool of st's registry a vector: from
// memory, from the cache, or from the endpoint in batches.
func (p *Provider) embedRegistry(ctx context.Context, st *regState) error {
	start := time.Now()
	if st.items == nil {
		items, byName := p.itemsOf(st.reg)
		p.mu.Lock()
		st.items, st.byName = items, byName
		p.mu.Unlock()
	}
	missing := p.missing(st)
	fromCache := 0
	if len(missing) > 0 && p.cache != nil {
		n, err := p.loadCached(ctx, missing)
		if err != nil {
			p.log.Warn().Err(err).Msg("tool embeddings: read the cache; embedding instead")
		}
		fromCache = n
		if p.cfg.Hooks.Cached != nil && n > 0 {
			p.cfg.Hooks.Cached("tools", n)
		}
		missing = p.missing(st)
	}
	p.progress(st)
	if len(missing) > 0 || fromCache > 0 {
		p.log.Info().Str("registry", st.reg.Version()).Int("tools", len(st.items)).Int("cached", fromCache).Int("to_embed", len(missing)).
			Str("model", p.cfg.Model).Str("endpoint", p.client.URL()).Msg("tool embeddings: embedding in the background; searches rank by keywords until every tool has its vector")
	}
	requests, tokens, lastLog := 0, 0, time.Now()
	for len(missing) > 0 {
		batch := missing[:min(p.cfg.BatchSize, len(missing))]
		n, err := p.embedBatch(ctx, batch)
		tokens += n
		if err != nil {
			return fmt.Errorf("embed %d tools with model %q: %w", len(batch), p.cfg.Model, err)
		}
		requests++
		missing = missing[len(batch):]
		ready := p.progress(st)
		if time.Since(lastLog) >= time.Second || len(missing) == 0 || requests == 1 {
			p.log.Info().Str("registry", st.reg.Version()).Int("ready", ready).Int("total", st.total).Int("requests", requests).
				Dur("took", time.Since(start)).Msg("tool embeddings: progress")
			lastLog = time.Now()
		}
	}
	p.mu.Lock()
	st.done = true
	p.prune()
	dim := p.dim
	p.mu.Unlock()
	p.log.Info().Str("registry", st.reg.Version()).Int("tools", st.total).Int("cached", fromCache).Int("requests", requests).Int("tokens", tokens).
		Int("dimension", dim).Dur("took", time.Since(start)).Msg("tool embeddings ready: searches rank by keywords and vectors fused")
	return nil
}

// itemsOf lists reg's deferred, available tools with their hashes and
// texts.
func (p *Provider) itemsOf(reg *resolver.Registry) ([]item, map[string]string) {
	var items []item
	byName := map[string]string{}
	for _, t := range reg.Tools() {
		if !t.Deferred || !t.Available {
			continue
		}
		h := resolver.ToolHash(t)
		items = append(items, item{name: t.Name, hash: h, text: Text(t, p.cfg.MaxText)})
		byName[t.Name] = h
	}
	return items, byName
}

// missing returns st's items (one per hash) that have no vector yet.
func (p *Provider) missing(st *regState) []item {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []item
	seen := map[string]bool{}
	for _, it := range st.items {
		if _, ok := p.vecs[it.hash]; !ok && !seen[it.hash] {
			seen[it.hash] = true
			out = append(out, it)
		}
	}
	return out
}

// progress counts st's items that have a vector, records it and reports
// it to the Progress hook.
func (p *Provider) progress(st *regState) int {
	p.mu.Lock()
	n := 0
	for _, it := range st.items {
		if _, ok := p.vecs[it.hash]; ok {
			n++
		}
	}
	st.ready = n
	p.mu.Unlock()
	if p.cfg.Hooks.Progress != nil {
		p.cfg.Hooks.Progress(n, st.total)
	}
	return n
}

// loadCached reads the vectors of items the cache holds into memory and
// returns how many it read. A stored value of another format, or of
// another dimension than the vectors in memory, is skipped (embedded
// again).
func (p *Provider) loadCached(ctx context.Context, items []item) (int, error) {
	keys := make([]string, len(items))
	for i, it := range items {
		keys[i] = p.key + "." + it.hash
	}
	vals, err := p.cache.Load(ctx, p.key, keys)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for i, it := range items {
		v, ok := decodeVector(vals[keys[i]])
		if !ok || p.dim != 0 && len(v) != p.dim {
			continue
		}
		p.dim = len(v)
		p.vecs[it.hash] = normalized(v)
		n++
	}
	return n, nil
}

// embedBatch embeds one batch of tool texts, keeps the vectors and
// stores them in the cache; it returns the tokens the endpoint counted.
func (p *Provider) embedBatch(ctx context.Context, batch []item) (int, error) {
	texts := make([]string, len(batch))
	for i, it := range batch {
		texts[i] = p.cfg.DocumentPrefix + it.text
	}
	rctx, cancel := context.WithTimeout(ctx, p.cfg.RequestTimeout)
	start := time.Now()
	res, err := p.client.Embed(rctx, texts)
	cancel()
	if p.cfg.Hooks.Request != nil {
		p.cfg.Hooks.Request("tools", len(texts), res.Tokens, time.Since(start), err)
	}
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	if d := len(res.Vectors[0]); p.dim != 0 && d != p.dim {
		have := p.dim
		p.mu.Unlock()
		return res.Tokens, fmt.Errorf("%w: the endpoint answers vectors of %d numbers, the engine holds vectors of %d for model %q: the model behind the name changed; give it another name (--embeddings-model, e.g. with a tag) or delete the embeddings bucket", ErrDimension, d, have, p.cfg.Model)
	}
	p.dim = len(res.Vectors[0])
	for i, it := range batch {
		p.vecs[it.hash] = normalized(res.Vectors[i])
	}
	p.mu.Unlock()
	if p.cache != nil {
		for i, it := range batch {
			if err := p.cache.Put(ctx, p.key+"."+it.hash, encodeVector(normalized(res.Vectors[i]))); err != nil {
				p.log.Warn().Err(err).Msg("tool embeddings: store in the cache (kept in memory)")
				break
			}
		}
	}
	return res.Tokens, nil
}

// prune drops the vectors no tracked registry's tools have. p.mu is held.
func (p *Provider) prune() {
	keep := map[string]bool{}
	for _, st := range p.regs {
		if st.items == nil && !st.done {
			return // a registry whose tools are not listed yet may need any of them
		}
		for _, it := range st.items {
			keep[it.hash] = true
		}
	}
	for h := range p.vecs {
		if !keep[h] {
			delete(p.vecs, h)
		}
	}
}

// normalized returns v at unit length (v itself when it is).
func normalized(v []float32) []float32 {
	var sq float64
	for _, x := range v {
		sq += float64(x) * float64(x)
	}
	if math.Abs(sq-1) < 1e-6 || sq == 0 {
		return v
	}
	n := math.Sqrt(sq)
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / n)
	}
	return out
}

// EmbedQuery returns the vector of a search query, from memory when the
// same query was embedded before, else from the endpoint within
// QueryTimeout (or ctx's earlier deadline). After a failure the endpoint
// is not asked again for a back-off (1 s, doubling to 1 min, reset by an
// answer): queries meanwhile fail at once with ErrUnavailable, so that
// an outage costs searches no wait.
func (p *Provider) EmbedQuery(ctx context.Context, query string) ([]float32, error) {
	if v, ok := p.queries.Get(query); ok {
		if p.cfg.Hooks.Cached != nil {
			p.cfg.Hooks.Cached("query", 1)
		}
		return v, nil
	}
	now := time.Now()
	p.qmu.Lock()
	if now.Before(p.qDown) {
		err := fmt.Errorf("%w for %s after: %w", ErrUnavailable, p.qDown.Sub(now).Round(time.Millisecond), p.qErr)
		p.qmu.Unlock()
		return nil, err
	}
	p.qmu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, p.cfg.QueryTimeout)
	defer cancel()
	res, err := p.client.Embed(qctx, []string{p.cfg.QueryPrefix + query})
	took := time.Since(now)
	if p.cfg.Hooks.Request != nil {
		p.cfg.Hooks.Request("query", 1, res.Tokens, took, err)
	}
	if err != nil && ctx.Err() != nil {
		return nil, err // the search itself ended: no fault of the endpoint's
	}
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if err != nil {
		if errors.Is(err, ErrTimeout) {
			err = fmt.Errorf("%w: no answer within %v", err, p.cfg.QueryTimeout)
		}
		p.qPause = min(max(2*p.qPause, p.cfg.Backoff), backoffMax)
		p.qDown, p.qErr = time.Now().Add(p.qPause), err
		p.log.Warn().Err(err).Dur("retry_in", p.qPause).Msg("query embedding failed: tool_search ranks by keywords until the endpoint answers")
		return nil, err
	}
	p.qPause, p.qDown, p.qErr = 0, time.Time{}, nil
	p.queries.Put(query, res.Vectors[0])
	return res.Vectors[0], nil
}
