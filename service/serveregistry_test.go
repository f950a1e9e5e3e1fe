package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/memlog"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// blockingHistory holds every Record until release is closed.
type blockingHistory struct {
	recording chan string
	release   chan struct{}
}

func (h *blockingHistory) Record(_ context.Context, version string, _ []byte) error {
	h.recording <- version
	<-h.release
	return nil
}
func (h *blockingHistory) Lookup(context.Context, string) ([]byte, error)      { return nil, nil }
func (h *blockingHistory) LookupAll(context.Context, string) ([][]byte, error) { return nil, nil }
func (h *blockingHistory) Timeline(context.Context) ([]jetstream.RegistryMark, error) {
	return nil, nil
}

// A registry is recorded in the history before the engine serves it, so no
// write decided under it is dated before its record (history and explain
// name the registry in force by that date).
func TestServeRegistryRecordsBeforeServing(t *testing.T) {
	log := memlog.New()
	eng := service.NewFromPorts(service.Ports{Log: log, Views: memlog.NewViews(log)}, resolver.Default(), service.Config{})
	h := &blockingHistory{recording: make(chan string, 1), release: make(chan struct{})}
	eng.SetRegistryHistory(h)
	next := pushedRegistry(t, "serve.2", "extra_serve")
	done := make(chan error, 1)
	go func() { done <- eng.ServeRegistry(context.Background(), next) }()
	select {
	case v := <-h.recording:
		if v != "serve.2" {
			t.Fatalf("recorded %s, want serve.2", v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeRegistry recorded nothing")
	}
	if got := eng.Registry().Version(); got == "serve.2" {
		t.Fatal("the engine serves serve.2 while its record is still being written")
	}
	close(h.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := eng.Registry().Version(); got != "serve.2" {
		t.Fatalf("after the record the engine serves %s, want serve.2", got)
	}
}
