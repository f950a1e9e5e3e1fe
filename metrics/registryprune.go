package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolintent/engine/service"
)

// registryPrune holds the metrics of the registry history's pruning
// (serve --registry-keep).
type registryPrune struct {
	kept       prometheus.Gauge
	referenced prometheus.Gauge
	remaining  prometheus.Gauge
	pruned     prometheus.Counter
	passes     prometheus.Counter
	errors     prometheus.Counter
	conflicts  prometheus.Counter
	lastPass   prometheus.Gauge
}

// registerOnce registers c on reg, or returns the collector registered
// before under the same name (a second observer of one Metrics).
func registerOnce[T prometheus.Collector](reg *prometheus.Registry, c T) T {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if have, ok := are.ExistingCollector.(T); ok {
				return have
			}
		}
	}
	return c
}

// RegistryPruneObserver registers the registry prune metrics (once per
// Metrics) and returns the observer of prune passes: use it as
// service.RegistryPruneConfig.Observe.
func (m *Metrics) RegistryPruneObserver() func(service.RegistryPrunePass) {
	r := &registryPrune{
		kept:       registerOnce(m.reg, gauge("engine_registry_versions_kept", "Registry versions whose content the registry history holds after the last prune pass (the newest --registry-keep plus the ones open turns and checkpoints reference).")),
		referenced: registerOnce(m.reg, gauge("engine_registry_versions_referenced", "Registry versions open turns and sessions' last checkpoints referenced at the last prune pass (the live one included).")),
		remaining:  registerOnce(m.reg, gauge("engine_registry_prune_remaining_versions", "Registry versions the last prune pass left for the next (its bound).")),
		pruned:     registerOnce(m.reg, counter("engine_registry_versions_pruned_total", "Registry versions pruned from the registry history by this engine (serve --registry-keep).")),
		passes:     registerOnce(m.reg, counter("engine_registry_prune_passes_total", "Registry prune passes run by this engine.")),
		errors:     registerOnce(m.reg, counter("engine_registry_prune_errors_total", "Registry prune passes that failed (nothing more pruned; the next pass retries).")),
		conflicts:  registerOnce(m.reg, counter("engine_registry_prune_conflicts_total", "Registry versions recorded again while a prune pass pruned them (kept).")),
		lastPass:   registerOnce(m.reg, gauge("engine_registry_prune_last_pass_timestamp_seconds", "Unix time of the start of the last registry prune pass (0: none yet).")),
	}
	return func(p service.RegistryPrunePass) {
		r.passes.Inc()
		r.lastPass.Set(float64(p.Started.UnixNano()) / 1e9)
		r.pruned.Add(float64(len(p.Pruned)))
		r.conflicts.Add(float64(p.Conflicts))
		if p.Err != nil {
			r.errors.Inc()
			return
		}
		r.kept.Set(float64(p.Kept))
		r.referenced.Set(float64(p.Referenced))
		r.remaining.Set(float64(p.Remaining))
	}
}
