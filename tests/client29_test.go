package tests

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/jetstream"
)

// Client.ConnectLocal reaches a local `engine serve` with the
// users it generated (plain nats.Connect is refused: no anonymous user);
// per-call options (ExpectSeq, IdempotencyKey) replace the pointer fields,
// which still work; NewIdempotencyKey is a UUID the engine takes, and
// IdempotencyEventIDs names the stored ids before the reply.
func TestClientLocalAndCallOptions(t *testing.T) {
	if client.DefaultNATSURL == "" || jetstream.CredentialsFile != "nats-users.json" {
		t.Fatalf("the client reads %q; the engine writes %q", "nats-users.json", jetstream.CredentialsFile)
	}
	dir := t.TempDir()
	p := startEngine(t, dir)
	if nc, err := nats.Connect(p.NATSURL, nats.Timeout(3*time.Second)); err == nil {
		nc.Close()
		t.Fatal("an anonymous connection to the embedded server was accepted")
	}
	nc, err := client.ConnectLocal(dir, p.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := client.NewNATS(nc, client.WithChannel("cli"), client.WithActor("t"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := client.NewIdempotencyKey()
	if len(key) != 36 || strings.Count(key, "-") != 4 {
		t.Fatalf("NewIdempotencyKey = %q, want a UUID", key)
	}
	req := client.AppendRequest{Session: "local", Commands: []client.Command{client.WebSearchOn(), client.DisableTool("bash")}}
	res, err := c.Append(ctx, req, client.ExpectSeq(0), client.IdempotencyKey(key))
	if err != nil || res.Duplicate || len(res.EventIDs) != 2 || strings.Join(res.EventIDs, ",") != strings.Join(client.IdempotencyEventIDs("local", key, 2), ",") {
		t.Fatalf("append with options: %+v %v, want ids %v", res, err, client.IdempotencyEventIDs("local", key, 2))
	}
	again, err := c.Append(ctx, req, client.IdempotencyKey(key))
	if err != nil || !again.Duplicate || again.LastSeq != res.LastSeq {
		t.Fatalf("retry: %+v %v, want duplicate at %d", again, err, res.LastSeq)
	}
	// ExpectSeq as an option and as the old pointer field: both conflict.
	_, err = c.Append(ctx, client.AppendRequest{Session: "local", Commands: []client.Command{client.WebSearchOff()}}, client.ExpectSeq(0))
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("ExpectSeq(0) on a session with events: %v, want ErrConflict", err)
	}
	zero := uint64(0)
	_, err = c.Append(ctx, client.AppendRequest{Session: "local", ExpectedSeq: &zero, Commands: []client.Command{client.WebSearchUnset()}})
	if !errors.Is(err, client.ErrConflict) {
		t.Fatalf("ExpectedSeq field: %v, want ErrConflict", err)
	}
	if _, err := client.ConnectLocal(t.TempDir(), p.NATSURL); err == nil || !strings.Contains(err.Error(), "engine serve --data") {
		t.Fatalf("ConnectLocal on a directory without users: %v, want a message naming --data", err)
	}
}
