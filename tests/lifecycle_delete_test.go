package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/client"
	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
)

// rawSubject reads every message of subject from the TOOLS_EVENTS stream
// with direct gets (next by subject), as raw bytes with their sequences:
// what a bystander must keep byte for byte.
func rawSubject(t *testing.T, nc *nats.Conn, subject string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, "TOOLS_EVENTS")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := uint64(1); ; {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			t.Fatalf("read %s from %d: %v", subject, seq, err)
		}
		out = append(out, fmt.Sprintf("%d:%x", m.Sequence, m.Data))
		seq = m.Sequence + 1
	}
}

// Engine delete (the built binary) closes a session for good: reads
// answer 410 deleted, writes are refused, engine sessions no longer lists
// it, its id starts no new session, an event a direct publisher stores on
// it is rejected, a bystander's events stay byte for byte, and all of it
// holds after a restart.
func TestLifecycleDeleteBinary(t *testing.T) {
	dir := t.TempDir()
	p := startEngine(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := p.GoClient("web")
	for _, s := range []string{"victim", "bystander"} {
		if _, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Enable(), client.DisableTool("bash")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.TurnBegin(ctx, client.BeginTurnRequest{Session: "victim"}); err != nil {
		t.Fatal(err)
	}
	nc := natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	bystander := rawSubject(t, nc, "tools.events.bystander")
	if len(bystander) != 2 {
		t.Fatalf("bystander events %v", bystander)
	}
	help, err := p.runCLI(t, "delete", "--help")
	help = strings.Join(strings.Fields(help), " ")
	if err != nil || !strings.Contains(help, "410 deleted") || !strings.Contains(help, "never starts a new session") {
		t.Errorf("engine delete --help does not explain: %v\n%s", err, help)
	}
	out, err := p.runCLI(t, "delete", "victim", "--reason", "test")
	if err != nil || !strings.Contains(out, "deleted") {
		t.Fatalf("engine delete: %v\n%s", err, out)
	}
	check := func(when string) {
		t.Helper()
		if _, err := c.Intent(ctx, client.IntentRequest{Session: "victim"}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("%s: intent of the deleted session: %v, want deleted", when, err)
		} else if e := (*client.Error)(nil); errors.As(err, &e) && e.Status != 410 {
			t.Errorf("%s: status %d, want 410", when, e.Status)
		}
		if _, err := c.Resolve(ctx, client.ResolveRequest{Session: "victim"}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("%s: resolve: %v, want deleted", when, err)
		}
		// No new incarnation: a write to the id is refused.
		if _, err := c.Append(ctx, client.AppendRequest{Session: "victim", Commands: []client.Command{client.Enable()}}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("%s: append to the deleted id: %v, want deleted", when, err)
		}
		if _, err := c.SessionDelete(ctx, client.DeleteRequest{Session: "victim"}); !errors.Is(err, client.ErrDeleted) {
			t.Errorf("%s: delete again: %v, want deleted", when, err)
		}
		natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
			out, err := p.runCLI(t, "sessions")
			if err != nil {
				return err
			}
			if strings.Contains(out, "victim") || !strings.Contains(out, "bystander") {
				return fmt.Errorf("engine sessions lists %q", out)
			}
			return nil
		})
		if got := rawSubject(t, nc, "tools.events.bystander"); strings.Join(got, ",") != strings.Join(bystander, ",") {
			t.Errorf("%s: bystander's events changed:\n%v\nwas\n%v", when, got, bystander)
		}
		v, err := c.Intent(ctx, client.IntentRequest{Session: "bystander"})
		if err != nil || v.Seq == 0 || len(v.Intent.Disabled) != 1 {
			t.Errorf("%s: bystander %+v %v", when, v, err)
		}
	}
	check("after delete")
	// A direct publisher (not the API) writes to the deleted session: the
	// event is kept in the log and rejected by the fold, on every engine.
	raw := events.New("victim", "backend", "svc", events.ToolsToggled{})
	data, err := events.Encode(raw)
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("tools.events.victim")
	msg.Data = data
	msg.Header.Set("Nats-Msg-Id", raw.ID)
	if _, err := nc.RequestMsg(msg, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	natstest.CheckFor(t, 10*time.Second, 50*time.Millisecond, func() error {
		h, err := c.History(ctx, client.HistoryRequest{Session: "victim"})
		if err != nil {
			return err
		}
		if n := len(h.Entries); n != 5 || !h.Entries[4].Rejected || !strings.Contains(h.Entries[4].Error, "deleted") {
			return fmt.Errorf("history %d entries, last %+v", n, h.Entries[n-1])
		}
		return nil
	})
	// The events stay in the log (delete is not erase): 3 of the victim's,
	// the SessionDeleted and the rejected direct publish.
	if got := rawSubject(t, nc, "tools.events.victim"); len(got) != 5 || !bytes.Contains([]byte(got[3]), []byte(fmt.Sprintf("%x", "SessionDeleted"))) {
		t.Errorf("victim's log %d events, want 5 with SessionDeleted 4th", len(got))
	}
	p.Stop(t)
	p = startEngine(t, dir)
	c = p.GoClient("web")
	nc = natstest.Connect(t, p.NATSURL, p.natsAuth(t))
	check("after a restart")
}
