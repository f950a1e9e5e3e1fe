package deferral

import (
	"testing"

	"github.com/toolintent/engine/resolver"
)

// The split runs on every provider dispatch; keep it cheap.
func BenchmarkSplit(b *testing.B) {
	res := resolve(b, resolver.Default(), defaultSession())
	loaded := NewSet("send_message")
	b.ReportAllocs()
	for b.Loop() {
		_ = SplitTools(res.Tools, loaded.Has)
	}
}

// The estimator runs on the request path; no tokenizer.
func BenchmarkEstimate(b *testing.B) {
	s := SplitTools(resolve(b, resolver.Default(), defaultSession()).Tools, nil)
	b.ReportAllocs()
	for b.Loop() {
		_ = Estimate(s)
	}
}

// Freezing copies the resolution once per turn.
func BenchmarkFreeze(b *testing.B) {
	res := resolve(b, resolver.Default(), defaultSession())
	loaded := []string{"send_message"}
	b.ReportAllocs()
	for b.Loop() {
		_ = Freeze(1, res, loaded)
	}
}

// Each provider request of a turn splits under the turn's lock.
func BenchmarkTurnRequest(b *testing.B) {
	turn := Freeze(1, resolve(b, resolver.Default(), defaultSession()), []string{"send_message"})
	b.ReportAllocs()
	for b.Loop() {
		_ = turn.Request()
	}
}

// The measuring stick, for comparison with BenchmarkEstimate.
func BenchmarkCountResidentArray(b *testing.B) {
	s := SplitTools(resolve(b, resolver.Default(), defaultSession()).Tools, nil)
	text := string(resolver.RenderAnthropic(s.Provider))
	if _, err := Count(text); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Count(text)
	}
}
