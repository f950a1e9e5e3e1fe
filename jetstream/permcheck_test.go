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
// connection, and writes nothing where they allow a publish: the stream
// holding the subject (an event stream, a KV bucket) refuses the probe
// before storing it, and a subject no stream holds passes.
func TestCheckPublishNamesRefusedSubjectsAndWritesNothing(t *testing.T) {
	srv := natstest.ServerWith(t, server.Options{Users: []*server.User{{
		Username: "engine", Password: "pw",
		Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{"$JS.API.>", "_INBOX.>", "tools.events.*", "nothing.>", "$KV.TOOLS_VIEWS.>"}}},
	}}})
	nc := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("engine", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	ctx := context.Background()
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	views, err := l.OpenViews(ctx, "VIEWS")
	if err != nil {
		t.Fatal(err)
	}
	if err := jetstream.CheckPublish(ctx, nc, l.Subject("probe"), "$KV.TOOLS_VIEWS.probe", "nothing.holds.this"); err != nil {
		t.Fatalf("allowed subjects: %v", err)
	}
	for _, name := range []string{l.StreamName(), "KV_" + views.Bucket()} {
		st, err := l.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := st.Info(ctx); err != nil || info.State.Msgs != 0 {
			t.Fatalf("a probe stored a message in %s: %+v, %v", name, info.State, err)
		}
	}
	err = jetstream.CheckPublish(ctx, nc, l.Subject("probe"), "$KV.TOOLS_HISTORY.x", "tools.events.1.x")
	if !errors.Is(err, jetstream.ErrPublishRefused) || !strings.Contains(err.Error(), "$KV.TOOLS_HISTORY.x, tools.events.1.x") || strings.Contains(err.Error(), "tools.events.probe") {
		t.Fatalf("refused subjects: %v, want ErrPublishRefused naming $KV.TOOLS_HISTORY.x and tools.events.1.x only", err)
	}
}
