package metrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/toolintent/engine/projection"
)

// With a projection per partition, the lag gauges cover them all: the
// events behind are summed, the age is the largest, and each projection's
// later batch replaces only its own figures.
func TestProjectionLagCoversEveryProjection(t *testing.T) {
	m := New()
	a := m.ProjectionConfig(projection.Config{})
	b := m.ProjectionConfig(projection.Config{})
	a.OnBatch(3, 2*time.Second, 5)
	b.OnBatch(4, time.Second, 7)
	if got := value(t, m.lagEvents); got != 12 {
		t.Fatalf("lag events %v, want 5 + 7", got)
	}
	if got := value(t, m.lagSeconds); got != 2 {
		t.Fatalf("lag seconds %v, want the largest, 2", got)
	}
	a.OnBatch(1, 0, 0)
	if got, secs := value(t, m.lagEvents), value(t, m.lagSeconds); got != 7 || secs != 1 {
		t.Fatalf("after the first caught up: lag %v events, %v s, want the second's 7 and 1", got, secs)
	}
	if got := value(t, m.folded); got != 8 {
		t.Fatalf("folded %v, want 8", got)
	}
}

// value reads a gauge's or counter's value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	if g := out.GetGauge(); g != nil {
		return g.GetValue()
	}
	return out.GetCounter().GetValue()
}

// A projection that stops folding (its runner lease went to another
// engine) takes its last lag out of the gauges: the runner reports it.
func TestProjectionLagLeavesTheGaugesWhenTheProjectionStandsBy(t *testing.T) {
	m := New()
	a := m.ProjectionConfig(projection.Config{})
	b := m.ProjectionConfig(projection.Config{})
	a.OnBatch(3, 4*time.Second, 5)
	b.OnBatch(4, time.Second, 7)
	a.OnStandby()
	if got, secs := value(t, m.lagEvents), value(t, m.lagSeconds); got != 7 || secs != 1 {
		t.Fatalf("after the first stood by: lag %v events, %v s, want the second's 7 and 1", got, secs)
	}
}
