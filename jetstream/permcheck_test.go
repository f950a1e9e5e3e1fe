package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// CheckPublish names the subjects the server's permissions refuse the
// log's connection, and writes nothing where they allow a publish: the
// stream holding the subject refuses the probe before storing it.
func TestCheckPublishNamesRefusedSubjectsAndWritesNothing(t *testing.T) {
	srv := natstest.ServerWith(t, server.Options{Users: []*server.User{{
		Username: "engine", Password: "pw",
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{"$JS.API.>", "_INBOX.>", "tools.events.*", "nothing.>"}}},
	}}})
	nc := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("engine", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	ctx := context.Background()
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.CheckPublish(ctx, l.Subject("probe"), "nothing.holds.this"); err != nil {
		t.Fatalf("allowed subjects: %v", err)
	}
	if last, err := l.LastSeq(ctx, "probe"); err != nil || last != 0 {
		t.Fatalf("the probe stored an event: last sequence %d, %v", last, err)
	}
	err = l.CheckPublish(ctx, l.Subject("probe"), "$KV.TOOLS_VIEWS.x", "tools.events.1.x")
	if !errors.Is(err, jetstream.ErrPublishRefused) || !strings.Contains(err.Error(), "$KV.TOOLS_VIEWS.x, tools.events.1.x") || strings.Contains(err.Error(), "tools.events.probe") {
		t.Fatalf("refused subjects: %v, want ErrPublishRefused naming $KV.TOOLS_VIEWS.x and tools.events.1.x only", err)
	}
}
