package service

// Engine-side embeddings of tool_search: with an embedder (serve
// --embeddings-url), a query of the open turn is embedded by the
// operator's model and ranks by its keywords and that vector fused
// against the engine's vectors of the turn's tools. Whatever goes wrong
// (vectors not computed yet, the endpoint down or slow, a vector of
// another dimension) the search ranks by keywords and its note says so:
// never a failed search.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolintent/engine/deferral"
	"github.com/toolintent/engine/embedding"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/toolsearch"
)

// Embedder computes tool_search's vectors with the operator's embedding
// model (embedding.Provider). Implementations are safe for concurrent
// use.
type Embedder interface {
	// Prepare starts computing the vectors of reg's deferred tools in
	// the background, unless it has.
	Prepare(reg *resolver.Registry)
	// Vectors returns the vectors of the tools of ix, the search index
	// of reg's tools, once every deferred tool of reg has one; until
	// then nil, with how many have one, of how many.
	Vectors(reg *resolver.Registry, ix *toolsearch.Index) (vs *toolsearch.Vectors, ready, total int)
	// EmbedQuery returns a query's vector within QueryTimeout, or an
	// error wrapping embedding.ErrTimeout, ErrUnavailable or ErrEndpoint.
	EmbedQuery(ctx context.Context, query string) ([]float32, error)
	// QueryTimeout is the deadline of a query's embedding.
	QueryTimeout() time.Duration
}

// Outcomes of a query's ranking by the engine's embeddings
// (Hooks.SearchEmbedded): fused, or ranked by keywords and why.
const (
	EmbedFused       = "fused"       // keywords and vectors fused
	EmbedNotReady    = "not_ready"   // the tools' vectors are being computed
	EmbedTimeout     = "timeout"     // the endpoint did not answer the query in time
	EmbedUnavailable = "unavailable" // the endpoint failed a moment ago and is not asked yet
	EmbedError       = "error"       // the endpoint failed
	EmbedDimension   = "dimension"   // the query's vector has another dimension than the tools'
)

// embedderBox holds an Embedder in an atomic pointer.
type embedderBox struct{ Embedder }

// SetEmbedder has tool_search rank each query by its keywords and its
// vector from em fused (reciprocal rank fusion), against em's vectors of
// the turn's deferred tools, and has em compute the live registry's
// vectors now and each new registry's as it is served. A caller's
// query_vector still ranks by the registry's own embeddings. nil: by
// keywords only.
func (e *Engine) SetEmbedder(em Embedder) {
	if em == nil {
		e.embedder.Store(nil)
		return
	}
	e.embedder.Store(&embedderBox{em})
	em.Prepare(e.Registry())
}

// prepareEmbeddings has the embedder, if any, compute reg's vectors.
func (e *Engine) prepareEmbeddings(reg *resolver.Registry) {
	if b := e.embedder.Load(); b != nil {
		b.Prepare(reg)
	}
}

// embeddedSearch returns the engine's ranking by meaning of a query of
// the open turn ot, or nil and the note saying why the query ranks by
// keywords (no note without an embedder).
func (e *Engine) embeddedSearch(ctx context.Context, ot *openTurn, query string) (*deferral.Embedded, string) {
	b := e.embedder.Load()
	idx := ot.turn.Index()
	if b == nil || idx == nil {
		return nil, ""
	}
	observe := func(outcome string) {
		if h := e.cfg.Hooks.SearchEmbedded; h != nil {
			h(outcome)
		}
	}
	vs, ready, total := b.Vectors(ot.reg, idx.Search())
	if vs == nil {
		observe(EmbedNotReady)
		return nil, fmt.Sprintf("tool embeddings are being computed (%d of %d tools); ranked by keywords", ready, total)
	}
	q, err := b.EmbedQuery(ctx, query)
	switch {
	case errors.Is(err, embedding.ErrTimeout):
		observe(EmbedTimeout)
		return nil, fmt.Sprintf("the embedding endpoint did not answer within %v; ranked by keywords", b.QueryTimeout())
	case errors.Is(err, embedding.ErrUnavailable):
		observe(EmbedUnavailable)
		return nil, "the embedding endpoint is unavailable after a recent failure; ranked by keywords"
	case err != nil:
		observe(EmbedError)
		return nil, "the embedding endpoint failed; ranked by keywords"
	case len(q) != vs.Dim():
		observe(EmbedDimension)
		return nil, fmt.Sprintf("the embedding endpoint's query vector has %d numbers, the tool vectors %d; ranked by keywords", len(q), vs.Dim())
	}
	observe(EmbedFused)
	return &deferral.Embedded{Query: q, Vectors: vs}, ""
}
