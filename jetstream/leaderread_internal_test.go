package jetstream

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// leaderAnswering starts a plain NATS server on which answer replies to
// every STREAM.MSG.GET of stream S (its argument counts the requests
// from 1), and returns a log on a connection to it.
func leaderAnswering(t *testing.T, answer func(n int64) string) *Log {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	var n atomic.Int64
	if _, err := nc.Subscribe(jetstream.DefaultAPIPrefix+"STREAM.MSG.GET.S", func(m *nats.Msg) {
		_ = m.Respond([]byte(answer(n.Add(1))))
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &Log{nc: nc, cfg: LogConfig{Timeout: 5 * time.Second}, rc: make(chan struct{})}
}

const clusterNotAvailable = `{"error":{"code":503,"err_code":10008,"description":"JetStream system temporarily unavailable"}}`

// A leader read that a member without a leader answers 503 (an election
// under way) is asked again until the leader answers.
func TestLeaderReadAsksAgainWhileTheGroupHasNoLeader(t *testing.T) {
	l := leaderAnswering(t, func(n int64) string {
		if n <= 3 {
			return clusterNotAvailable
		}
		return `{"message":{"subject":"tools.events.s1","seq":7,"data":"aGk=","time":"2026-12-07T00:00:00Z"}}`
	})
	m, err := l.leaderMsg(context.Background(), "S", leaderGetRequest{Seq: 7})
	if err != nil || m.seq != 7 || string(m.data) != "hi" {
		t.Fatalf("leader read: %+v, %v; want the message at 7", m, err)
	}
}

// A leader read still answered 503 when its context ends returns that
// answer as a JetStream API error, which Transient accepts (callers that
// retry transient errors ask again); any other error answer is returned
// at once, also as an API error.
func TestLeaderReadReturnsTheServersErrorAsAnAPIError(t *testing.T) {
	l := leaderAnswering(t, func(int64) string { return clusterNotAvailable })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := l.leaderMsg(ctx, "S", leaderGetRequest{Seq: 7})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 || !Transient(err) {
		t.Fatalf("leader read without a leader: %v; want a transient 503 API error", err)
	}

	var asked atomic.Int64
	l = leaderAnswering(t, func(int64) string {
		asked.Add(1)
		return `{"error":{"code":400,"err_code":10003,"description":"bad request"}}`
	})
	_, err = l.leaderMsg(context.Background(), "S", leaderGetRequest{Seq: 7})
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || Transient(err) || asked.Load() != 1 {
		t.Fatalf("leader read answered 400: %v after %d asks; want the 400 API error after 1", err, asked.Load())
	}
}

// A leader read answered 503 throughout (a group without a leader) fails
// with that answer after noResponderWait, not at its caller's deadline:
// callers that can wait (a lease release, a start) retry the transient
// error themselves, and the others answer at once.
func TestLeaderReadWithoutALeaderFailsBeforeItsDeadline(t *testing.T) {
	l := leaderAnswering(t, func(int64) string { return clusterNotAvailable })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := l.leaderMsg(ctx, "S", leaderGetRequest{Seq: 7})
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 {
		t.Fatalf("leader read without a leader: %v; want the 503 API error", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the leader read waited out its caller's deadline")
	}
}
