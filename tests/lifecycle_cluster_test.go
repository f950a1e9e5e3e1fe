package tests

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/service"
)

// localStream is node srv's own replica of stream: its message count and
// number of subjects, as its store holds them.
func localStream(t *testing.T, srv *server.Server, stream string) (msgs, subjects uint64) {
	t.Helper()
	info, err := srv.Jsz(&server.JSzOptions{Accounts: true, Streams: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range info.AccountDetails {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.State.Msgs, uint64(s.State.NumSubjects)
			}
		}
	}
	t.Fatalf("node %s has no replica of %s", srv.Name(), stream)
	return 0, 0
}

// On a 3-replica cluster with two engines, an erase made by the second
// engine while a follower of the event stream is down purges the session
// on the quorum; the follower comes back without the session's events (its
// own replica's count and subjects match the leader's), the bystander is
// byte for byte the same, and both engines refuse the id.
func TestLifecycleEraseClusterFollowerDown(t *testing.T) {
	const account, stream = "$G", "TOOLS_EVENTS"
	c := natstest.Cluster(t, 3)
	lc := jetstream.LogConfig{Replicas: 3}
	e1 := clOpenEngine(t, c.URLs(), "e1", lc, service.Config{})
	e2 := clOpenEngine(t, c.URLs(), "e2", lc, service.Config{})
	_, stopProj := clRunProjection(t, e1.proj)
	defer stopProj()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	web := service.Origin{Channel: "web", Actor: "alice"}
	ops := service.Origin{Channel: "ops", Actor: "operator"}
	for _, e := range []*clEngine{e1, e2} {
		x, err := e.log.NewEraser(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		e.eng.SetEraser(x)
	}
	for i := range 5 {
		for _, s := range []string{"victim", "bystander"} {
			if _, err := e1.eng.Apply(ctx, s, web, nil, events.ToolDisabled{Name: []string{"bash", "grep", "glob", "web_fetch", "todo_write"}[i]}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e1.eng.Apply(ctx, "victim", web, nil, events.TurnStarted{}); err != nil { // erased during an open turn
		t.Fatal(err)
	}
	bystander := rawSubject(t, e1.nc, "tools.events.bystander")
	leader := c.WaitStreamLeader(account, stream, 30*time.Second)
	follower := (leader + 1) % 3
	natstest.CheckFor(t, 30*time.Second, 50*time.Millisecond, func() error {
		if !c.StreamCurrent(follower, account, stream) {
			return errors.New("follower not current yet")
		}
		return nil
	})
	c.Stop(follower)
	var res service.EraseResult
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		var err error
		res, err = e2.eng.Erase(ctx, "victim", ops, "")
		return err
	})
	if res.Purged != 6 {
		t.Fatalf("erase purged %d events, want 6 (5 disables, the turn; the delete stays as the tombstone): %+v", res.Purged, res)
	}
	c.Start(follower)
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		if !c.StreamCurrent(follower, account, stream) {
			return errors.New("follower not current yet")
		}
		ld := c.StreamLeader(account, stream)
		if ld < 0 {
			return errors.New("no leader")
		}
		fm, fs := localStream(t, c.Servers()[follower], stream)
		lm, ls := localStream(t, c.Servers()[ld], stream)
		// Only the bystander's events and the victim's tombstone are
		// left, on their two subjects.
		if fm != lm || fs != ls || fm != uint64(len(bystander))+1 || fs != 2 {
			return fmt.Errorf("follower holds %d messages on %d subjects, leader %d on %d; want the bystander's %d and the tombstone on 2", fm, fs, lm, ls, len(bystander))
		}
		return nil
	})
	if got := rawSubject(t, e1.nc, "tools.events.victim"); len(got) != 1 {
		t.Errorf("the erased session has %d events, want its SessionDeleted only", len(got))
	}
	if got := rawSubject(t, e1.nc, "tools.events.bystander"); strings.Join(got, ",") != strings.Join(bystander, ",") {
		t.Errorf("bystander changed:\n%v\nwas\n%v", got, bystander)
	}
	for i, e := range []*clEngine{e1, e2} {
		if r, err := e.eng.Apply(ctx, "victim", web, nil, events.ToolsToggled{}); !errors.Is(err, service.ErrDeleted) {
			t.Errorf("engine %d: write to the erased id: %v %+v", i+1, err, r)
		}
		if _, err := e.eng.Session(ctx, "victim", 0); !errors.Is(err, service.ErrDeleted) {
			t.Errorf("engine %d: read of the erased id: %v", i+1, err)
		}
	}
}
