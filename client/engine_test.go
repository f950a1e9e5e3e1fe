package client_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// A real engine for the tests and examples of this package: an embedded
// NATS JetStream server, the projection, the HTTP API and the NATS micro
// service, as `engine serve` wires them.
var (
	engineHTTP string // http://127.0.0.1:PORT
	engineNATS string // nats://127.0.0.1:PORT
)

func TestMain(m *testing.M) {
	code, err := runWithEngine(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client tests:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runWithEngine(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "client-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: dir})
	if err != nil {
		return 0, err
	}
	defer srv.Shutdown()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	log, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		return 0, err
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		return 0, err
	}
	go func() { _ = proj.Run(ctx) }()
	a, err := api.New(service.New(log, proj, resolver.Default(), service.Config{}), api.Config{})
	if err != nil {
		return 0, err
	}
	hs := httptest.NewServer(a.Handler())
	defer hs.Close()
	svc, err := a.StartMicro(ctx, nc)
	if err != nil {
		return 0, err
	}
	defer svc.Stop()
	engineHTTP, engineNATS = hs.URL, srv.ClientURL()
	return m.Run(), nil
}
