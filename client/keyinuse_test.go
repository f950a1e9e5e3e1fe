package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/toolintent/engine/client"
)

// Over both transports, an idempotency key used on one session
// and sent on another comes back as client.ErrKeyInUse (422), and the
// second session still appends and reads.
func TestKeyInUse(t *testing.T) {
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key := ulid.Make().String()
			a, b := "key-a-"+name, "key-b-"+name
			if _, err := c.Append(ctx, client.AppendRequest{Session: a, EventID: key, Commands: []client.Command{client.DisableTool("bash")}}); err != nil {
				t.Fatal(err)
			}
			_, err := c.Append(ctx, client.AppendRequest{Session: b, EventID: key, Commands: []client.Command{client.DisableTool("bash")}})
			if e := (*client.Error)(nil); !errors.Is(err, client.ErrKeyInUse) || !errors.As(err, &e) || e.Status != 422 {
				t.Fatalf("key of %s on %s: %v, want 422 %s", a, b, err, client.ErrKeyInUse.Code)
			}
			app, err := c.Append(ctx, client.AppendRequest{Session: b, Commands: []client.Command{client.DisableTool("grep")}})
			if err != nil {
				t.Fatal(err)
			}
			if st, err := c.Intent(ctx, client.IntentRequest{Session: b, MinSeq: app.LastSeq}); err != nil || st.Seq != app.LastSeq {
				t.Fatalf("%s after the refusal: %+v %v", b, st, err)
			}
		})
	}
}

// Over both transports, a UUID is a key; its events' ids are
// client.IdempotencyEventIDs; the same key with other commands comes back
// as client.ErrKeyMismatch (422) and writes nothing.
func TestKeyMismatch(t *testing.T) {
	for name, c := range clients(t) {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			key, s := "7d0b5e8c-2f43-4a7e-b1c9-"+name, "mismatch-"+name
			res, err := c.Append(ctx, client.AppendRequest{Session: s, EventID: key, Commands: []client.Command{client.DisableTool("bash")}})
			if err != nil || len(res.EventIDs) != 1 || res.EventIDs[0] != client.IdempotencyEventIDs(s, key, 1)[0] {
				t.Fatalf("UUID key: %+v %v, want the id IdempotencyEventIDs gives", res, err)
			}
			_, err = c.Append(ctx, client.AppendRequest{Session: s, EventID: key, Commands: []client.Command{client.DisableTool("grep")}})
			if e := (*client.Error)(nil); !errors.Is(err, client.ErrKeyMismatch) || !errors.As(err, &e) || e.Status != 422 {
				t.Fatalf("same key, other commands: %v, want 422 %s", err, client.ErrKeyMismatch.Code)
			}
			if st, err := c.Intent(ctx, client.IntentRequest{Session: s, MinSeq: res.LastSeq}); err != nil || st.Seq != res.LastSeq {
				t.Fatalf("%s after the refusal: seq %d %v, want %d", s, st.Seq, err, res.LastSeq)
			}
		})
	}
}
