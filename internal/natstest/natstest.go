// Package natstest starts real nats-server instances with JetStream for
// tests: in-process, on a random loopback port, in t.TempDir(), shut down
// by t.Cleanup. Nothing here mocks NATS.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/aggregate"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
	"github.com/toolintent/engine/projection"
)

// Server starts a single JetStream server and returns it.
func Server(t testing.TB) *jetstream.Embedded {
	t.Helper()
	return ServerAt(t, t.TempDir())
}

// ServerAt starts a single JetStream server on the given data directory
// (to test restarts on the same data).
func ServerAt(t testing.TB, dir string) *jetstream.Embedded {
	t.Helper()
	s, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir})
	if err != nil {
		t.Fatalf("start nats-server: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// ServerWith starts a single JetStream server built from opts (loopback,
// a random port, a fresh store directory, no logs unless opts asks),
// shut down by t.Cleanup: for the tests that need a server the
// embedded default does not configure (users with permissions, a
// JetStream domain).
func ServerWith(t testing.TB, opts server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.JetStream, opts.NoSigs = "127.0.0.1", -1, true, true
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	if !opts.Debug && !opts.Trace {
		opts.NoLog = true
	}
	srv, err := server.NewServer(&opts)
	if err != nil {
		t.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready for connections within 10 s")
	}
	return srv
}

// Connect opens a client connection to url, closed by t.Cleanup.
func Connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// FoldLog folds every session of the log from its first event, serially
// and in log order, each event with the registry in force when it was
// stored (projection.Registries): the reference a projection must equal.
func FoldLog(t testing.TB, l *jetstream.Log) map[string]aggregate.State {
	t.Helper()
	ctx := context.Background()
	regs, err := projection.OpenRegistries(ctx, l)
	if err != nil {
		t.Fatalf("fold the log: %v", err)
	}
	out := map[string]aggregate.State{}
	err = l.Replay(ctx, 0, func(r logport.Record) error {
		ev, err := regs.Stored(ctx, r)
		if err != nil {
			return err
		}
		st, ok := out[r.Session]
		if !ok {
			st = aggregate.State{Session: r.Session}
		}
		st.ApplyStored(ev) //nolint:errcheck // recorded in st
		out[r.Session] = st
		return nil
	})
	if err != nil {
		t.Fatalf("fold the log: %v", err)
	}
	return out
}

// FoldRecords folds records read from the log, per session, in order,
// without a registry (the rules that need one are not checked).
func FoldRecords(recs []logport.Record) map[string]aggregate.State {
	out := map[string]aggregate.State{}
	for _, r := range recs {
		st, ok := out[r.Session]
		if !ok {
			st = aggregate.State{Session: r.Session}
		}
		st.ApplyStored(aggregate.StoredRecord(r)) //nolint:errcheck // recorded in st
		out[r.Session] = st
	}
	return out
}

// CheckFor calls f every step until it returns nil or wait has passed, and
// fails the test with f's last error then.
func CheckFor(t testing.TB, wait, step time.Duration, f func() error) {
	t.Helper()
	poll(t, wait, step, "condition not met", f)
}

// poll calls f every step until it returns nil; after wait it fails the
// test with what and f's last error.
func poll(t testing.TB, wait, step time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %s: %v", what, wait, err)
		}
		time.Sleep(step)
	}
}
