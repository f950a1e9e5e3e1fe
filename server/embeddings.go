package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"github.com/toolintent/engine/embedding"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/metrics"
	"github.com/toolintent/engine/service"
)

// The vector bucket is the provider's cache, and the provider is the
// service's embedder.
var (
	_ embedding.Cache  = (*jetstream.Embeddings)(nil)
	_ service.Embedder = (*embedding.Provider)(nil)
)

// embeddingsOn reports whether the configuration asks for engine-side
// embeddings (--embeddings-url or --embeddings-model given).
func (c Config) embeddingsOn() bool { return c.Embeddings.URL != "" || c.Embeddings.Model != "" }

// validEmbeddings checks the embeddings flags when any is given.
func (c Config) validEmbeddings() error {
	if !c.embeddingsOn() {
		return nil
	}
	if c.Embeddings.URL == "" || c.Embeddings.Model == "" {
		return errors.New("--embeddings-url and --embeddings-model go together: give the endpoint's base URL and the model's name, e.g. --embeddings-url http://localhost:11434 --embeddings-model nomic-embed-text")
	}
	return c.Embeddings.Validate()
}

// startEmbeddings gives the engine its embedder: the provider of
// cfg.Embeddings with the <PREFIX>_EMBEDDINGS bucket as its cache, run
// until ctx ends. Without --embeddings-url it does nothing.
func startEmbeddings(ctx context.Context, cfg Config, jlog *jetstream.Log, eng *service.Engine, m *metrics.Metrics, log zerolog.Logger) error {
	if !cfg.embeddingsOn() {
		return nil
	}
	cache, err := jlog.OpenEmbeddings(ctx)
	if err != nil {
		return err
	}
	ecfg := cfg.Embeddings
	ecfg.Logger = log
	ecfg.Hooks = m.EmbeddingHooks()
	p, err := embedding.New(ecfg, cache)
	if err != nil {
		return fmt.Errorf("embeddings: %w", err)
	}
	go p.Run(ctx)
	eng.SetEmbedder(p)
	url, _ := embedding.Endpoint(ecfg.URL)
	log.Info().Str("endpoint", url).Str("model", p.Model()).Dur("query_timeout", p.QueryTimeout()).Str("bucket", cache.Bucket()).
		Msg("tool_search embeddings on: tools are embedded in the background, queries within the deadline; keywords meanwhile")
	return nil
}
