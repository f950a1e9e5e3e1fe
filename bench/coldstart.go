package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// coldStart: a fresh engine (new connection, OpenLog, projection.Open and
// Run with the existing durable, one Session read) on a stream of
// ColdEvents events over ColdSessions sessions, against a raw client
// (connect, stream and bucket look-up, one kv.Get).
func (h *harness) coldStart(ctx context.Context) error {
	per := max(1, h.cfg.ColdEvents/h.cfg.ColdSessions)
	sessions := sessionNames("cold-", h.cfg.ColdSessions)
	if _, err := jetstream.OpenLog(ctx, h.rawNC, jetstream.LogConfig{Prefix: prefixCold}); err != nil {
		return err
	}
	start := time.Now()
	if err := generate(ctx, h.rjs, prefixCold, sessions, per); err != nil {
		return err
	}
	gen := time.Since(start)
	total := per * len(sessions)
	h.progress("cold data: %d events over %d sessions generated in %.1f s (%.0f events/s, raw pipelined async publishes)", total, len(sessions), gen.Seconds(), float64(total)/gen.Seconds())
	clog, err := jetstream.OpenLog(ctx, h.engNC, jetstream.LogConfig{Prefix: prefixCold})
	if err != nil {
		return err
	}
	last, err := clog.LastStreamSeq(ctx)
	if err != nil {
		return err
	}
	if last != uint64(total) {
		return fmt.Errorf("cold stream holds %d events, want %d", last, total)
	}
	p, err := projection.Open(ctx, clog, projection.Config{})
	if err != nil {
		return err
	}
	start = time.Now()
	stop, err := runProjection(ctx, p, last, 20*time.Minute)
	if err != nil {
		return err
	}
	build := time.Since(start)
	stop()
	h.progress("cold data: projection built (durable %q) in %.1f s (%.0f events/s)", "views", build.Seconds(), float64(total)/build.Seconds())
	// Probes: session i's last event is round per-1, at (per-1)*S + i + 1.
	S := len(sessions)
	for _, i := range []int{S / 7, S / 3, S / 2, 2 * S / 3, S - 1, 0, S / 5, 4 * S / 5} {
		h.coldProbe = append(h.coldProbe, coldProbe{session: sessions[i], seq: uint64((per-1)*S + i + 1)})
	}
	engine := func(ctx context.Context, run int) (float64, error) {
		start := time.Now()
		if err := h.coldEngineReady(ctx, h.url, h.coldProbe[run%len(h.coldProbe)]); err != nil {
			return 0, err
		}
		return time.Since(start).Seconds(), nil
	}
	raw := func(ctx context.Context, run int) (float64, error) {
		start := time.Now()
		if err := coldRawReady(ctx, h.url, h.coldProbe[run%len(h.coldProbe)]); err != nil {
			return 0, err
		}
		return time.Since(start).Seconds(), nil
	}
	l, err := h.pair(ctx, nameColdStart, "s", false, engine, raw)
	if err != nil {
		return err
	}
	l.Note = fmt.Sprintf("%d events over %d sessions, generated in %.1f s (raw pipelined async), projection built in %.1f s; engine = connect + OpenLog + projection.Open + Run (existing durable) until caught up + Engine.Session; raw = connect + stream + bucket look-up + kv.Get", total, S, gen.Seconds(), build.Seconds())
	h.add(l)
	return nil
}

// coldEngineReady brings up a fresh engine on the cold stream and returns
// when it serves a read of the probe session.
func (h *harness) coldEngineReady(ctx context.Context, url string, probe coldProbe) error {
	nc, err := jetstream.Connect(ctx, jetstream.ConnConfig{URL: url, Name: "bench-cold-engine"})
	if err != nil {
		return err
	}
	defer nc.Close()
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Prefix: prefixCold})
	if err != nil {
		return err
	}
	p, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		return err
	}
	eng := service.New(log, p, resolver.Default(), service.Config{})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(rctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Minute)
	for !p.CaughtUp() {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("cold projection stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("cold projection not caught up after 5 minutes")
		}
		time.Sleep(100 * time.Microsecond)
	}
	st, err := eng.Session(ctx, probe.session, 0)
	if err != nil {
		return err
	}
	if st.LastSeq != probe.seq {
		return fmt.Errorf("cold session %s reads at %d, want %d", probe.session, st.LastSeq, probe.seq)
	}
	return nil
}

func coldRawReady(ctx context.Context, url string, probe coldProbe) error {
	nc, err := nats.Connect(url, nats.Name("bench-cold-raw"))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := njs.New(nc)
	if err != nil {
		return err
	}
	if _, err := js.Stream(ctx, jetstream.EventStreamName(prefixCold)); err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, strings.ToUpper(prefixCold)+"_VIEWS")
	if err != nil {
		return err
	}
	e, err := kv.Get(ctx, probe.session)
	if err != nil {
		return fmt.Errorf("raw cold get %s: %w", probe.session, err)
	}
	if len(e.Value()) == 0 {
		return fmt.Errorf("raw cold get %s: empty", probe.session)
	}
	return nil
}
