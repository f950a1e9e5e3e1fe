package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/resolver"
)

// An open whose JetStream request the server's permissions refuse (here
// the stream's creation) ends with ErrPublishRefused, naming the refused
// request and where the permissions are listed, rather than a timeout a
// retry would only repeat.
func TestOpenStreamsEndsOnARefusedRequest(t *testing.T) {
	srv := natstest.ServerWith(t, natsserver.Options{Users: []*natsserver.User{{
		Username: "engine", Password: "pw",
		Permissions: &natsserver.Permissions{Publish: &natsserver.SubjectPermission{Allow: []string{">"}, Deny: []string{"$JS.API.STREAM.CREATE.>"}}},
	}}})
	nc := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("engine", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	c := &store{Store: Store{NATS: srv.ClientURL(), Prefix: "tools", Replicas: 1}}
	var logs []*jetstream.Log
	err := c.openStreams(context.Background(), nc, &logs)
	if !errors.Is(err, jetstream.ErrPublishRefused) || !strings.Contains(err.Error(), "$JS.API.STREAM.CREATE.TOOLS_EVENTS") || !strings.Contains(err.Error(), "deploy/nats-server.conf") {
		t.Fatalf("open with stream creation refused: %v, want ErrPublishRefused naming the request and the permissions' file", err)
	}
}

// The start-up steps that wait for NATS end at once, with the server's
// refusal, when its permissions refuse one of their requests, instead of
// retrying a request that is never answered until the engine stops: the
// erase path (here the audit stream's look-up and creation are refused)
// is left out and serving goes on, and the registry bucket's refusal is
// reported.
func TestStartUpStepsEndOnARefusedRequest(t *testing.T) {
	srv := natstest.ServerWith(t, natsserver.Options{Users: []*natsserver.User{{
		Username: "engine", Password: "pw",
		Permissions: &natsserver.Permissions{Publish: &natsserver.SubjectPermission{Allow: []string{">"}, Deny: []string{
			"$JS.API.STREAM.INFO.TOOLS_AUDIT", "$JS.API.STREAM.CREATE.TOOLS_AUDIT",
			"$JS.API.STREAM.INFO.KV_TOOLS_REGISTRY", "$JS.API.STREAM.CREATE.KV_TOOLS_REGISTRY",
		}}},
	}}})
	nc := natstest.Connect(t, srv.ClientURL(), nats.UserInfo("engine", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	jlog, err := jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{Prefix: "tools"})
	if err != nil {
		t.Fatal(err)
	}
	// A serve context: no deadline; it ends only when the engine stops.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := &store{}
	stop := c.startEraser(ctx, Config{}, srv.ClientURL(), []*part{{log: jlog}}, nil, zerolog.Nop())
	stop()
	if ctx.Err() != nil {
		t.Fatal("the erase path waited until the engine stopped")
	}
	err = waitForNATSOn(ctx, zerolog.Nop(), nc, "read the registry bucket", func(actx context.Context) error {
		_, _, err := registryFromKV(actx, jlog, resolver.Default(), zerolog.Nop())
		return err
	})
	if !errors.Is(err, jetstream.ErrPublishRefused) || ctx.Err() != nil {
		t.Fatalf("registry bucket refused: %v; want ErrPublishRefused before the engine stops", err)
	}
}
