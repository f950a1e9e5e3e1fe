package jetstream_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/jetstream"
)

// An in-process JetStream restart (what the engine does after
// the store hit ENOSPC and space returned) keeps the store where it was:
// everything appended before and after the restart is in the stream the
// next start of the server loads, and no nested <data>/jetstream/jetstream
// directory appears.
func TestReenableJetStreamKeepsStoreDir(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() (*jetstream.Embedded, *jetstream.Log) {
		t.Helper()
		e, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect("", nats.InProcessServer(e.Server()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return e, l
	}
	e, l := open()
	if _, err := l.Append(ctx, "restart-s1", 0, toggled("restart-s1")); err != nil {
		t.Fatal(err)
	}
	// What the server does by itself on a write error it cannot survive.
	letJetStreamWorkersStart()
	if err := e.Server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := e.ReenableJetStream(); err != nil {
		t.Fatal(err)
	}
	if got := e.Server().StoreDir(); got != filepath.Join(dir, "jetstream") {
		t.Fatalf("JetStream restarted in %s, want %s", got, filepath.Join(dir, "jetstream"))
	}
	if _, err := l.Append(ctx, "restart-s1", 1, toggled("restart-s1")); err != nil {
		t.Fatalf("append after the in-process restart: %v", err)
	}
	e.Shutdown()
	if _, err := os.Stat(filepath.Join(dir, "jetstream", "jetstream")); err == nil {
		t.Fatalf("the restart left a nested store %s", filepath.Join(dir, "jetstream", "jetstream"))
	}

	_, l = open()
	seq, err := l.LastStreamSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if seq != 2 {
		t.Fatalf("after a normal restart the stream ends at %d, want 2 (both acknowledged appends)", seq)
	}
}

// JetStream that (re)started moments ago
// is not shut down again: API workers EnableJetStream starts that first
// run after a shutdown keep a nil JetStream and crash the process on the
// next request (nats-server v2.15.2 jetstream_api.go:1069). The restart
// is refused as settling, and JetStream keeps running.
func TestRestartJetStreamSettles(t *testing.T) {
	e, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	err = e.RestartJetStream()
	if !errors.Is(err, jetstream.ErrJetStreamSettling) {
		t.Fatalf("restart right after the start: %v, want ErrJetStreamSettling", err)
	}
	if !e.JetStreamEnabled() {
		t.Fatal("the refused restart shut JetStream down")
	}
	// A JetStream the server shut down itself starts again at once.
	letJetStreamWorkersStart()
	if err := e.Server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := e.RestartJetStream(); err != nil || !e.JetStreamEnabled() {
		t.Fatalf("start of a disabled JetStream: %v (enabled %v)", err, e.JetStreamEnabled())
	}
}
