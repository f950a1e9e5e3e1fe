package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
)

// (two projection runners never overwrite
// each other's views): on a REPLICATED views bucket the leader refuses a
// conditional put to a key with a write in flight with 10164, not 10071;
// that refusal must still be ErrViewChanged. Two pipelined conditional
// puts of one key at the same revision make the second meet the first in
// flight; the test asks until it has seen a 10164 refusal, and every
// refusal must match ErrViewChanged (a matcher of 10071 alone fails it).
func TestViewsConflictOnReplicatedBucketIsViewChanged(t *testing.T) {
	c := natstest.Cluster(t, 3)
	nc := natstest.Connect(t, c.ClientURL(0), nats.DontRandomize())
	ctx := context.Background()
	var (
		l   *jetstream.Log
		v   *jetstream.Views
		err error
	)
	natstest.CheckFor(t, 60*time.Second, 250*time.Millisecond, func() error {
		if l == nil {
			if l, err = jetstream.OpenLog(ctx, nc, jetstream.LogConfig{Replicas: 3}); err != nil {
				return err
			}
		}
		v, err = l.OpenViews(ctx, "cas")
		return err
	})
	if err := v.PutAll(ctx, []jetstream.Put{{Key: "s1", Value: []byte("v0")}}); err != nil {
		t.Fatal(err)
	}
	codes := map[njs.ErrorCode]int{}
	for attempt := 0; attempt < 200 && codes[njs.JSErrCodeStreamWrongLastSequenceConstant] == 0; attempt++ {
		_, rev, err := v.GetRev(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		err = v.PutAll(ctx, []jetstream.Put{
			{Key: "s1", Value: []byte("a"), Cond: true, Rev: rev},
			{Key: "s1", Value: []byte("b"), Cond: true, Rev: rev},
		})
		var apiErr *njs.APIError
		if !errors.As(err, &apiErr) {
			t.Fatalf("attempt %d: two puts at revision %d: %v, want a JetStream refusal of the second", attempt, rev, err)
		}
		codes[apiErr.ErrorCode]++
		if !errors.Is(err, jetstream.ErrViewChanged) {
			t.Fatalf("attempt %d: refusal %d (%v) is not ErrViewChanged", attempt, apiErr.ErrorCode, err)
		}
	}
	t.Logf("refusals by code: %v", codes)
	if codes[njs.JSErrCodeStreamWrongLastSequenceConstant] == 0 {
		t.Fatalf("no 10164 refusal in 200 attempts (codes %v): the replicated case was not exercised", codes)
	}
}
