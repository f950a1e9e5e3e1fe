package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolintent/engine/service"
)

// retention holds the metrics of the retention of idle sessions.
type retention struct {
	examined  prometheus.Counter
	deleted   *prometheus.CounterVec
	conflicts prometheus.Counter
	errors    prometheus.Counter
	ticks     prometheus.Counter
	lastTick  prometheus.Gauge
	tookLast  prometheus.Gauge
	remaining prometheus.Gauge
}

func newRetention(reg *prometheus.Registry) *retention {
	r := &retention{
		examined:  counter("engine_retention_examined_total", "Sessions the retention of idle sessions examined (serve --retain-idle)."),
		deleted:   counterVec("engine_retention_deleted_total", "Idle sessions retention deleted, by action (delete: SessionDeleted appended; erase: deleted and purged; compact: rolled up into one SessionCompacted, its replaced events purged).", "action"),
		conflicts: counter("engine_retention_conflicts_total", "Idle sessions retention kept because they were written (or deleted by another engine) between its examination and its delete."),
		errors:    counter("engine_retention_errors_total", "Sessions retention could not examine or delete (examined again in its next pass)."),
		ticks:     counter("engine_retention_ticks_total", "Retention ticks run by this engine."),
		lastTick:  gauge("engine_retention_last_tick_timestamp_seconds", "Unix time of the start of the last retention tick (0: none yet)."),
		tookLast:  gauge("engine_retention_last_tick_seconds", "Duration of the last retention tick."),
		remaining: gauge("engine_retention_pass_remaining_sessions", "Sessions of the current retention pass not examined yet (the pass's progress; 0: the next tick lists the sessions anew)."),
	}
	r.deleted.WithLabelValues(string(service.RetainDelete))
	r.deleted.WithLabelValues(string(service.RetainErase))
	r.deleted.WithLabelValues(string(service.RetainCompact))
	reg.MustRegister(r.examined, r.deleted, r.conflicts, r.errors, r.ticks, r.lastTick, r.tookLast, r.remaining)
	return r
}

// ObserveRetention records one retention tick's counts; use it as
// service.RetentionConfig.Observe.
func (m *Metrics) ObserveRetention(t service.RetentionTick) {
	r := m.ret
	r.ticks.Inc()
	r.examined.Add(float64(t.Examined))
	r.deleted.WithLabelValues(string(service.RetainDelete)).Add(float64(t.Deleted))
	r.deleted.WithLabelValues(string(service.RetainErase)).Add(float64(t.Erased))
	r.deleted.WithLabelValues(string(service.RetainCompact)).Add(float64(t.Compacted))
	r.conflicts.Add(float64(t.Conflicts))
	r.errors.Add(float64(t.Errors))
	r.lastTick.Set(float64(t.Started.UnixNano()) / 1e9)
	r.tookLast.Set(t.Took.Seconds())
	r.remaining.Set(float64(t.Remaining))
}
