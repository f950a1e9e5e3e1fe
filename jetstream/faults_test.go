package jetstream_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// The embedded server's store write fault and its disabling
// of JetStream for lack of space (the lines nats-server logs for them)
// close the channel Faults returned; Faults stays closed while the fault
// stands and is open again once JetStream restarted.
func TestEmbeddedFaultsSignal(t *testing.T) {
	e := natstest.Server(t)
	f := e.Faults()
	if closed(f) {
		t.Fatal("Faults closed on a healthy store")
	}
	// stream.go's line for a store that failed a write.
	e.Server().Errorf("JetStream failed to store a msg on stream '%s > %s': %v", "$G", "TOOLS_EVENTS", errors.New("write /data/1.blk: no space left on device"))
	if !closed(f) || !closed(e.Faults()) || e.WriteFault() == "" {
		t.Fatalf("after a write fault: signalled %v, standing %v, fault %q", closed(f), closed(e.Faults()), e.WriteFault())
	}
	letJetStreamWorkersStart()
	if err := e.Server().ShutdownJetStream(); err != nil {
		t.Fatal(err)
	}
	if err := e.ReenableJetStream(); err != nil {
		t.Fatal(err)
	}
	f = e.Faults()
	if closed(f) {
		t.Fatal("Faults still closed after JetStream restarted")
	}
	// jetstream.go's handleOutOfSpace.
	e.Server().Errorf("JetStream out of %s resources, will be DISABLED", "File")
	if !closed(f) {
		t.Fatal("JetStream disabled for lack of space did not close Faults")
	}
}

// An append whose publish nobody acknowledges (as nats-server
// leaves the one whose write failed) stops waiting when the store faults
// and answers outcome unknown, naming the fault, not the end of its
// context; an append after the fault, nothing sent yet, is refused as
// storage full (definite).
func TestAppendInFlightStopsAtStoreFault(t *testing.T) {
	ctx := context.Background()
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	fault := make(chan struct{})
	l, err := jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Faults: func() <-chan struct{} { return fault }})
	if err != nil {
		t.Fatal(err)
	}
	// No stream, and a subscriber that never answers: the publish waits.
	js, err := njs.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, l.StreamName()); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.SubscribeSync(l.Subject("fault-s1")); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(200*time.Millisecond, func() { close(fault) })
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = l.Append(actx, "fault-s1", 0, toggled("fault-s1"))
	var ou *logport.OutcomeUnknownError
	if !errors.As(err, &ou) || ou.Session != "fault-s1" || ou.AfterSeq != 0 || !strings.Contains(err.Error(), "the store failed a write") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append in flight at a store fault: %v, want outcome unknown after 0 naming the fault", err)
	}
	t.Logf("answered %v after the append started (fault at 200ms): %v", time.Since(start).Round(time.Millisecond), err)
	_, err = l.Append(ctx, "fault-s2", 0, toggled("fault-s2"))
	if !errors.Is(err, logport.ErrStorageFull) || errors.Is(err, logport.ErrOutcomeUnknown) {
		t.Fatalf("append while the fault stands: %v, want storage full", err)
	}
	t.Logf("while the fault stands: %v", err)
}

// letJetStreamWorkersStart waits for the JetStream API worker goroutines a
// server's start leaves to run: they read their queues when first
// scheduled, and shutting JetStream down and enabling it again before they
// ran is a data race inside nats-server (its re-enable writes those fields
// unlocked; CI's race stage caught it once, 20 ms after a start). The
// engine never restarts JetStream within 5 s of a start
// (RestartJetStream's settle); tests that shut it down by hand wait this
// long first.
func letJetStreamWorkersStart() { time.Sleep(time.Second) }
