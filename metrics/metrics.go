// Package metrics holds the engine's Prometheus metrics and the hooks that
// feed them from the service and the projection.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolintent/engine/internal/buildinfo"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/service"
)

// Metrics is one registry of the engine's metrics. Safe for concurrent use.
type Metrics struct {
	reg           *prometheus.Registry
	appends       prometheus.Counter
	events        prometheus.Counter
	dedupes       prometheus.Counter
	conflicts     *prometheus.CounterVec
	undecodable   prometheus.Counter
	rejected      prometheus.Counter
	lagEvents     prometheus.Gauge
	lagSeconds    prometheus.Gauge
	folded        prometheus.Counter
	resolve       prometheus.Histogram
	prefixChange  *prometheus.CounterVec
	prefixExtend  *prometheus.CounterVec
	catalogChange *prometheus.CounterVec
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	ret           *retention // retention of idle sessions
	emb           *embeddingMetrics

	chMu     sync.Mutex
	channels map[string]bool // channel label values in use, at most maxChannels

	lagMu sync.Mutex
	lags  []projLag // each projection's last lag, in ProjectionConfig order
}

// maxChannels bounds the channel label's values: an HTTP caller names its
// channel in a header, so beyond this many the others count as "other".
const maxChannels = 64

// New registers the engine's metrics (and the Go and process collectors)
// in a fresh registry.
func New() *Metrics {
	m := &Metrics{
		reg:           prometheus.NewRegistry(),
		appends:       counter("engine_appends_total", "Appends stored in the log (one per command call that wrote events)."),
		events:        counter("engine_events_appended_total", "Events stored in the log by this engine."),
		dedupes:       counter("engine_dedupes_total", "Appends the log had already stored (retried publishes with the same ULIDs)."),
		conflicts:     counterVec("engine_conflicts_total", "Optimistic-concurrency conflicts, by whether the engine retried them.", "retried"),
		undecodable:   counter("engine_undecodable_events_total", "Events the projection kept in the log but could not fold (undecodable, unknown type, future version)."),
		rejected:      counter("engine_rejected_events_total", "Events the projection kept in the log but did not apply because they break a fold rule (see docs/semantics.md#events-the-engine-does-not-apply)."),
		lagEvents:     gauge("engine_projection_lag_events", "Events in the log not yet folded into the views (over every partition's stream)."),
		lagSeconds:    gauge("engine_projection_lag_seconds", "Age of the newest event of the last folded batch when it was folded (the largest of the partitions' streams)."),
		folded:        counter("engine_projection_folded_total", "Events folded into the views."),
		resolve:       histogram("engine_resolve_seconds", "Latency of tool resolution.", []float64{1e-7, 5e-7, 1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 1e-3, 1e-2}),
		prefixChange:  counterVec("engine_tool_prefix_changes_total", "Dispatches whose provider tools array changed a byte of the session's previous one (a prompt-cache break), by cause.", "cause"),
		prefixExtend:  counterVec("engine_tool_prefix_extensions_total", "Dispatches whose provider tools array only appended tools after the session's previous one (the cached prefix holds), by cause.", "cause"),
		catalogChange: counterVec("engine_catalog_changes_total", "Dispatches whose deferred-tool catalog text differs from the session's previous one, by cause.", "cause"),
	}
	m.requests = counterVec("engine_api_requests_total", "API requests answered (NATS and HTTP), by operation, channel and outcome (ok or the error code).", "op", "channel", "outcome")
	m.latency = histogramVec("engine_api_request_seconds", "Time to answer an API request (NATS and HTTP), by operation, channel and outcome.", []float64{1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1, 5, 30}, "op", "channel", "outcome")
	m.channels = map[string]bool{}
	m.reg.MustRegister(m.requests, m.latency, buildInfo())
	m.reg.MustRegister(m.appends, m.events, m.dedupes, m.conflicts, m.undecodable, m.rejected, m.lagEvents, m.lagSeconds,
		m.folded, m.resolve, m.prefixChange, m.prefixExtend, m.catalogChange, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, c := range []string{"intent", "registry", "discovery", "turn", "evict"} {
		m.prefixChange.WithLabelValues(c)
		m.prefixExtend.WithLabelValues(c)
		m.catalogChange.WithLabelValues(c)
	}
	m.conflicts.WithLabelValues("true")
	m.conflicts.WithLabelValues("false")
	m.ret = newRetention(m.reg)
	m.emb = newEmbeddingMetrics(m.reg)
	return m
}

// buildInfo is the constant engine_build_info gauge: 1, with the module
// version, VCS commit, Go and nats-server versions as labels.
func buildInfo() prometheus.Collector {
	b := buildinfo.Read()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "engine_build_info", Help: "The engine's build: version and commit of the module, Go and embedded nats-server versions (value 1).",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": b.Commit, "goversion": b.Go, "nats_server": b.NATSServer},
	})
	g.Set(1)
	return g
}

// ObserveRequest counts one answered API request and its latency, by
// operation, channel ("" is "unknown") and outcome ("ok" or the error
// code); use it as api.Config.Observe.
func (m *Metrics) ObserveRequest(op, channel, outcome string, took time.Duration) {
	if channel == "" {
		channel = "unknown"
	}
	m.chMu.Lock()
	if !m.channels[channel] {
		if len(m.channels) >= maxChannels {
			channel = "other"
		} else {
			m.channels[channel] = true
		}
	}
	m.chMu.Unlock()
	m.requests.WithLabelValues(op, channel, outcome).Inc()
	m.latency.WithLabelValues(op, channel, outcome).Observe(took.Seconds())
}

// Handler serves /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Hooks feed the service's counters.
func (m *Metrics) Hooks() service.Hooks {
	return service.Hooks{
		Appended: func(n int, dup bool) {
			if dup {
				m.dedupes.Inc()
				return
			}
			m.appends.Inc()
			m.events.Add(float64(n))
		},
		Conflict: func(retried bool) {
			if retried {
				m.conflicts.WithLabelValues("true").Inc()
			} else {
				m.conflicts.WithLabelValues("false").Inc()
			}
		},
		Resolved:       func(d time.Duration) { m.resolve.Observe(d.Seconds()) },
		PrefixChanged:  func(cause string) { m.prefixChange.WithLabelValues(cause).Inc() },
		PrefixExtended: func(cause string) { m.prefixExtend.WithLabelValues(cause).Inc() },
		CatalogChanged: func(cause string) { m.catalogChange.WithLabelValues(cause).Inc() },
		SearchEmbedded: func(outcome string) { m.emb.search.WithLabelValues(outcome).Inc() },
	}
}

// ProjectionConfig returns cfg with the projection's hooks set. Each
// call adds a projection to the gauges (one per partition's stream): the
// lag in events is their sum, the lag in seconds their largest, over the
// projections this engine runs (a standby's lag is the runner's to
// report).
func (m *Metrics) ProjectionConfig(cfg projection.Config) projection.Config {
	m.lagMu.Lock()
	slot := len(m.lags)
	m.lags = append(m.lags, projLag{})
	m.lagMu.Unlock()
	cfg.OnSkip = func(logport.Record) { m.undecodable.Inc() }
	cfg.OnReject = func(logport.Record, error) { m.rejected.Inc() }
	cfg.OnBatch = func(n int, lag time.Duration, pending uint64) {
		m.folded.Add(float64(n))
		m.setLag(slot, projLag{pending, lag})
	}
	cfg.OnStandby = func() { m.setLag(slot, projLag{}) }
	return cfg
}

// setLag records one projection's lag and sets the gauges from all of
// them.
func (m *Metrics) setLag(slot int, l projLag) {
	m.lagMu.Lock()
	defer m.lagMu.Unlock()
	m.lags[slot] = l
	var sum uint64
	var most time.Duration
	for _, l := range m.lags {
		sum, most = sum+l.pending, max(most, l.age)
	}
	m.lagEvents.Set(float64(sum))
	m.lagSeconds.Set(most.Seconds())
}

// projLag is one projection's lag at its last batch.
type projLag struct {
	pending uint64
	age     time.Duration
}
