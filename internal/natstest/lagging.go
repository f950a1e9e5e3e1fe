package natstest

import (
	"context"
	"fmt"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
)

// LaggingSession is the session whose one event LaggingReplica's mirror
// holds.
const LaggingSession = "lagging"

// LaggingReplica gives l's stream, on a single server, a replica that lags
// its leader for the direct gets, as a follower does for entries it has
// not applied yet: a mirror that answers the stream's direct gets beside
// the stream (MirrorDirect: about half of them) and holds only one event
// of session LaggingSession, which it appends first (a mirror keeps the
// stream's sequences). The mirror answers "not found" for any later
// sequence and ends batched direct gets there. l's stream must be empty
// before; nothing may be appended to LaggingSession after.
func LaggingReplica(t testing.TB, l *jetstream.Log) {
	t.Helper()
	ctx := context.Background()
	ev := events.New(LaggingSession, "test", "natstest", events.ToolsToggled{Enabled: new(true)})
	if _, err := l.Append(ctx, LaggingSession, 0, ev); err != nil {
		t.Fatalf("lagging replica: %v", err)
	}
	LaggingMirror(t, l.JetStream(), l.StreamName(), l.Subject(LaggingSession))
}

// LaggingMirror is LaggingReplica for any stream on a single server: a
// mirror of stream answering its direct gets (about half of them) that
// holds only the messages on subject, which must all come before every
// other message of the stream; nothing may be published on subject after.
func LaggingMirror(t testing.TB, js njs.JetStream, stream, subject string) {
	t.Helper()
	ctx := context.Background()
	mirror, err := js.CreateStream(ctx, njs.StreamConfig{
		Name:         "LAGGING_REPLICA_" + stream,
		Mirror:       &njs.StreamSource{Name: stream, FilterSubject: subject},
		MirrorDirect: true,
		AllowDirect:  true,
	})
	if err != nil {
		t.Fatalf("lagging replica: %v", err)
	}
	// The mirror answers direct gets once it holds every message of the
	// subject the source holds now.
	src, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("lagging replica: %v", err)
	}
	si, err := src.Info(ctx, njs.WithSubjectFilter(subject))
	if err != nil {
		t.Fatalf("lagging replica: %v", err)
	}
	want := si.State.Msgs
	CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		info, err := mirror.Info(ctx)
		if err != nil {
			return err
		}
		if info.State.Msgs != want {
			return fmt.Errorf("lagging replica holds %d messages, want %d", info.State.Msgs, want)
		}
		return nil
	})
}
