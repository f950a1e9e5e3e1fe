package metrics

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolintent/engine/embedding"
	"github.com/toolintent/engine/service"
)

// embeddingMetrics are the metrics of tool_search's engine-side
// embeddings (serve --embeddings-url).
type embeddingMetrics struct {
	requests *prometheus.CounterVec
	inputs   *prometheus.CounterVec
	tokens   *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	cached   *prometheus.CounterVec
	ready    prometheus.Gauge
	total    prometheus.Gauge
	search   *prometheus.CounterVec
}

// Kinds of embedding requests and outcomes of one.
var (
	embeddingKinds    = []string{"tools", "query"}
	embeddingOutcomes = []string{"ok", "timeout", "error"}
	searchOutcomes    = []string{service.EmbedFused, service.EmbedNotReady, service.EmbedTimeout, service.EmbedUnavailable, service.EmbedError, service.EmbedDimension}
)

func newEmbeddingMetrics(reg *prometheus.Registry) *embeddingMetrics {
	e := &embeddingMetrics{
		requests: counterVec("engine_embedding_requests_total", "Requests to the embedding endpoint (serve --embeddings-url), by kind (tools: a batch of tool texts; query: a tool_search query) and outcome (ok, timeout, error).", "kind", "outcome"),
		inputs:   counterVec("engine_embedding_inputs_total", "Texts sent to the embedding endpoint, by kind.", "kind"),
		tokens:   counterVec("engine_embedding_tokens_total", "Input tokens the embedding endpoint counted (usage.prompt_tokens), by kind.", "kind"),
		seconds:  histogramVec("engine_embedding_request_seconds", "Time of a request to the embedding endpoint, by kind.", []float64{1e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.2, 0.5, 1, 5, 30, 120}, "kind"),
		cached:   counterVec("engine_embedding_cached_total", "Vectors found instead of asked for: tools read from the <PREFIX>_EMBEDDINGS bucket, queries from memory.", "kind"),
		ready:    gauge("engine_embedding_tools_ready", "Deferred tools of the registry being embedded that have their vector."),
		total:    gauge("engine_embedding_tools", "Deferred tools of the registry being embedded."),
		search:   counterVec("engine_tool_search_embedding_total", "tool_search queries with engine-side embeddings, by outcome: fused (keywords and vectors), or ranked by keywords because the tool vectors were not ready (not_ready), the endpoint timed out (timeout), was in its back-off after a failure (unavailable), failed (error) or answered another dimension (dimension).", "outcome"),
	}
	for _, k := range embeddingKinds {
		for _, o := range embeddingOutcomes {
			e.requests.WithLabelValues(k, o)
		}
		e.inputs.WithLabelValues(k)
		e.tokens.WithLabelValues(k)
		e.cached.WithLabelValues(k)
	}
	for _, o := range searchOutcomes {
		e.search.WithLabelValues(o)
	}
	reg.MustRegister(e.requests, e.inputs, e.tokens, e.seconds, e.cached, e.ready, e.total, e.search)
	return e
}

// EmbeddingHooks feed the embedding metrics; use them as
// embedding.Config.Hooks.
func (m *Metrics) EmbeddingHooks() embedding.Hooks {
	e := m.emb
	return embedding.Hooks{
		Request: func(kind string, inputs, tokens int, took time.Duration, err error) {
			outcome := "ok"
			switch {
			case errors.Is(err, embedding.ErrTimeout):
				outcome = "timeout"
			case err != nil:
				outcome = "error"
			}
			e.requests.WithLabelValues(kind, outcome).Inc()
			e.inputs.WithLabelValues(kind).Add(float64(inputs))
			e.tokens.WithLabelValues(kind).Add(float64(tokens))
			e.seconds.WithLabelValues(kind).Observe(took.Seconds())
		},
		Cached: func(kind string, n int) { e.cached.WithLabelValues(kind).Add(float64(n)) },
		Progress: func(ready, total int) {
			e.ready.Set(float64(ready))
			e.total.Set(float64(total))
		},
	}
}
