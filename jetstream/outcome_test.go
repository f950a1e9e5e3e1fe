package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// proxy is a TCP relay between the engine and a real nats-server that can
// refuse connections (cut) or drop what the server sends (mute): a lost
// acknowledgement on a live connection.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
	mute   atomic.Bool
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			down, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(down)
		}
	}()
	return p
}

func (p *proxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
			delete(p.conns, c)
		}
	}
}

func (p *proxy) pipe(down net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil || !p.track(down, up) {
		down.Close()
		if up != nil {
			up.Close()
		}
		return
	}
	go func() { _, _ = io.Copy(up, down); up.Close(); down.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 && !p.mute.Load() {
			if _, werr := down.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	up.Close()
	down.Close()
}

func waitStatus(t *testing.T, nc *nats.Conn, connected bool) {
	t.Helper()
	natstest.CheckFor(t, 10*time.Second, 10*time.Millisecond, func() error {
		if nc.IsConnected() != connected {
			return fmt.Errorf("connection %s, want connected=%v", nc.Status(), connected)
		}
		return nil
	})
}

func proxiedLog(t *testing.T) (*jetstream.Log, *nats.Conn, *proxy) {
	t.Helper()
	srv := natstest.Server(t)
	px := newProxy(t, srv.Server().Addr().String())
	nc, err := jetstream.Connect(context.Background(), jetstream.ConnConfig{URL: px.url()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	l, err := jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return l, nc, px
}

// An append during a NATS outage is not buffered and stored
// after the reconnect: it fails at once as not sent, and stays unstored.
func TestAppendNotBufferedAcrossReconnect(t *testing.T) {
	l, nc, px := proxiedLog(t)
	ctx := context.Background()
	px.setCut(true)
	waitStatus(t, nc, false)
	actx, cancel := context.WithTimeout(ctx, time.Second)
	start := time.Now()
	_, err := l.Append(actx, "outage-s1", 0, toggled("outage-s1"))
	cancel()
	if !errors.Is(err, logport.ErrNotSent) || errors.Is(err, logport.ErrOutcomeUnknown) {
		t.Fatalf("append while disconnected: %v, want ErrNotSent", err)
	}
	t.Logf("append while disconnected failed as not sent in %v", time.Since(start).Round(time.Microsecond))
	px.setCut(false)
	waitStatus(t, nc, true)
	// An acknowledged append after the reconnect: anything buffered from
	// this connection would have been stored before it.
	if _, err := l.Append(ctx, "outage-marker", 0, toggled("outage-marker")); err != nil {
		t.Fatalf("append after reconnect: %v", err)
	}
	if seq, err := l.LastSeq(ctx, "outage-s1"); err != nil || seq != 0 {
		t.Fatalf("the append reported failed was stored after the reconnect: seq %d, err %v", seq, err)
	}
}

// An append whose acknowledgement is lost is reported as
// outcome unknown, naming the sequence to read after (not a refusal);
// re-sending the same event learns the outcome: stored once.
func TestAppendOutcomeUnknown(t *testing.T) {
	l, nc, px := proxiedLog(t)
	ctx := context.Background()
	env := toggled("unknown-s1")
	px.mute.Store(true)
	actx, cancel := context.WithTimeout(ctx, time.Second)
	_, err := l.Append(actx, "unknown-s1", 0, env)
	cancel()
	var ou *logport.OutcomeUnknownError
	if !errors.As(err, &ou) || !errors.Is(err, logport.ErrOutcomeUnknown) || errors.Is(err, logport.ErrConflict) {
		t.Fatalf("append with a lost ack: %v, want *OutcomeUnknownError", err)
	}
	if ou.Session != "unknown-s1" || ou.AfterSeq != 0 {
		t.Fatalf("outcome unknown names %q after %d, want unknown-s1 after 0", ou.Session, ou.AfterSeq)
	}
	t.Logf("lost ack: %v", err)
	px.setCut(true)
	waitStatus(t, nc, false)
	px.mute.Store(false)
	px.setCut(false)
	waitStatus(t, nc, true)
	res, err := l.Append(ctx, "unknown-s1", 0, env)
	if err != nil || !res.Duplicate || res.First != 1 {
		t.Fatalf("re-sent append: %+v, %v; want the stored duplicate at 1", res, err)
	}
}

// Below the free-space floor an append is refused at once
// with ErrStorageFull naming the free and needed bytes, nothing written;
// when space returns appends go through again, without a restart.
func TestAppendDiskFull(t *testing.T) {
	srv := natstest.Server(t)
	nc := natstest.Connect(t, srv.ClientURL())
	var free atomic.Uint64
	free.Store(1 << 30)
	guard := &jetstream.DiskGuard{Dir: "/data", MinFree: 64 << 20, Every: -1,
		Free: func(string) (uint64, error) { return free.Load(), nil }}
	l, err := jetstream.OpenLog(context.Background(), nc, jetstream.LogConfig{Guard: guard.Check})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Append(ctx, "disk-s1", 0, toggled("disk-s1")); err != nil {
		t.Fatal(err)
	}
	free.Store(10 << 20)
	start := time.Now()
	_, err = l.Append(ctx, "disk-s1", 1, toggled("disk-s1"))
	if !errors.Is(err, logport.ErrStorageFull) || !strings.Contains(err.Error(), "disk full: 10485760 bytes free under /data, need --min-free 67108864") {
		t.Fatalf("append on a full disk: %v", err)
	}
	t.Logf("disk full refused in %v: %v", time.Since(start).Round(time.Microsecond), err)
	if seq, _ := l.LastSeq(ctx, "disk-s1"); seq != 1 {
		t.Fatalf("refused append stored: session at %d", seq)
	}
	free.Store(1 << 30)
	if _, err := l.Append(ctx, "disk-s1", 1, toggled("disk-s1")); err != nil {
		t.Fatalf("append after space returned: %v", err)
	}
}
