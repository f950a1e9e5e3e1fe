package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
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
