package service_test

import (
	"context"
	"testing"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/projection"
	"github.com/toolintent/engine/resolver"
	"github.com/toolintent/engine/service"
)

// History pages read the session's events through Ports.Pages, a log of
// the same stream on its own connection, and not through the log the
// engine appends on; the page equals the one read on the appends' log.
func TestHistoryPagesReadThroughThePagesLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := natstest.Server(t).ClientURL()
	log, err := jetstream.OpenLog(ctx, natstest.Connect(t, url), jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	pages, err := log.OnConn(natstest.Connect(t, url))
	if err != nil {
		t.Fatal(err)
	}
	if pages.Conn() == log.Conn() {
		t.Fatal("the pages log shares the appends' connection")
	}
	proj, err := projection.Open(ctx, log, projection.Config{})
	if err != nil {
		t.Fatal(err)
	}
	e := service.NewFromPorts(service.Ports{Log: log, Views: proj, Pages: pages}, resolver.Default(), service.Config{})
	plain := service.NewFromPorts(service.Ports{Log: log, Views: proj}, resolver.Default(), service.Config{})
	const n = 40
	for i := range n {
		var p events.Payload = events.ToolDisabled{Name: "bash"}
		if i%2 == 1 {
			p = events.ToolEnabled{Name: "bash"}
		}
		if _, err := e.Apply(ctx, "paged", web, nil, p); err != nil {
			t.Fatal(err)
		}
	}
	mainBefore, pagesBefore := log.MessagesRead(), pages.MessagesRead()
	got, _, err := e.History(ctx, "paged", service.Until{}, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if read := pages.MessagesRead() - pagesBefore; read < n {
		t.Errorf("the pages log read %d messages for a history of %d events, want at least %d", read, n, n)
	}
	if read := log.MessagesRead() - mainBefore; read != 0 {
		t.Errorf("the appends' log read %d messages for the history, want 0", read)
	}
	want, _, err := plain.History(ctx, "paged", service.Until{}, service.ResolveRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || len(want) != n {
		t.Fatalf("history of %d entries through the pages log, %d through the appends' log, want %d", len(got), len(want), n)
	}
	for i := range got {
		if got[i].Seq != want[i].Seq || got[i].PrefixHash != want[i].PrefixHash || len(got[i].Tools) != len(want[i].Tools) {
			t.Fatalf("entry %d differs: seq %d/%d prefix %s/%s", i, got[i].Seq, want[i].Seq, got[i].PrefixHash, want[i].PrefixHash)
		}
	}
}
