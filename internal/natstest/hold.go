package natstest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolintent/engine/jetstream"
)

// HoldProxy is a TCP proxy in front of a server that, once armed, holds
// traffic for a while after the first client message whose bytes hold a
// marker: a write that reached the server and whose reply comes after the
// client gave up on it (HoldReplies), or a write that is still on its way
// when the client gives up and sends more (HoldWrites).
type HoldProxy struct {
	ln      net.Listener
	marker  atomic.Pointer[[]byte]
	replies atomic.Bool
	hold    atomic.Int64 // nanoseconds
	until   struct{ in, out atomic.Int64 }
}

// Which traffic an armed HoldProxy holds.
const (
	// HoldReplies forwards the marked message and holds every byte from
	// the server after it.
	HoldReplies = true
	// HoldWrites holds the marked message and every byte the client sends
	// after it.
	HoldWrites = false
)

// NewHoldProxy starts a HoldProxy to the server at clientURL; it closes
// when the test ends.
func NewHoldProxy(t testing.TB, clientURL string) *HoldProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &HoldProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close() })
	target := clientURL[len("nats://"):]
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			go p.pipe(s, c, &p.until.out, true)
			go p.pipe(c, s, &p.until.in, false)
		}
	}()
	return p
}

// URL is the proxy's client URL.
func (p *HoldProxy) URL() string { return "nats://" + p.ln.Addr().String() }

// OpenLog opens a log through the proxy whose requests time out after
// timeout, trying again for 10 s: a busy machine can miss a short timeout
// while the log looks its streams up.
func (p *HoldProxy) OpenLog(t testing.TB, timeout time.Duration) *jetstream.Log {
	t.Helper()
	nc := Connect(t, p.URL())
	var l *jetstream.Log
	CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		var err error
		l, err = jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{Timeout: timeout})
		return err
	})
	return l
}

// Arm holds the traffic which names (HoldReplies or HoldWrites) for hold
// after the next client message whose bytes contain marker.
func (p *HoldProxy) Arm(marker string, which bool, hold time.Duration) {
	p.replies.Store(which)
	p.hold.Store(int64(hold))
	m := []byte(marker)
	p.marker.Store(&m)
}

// pipe copies src to dst, each chunk after the time in until; a pipe
// from the client (fromClient) arms that time at the marked message.
func (p *HoldProxy) pipe(dst, src net.Conn, until *atomic.Int64, fromClient bool) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if fromClient && n > 0 {
			if m := p.marker.Load(); m != nil && bytes.Contains(buf[:n], *m) && p.marker.CompareAndSwap(m, nil) {
				end := time.Now().UnixNano() + p.hold.Load()
				if p.replies.Load() {
					p.until.in.Store(end)
				} else {
					until.Store(end)
				}
			}
		}
		for time.Now().UnixNano() < until.Load() {
			time.Sleep(time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// LeaseLeftHeld reports whether owner left the runner lease in m held:
// the error another owner's acquire got, nil when that owner took it. It
// frees the lease either way for the test's next round.
func LeaseLeftHeld(t testing.TB, m *jetstream.Meta, owner string) error {
	t.Helper()
	ctx := context.Background()
	other, err := m.Acquire(ctx, "other-than-"+owner, time.Minute)
	if errors.Is(err, jetstream.ErrLeaseHeld) {
		if ok, rerr := m.ReleaseOwner(ctx, owner); rerr != nil || !ok {
			t.Fatalf("free %s's lease: released %v, %v", owner, ok, rerr)
		}
		return err
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, other); err != nil {
		t.Fatal(err)
	}
	return nil
}
