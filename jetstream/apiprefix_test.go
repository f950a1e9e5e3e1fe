package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/logport"
)

// The batched direct gets go to the log's API prefix or
// domain, built like nats.go builds them, not to a hard-coded $JS.API.
func TestLogAPIPrefix(t *testing.T) {
	for _, tc := range []struct {
		cfg  LogConfig
		want string
	}{
		{LogConfig{}, "$JS.API."},
		{LogConfig{Domain: "hub"}, "$JS.hub.API."},
		{LogConfig{APIPrefix: "JS.A.API"}, "JS.A.API."},
		{LogConfig{APIPrefix: "JS.A.API."}, "JS.A.API."},
	} {
		if got := tc.cfg.apiPrefix(); got != tc.want {
			t.Errorf("%+v: API prefix %q, want %q", tc.cfg, got, tc.want)
		}
	}
	if err := (LogConfig{APIPrefix: "x", Domain: "y"}).Validate(); err == nil {
		t.Error("API prefix and domain both set: want an error")
	}
}

// A log on a JetStream domain appends and reads (direct
// gets included) through $JS.<domain>.API.
func TestLogOnDomain(t *testing.T) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, JetStreamDomain: "hub", StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	ctx := context.Background()
	l, err := OpenLog(ctx, nc, LogConfig{Domain: "hub"})
	if err != nil {
		t.Fatal(err)
	}
	ev := events.New("s1", "web", "alice", events.PresetChosen{Preset: "research"})
	if _, err := l.Append(ctx, "s1", 0, ev); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	if err := l.ScanSession(ctx, "s1", 1, 0, func(r logport.Record) error { got = append(got, r.Seq); return r.Err }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("read %v, want the one event", got)
	}
}
