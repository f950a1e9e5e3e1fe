package jetstream_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/internal/natstest"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// deposedProxy stands between a client and a server and plays a deposed
// stream leader (a node whose partition just healed, before it learns of
// the new leader): the first copy of each publish to subject is answered
// at once with refusal, from a store behind the current leader's, and
// reaches the server (the current leader) only after delay. Later copies
// pass straight through, unless every is set: then each copy is answered
// and delayed so. It speaks the NATS client protocol frame by
// frame, so that its answer goes in between the server's frames.
type deposedProxy struct {
	ln       net.Listener
	subject  string
	refusal  []byte
	delay    time.Duration
	every    bool
	answered atomic.Int64

	mu   sync.Mutex
	seen map[string]bool // message ids answered
}

func newDeposedProxy(t *testing.T, serverURL, subject, refusal string, delay time.Duration, every bool) *deposedProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	p := &deposedProxy{ln: ln, subject: subject, refusal: []byte(refusal), delay: delay, every: every, seen: map[string]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", strings.TrimPrefix(serverURL, "nats://"))
			if err != nil {
				_ = c.Close()
				continue
			}
			t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
			toClient, toServer := &lockedWriter{w: c}, &lockedWriter{w: s}
			subs := &sync.Map{} // subscription subject → sid
			go p.serverToClient(bufio.NewReader(s), toClient)
			go p.clientToServer(bufio.NewReader(c), toServer, toClient, subs)
		}
	}()
	return p
}

func (p *deposedProxy) url() string { return "nats://" + p.ln.Addr().String() }

// lockedWriter writes whole frames, one writer at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) write(b ...[]byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range b {
		_, _ = l.w.Write(x)
	}
}

// frame reads one protocol frame: its line and, for a message, its
// payload with the closing CRLF (the payload's size is the line's last
// field).
func frame(r *bufio.Reader) (line, payload []byte, err error) {
	line, err = r.ReadBytes('\n')
	if err != nil {
		return nil, nil, err
	}
	f := strings.Fields(string(line))
	if len(f) == 0 {
		return line, nil, nil
	}
	switch strings.ToUpper(f[0]) {
	case "MSG", "HMSG", "PUB", "HPUB":
		n, err := strconv.Atoi(f[len(f)-1])
		if err != nil {
			return nil, nil, fmt.Errorf("frame %q: %w", line, err)
		}
		payload = make([]byte, n+2)
		if _, err := io.ReadFull(r, payload); err != nil {
			return nil, nil, err
		}
	}
	return line, payload, nil
}

func (p *deposedProxy) serverToClient(r *bufio.Reader, toClient *lockedWriter) {
	for {
		line, payload, err := frame(r)
		if err != nil {
			return
		}
		toClient.write(line, payload)
	}
}

func (p *deposedProxy) clientToServer(r *bufio.Reader, toServer, toClient *lockedWriter, subs *sync.Map) {
	for {
		line, payload, err := frame(r)
		if err != nil {
			return
		}
		f := strings.Fields(string(line))
		if len(f) >= 3 && strings.EqualFold(f[0], "SUB") {
			subs.Store(f[1], f[len(f)-1])
		}
		if len(f) == 5 && strings.EqualFold(f[0], "HPUB") && f[1] == p.subject && p.firstCopy(payload) {
			if sid, ok := sidFor(subs, f[2]); ok {
				p.answered.Add(1)
				toClient.write([]byte(fmt.Sprintf("MSG %s %s %d\r\n", f[2], sid, len(p.refusal))), p.refusal, []byte("\r\n"))
				time.AfterFunc(p.delay, func() { toServer.write(line, payload) })
				continue
			}
		}
		toServer.write(line, payload)
	}
}

// firstCopy reports whether the publish's message id is new to p.
func (p *deposedProxy) firstCopy(payload []byte) bool {
	_, rest, ok := bytes.Cut(payload, []byte("Nats-Msg-Id: "))
	if !ok {
		return false
	}
	id, _, _ := bytes.Cut(rest, []byte("\r\n"))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[string(id)] && !p.every {
		return false
	}
	p.seen[string(id)] = true
	return true
}

// sidFor finds the client's subscription that reply is delivered to: its
// own subject, or a one-token wildcard inbox.
func sidFor(subs *sync.Map, reply string) (string, bool) {
	var sid string
	subs.Range(func(k, v any) bool {
		subj := k.(string)
		if subj == reply || strings.HasSuffix(subj, ".*") && strings.HasPrefix(reply, strings.TrimSuffix(subj, "*")) &&
			!strings.Contains(reply[len(subj)-1:], ".") {
			sid = v.(string)
			return false
		}
		return true
	})
	return sid, sid != ""
}

// deposedRefusal is a deposed leader's answer to an append expected at a
// later sequence than its store holds.
const deposedRefusal = `{"stream":"TOOLS_EVENTS","error":{"code":400,"err_code":10071,"description":"wrong last sequence: 0"}}`

// deposedSession is the session the deposed leader's tests append to.
const deposedSession = "deposed"

// behindADeposedLeader starts a server, appends one event to
// deposedSession on a log direct to it, and opens a second log through a
// deposedProxy answering that session's appends (delay, every as
// newDeposedProxy takes them). It returns both logs, the proxy and the
// session's last sequence.
func behindADeposedLeader(t *testing.T, delay time.Duration, every bool) (direct, l *jetstream.Log, p *deposedProxy, last uint64) {
	t.Helper()
	ctx := context.Background()
	direct, nc := openLog(t)
	first, err := direct.Append(ctx, deposedSession, 0, events.New(deposedSession, "web", "alice", events.ToolDisabled{Name: "bash"}))
	if err != nil {
		t.Fatal(err)
	}
	p = newDeposedProxy(t, nc.ConnectedUrl(), direct.Subject(deposedSession), deposedRefusal, delay, every)
	if l, err = jetstream.OpenLog(ctx, natstest.Connect(t, p.url()), jetstream.LogConfig{}); err != nil {
		t.Fatal(err)
	}
	return direct, l, p, first.Last
}

// An append that a deposed leader refuses at once with a sequence below
// the expected one, while the current leader stores it a moment later, is
// not answered as a conflict: no current leader gives that answer for a
// session read at the expected sequence, so the same messages are sent
// again and the current leader's answer settles the append. Answering
// "conflict" would tell the caller that nothing was written.
func TestAppendRefusedByADeposedLeaderIsNotAConflict(t *testing.T) {
	ctx := context.Background()
	direct, l, p, last := behindADeposedLeader(t, 150*time.Millisecond, false)
	const rounds = 10
	for i := 0; i < rounds; i++ {
		ev := events.New(deposedSession, "web", "alice", events.ToolEnabled{Name: "bash"})
		if i%2 == 1 {
			ev = events.New(deposedSession, "web", "alice", events.ToolDisabled{Name: "bash"})
		}
		actx, cancel := context.WithTimeout(ctx, 20*time.Second)
		res, err := l.Append(actx, deposedSession, last, ev)
		cancel()
		time.Sleep(200 * time.Millisecond) // the first copy reaches the server: not synchronisation
		now, lerr := direct.LeaderLastSeq(ctx, deposedSession)
		if lerr != nil {
			t.Fatal(lerr)
		}
		if now != last+1 {
			t.Fatalf("round %d: the session went from %d to %d, want one event stored", i, last, now)
		}
		switch {
		case err == nil && res.Last == now:
		case errors.Is(err, logport.ErrOutcomeUnknown):
			// Allowed: the caller re-sends the same events.
		default:
			t.Fatalf("round %d: append answered %+v, %v; it is stored at %d", i, res, err, now)
		}
		last = now
	}
	if n := p.answered.Load(); n != rounds {
		t.Fatalf("the deposed leader answered %d of %d appends", n, rounds)
	}
}

// An append that a deposed leader refuses every time it is sent, through
// all the re-sends, is still not answered as a conflict once the current
// leader has stored it: the leader's last sequence sends the append
// looking for its events, and finds them. A call that ends among the
// re-sends answers that the outcome is unknown.
func TestAppendRefusedByADeposedLeaderThroughoutIsFoundOrUnknown(t *testing.T) {
	ctx := context.Background()
	direct, l, _, last := behindADeposedLeader(t, 50*time.Millisecond, true)
	for _, c := range []struct {
		timeout time.Duration
		want    error // nil: success
	}{{20 * time.Second, nil}, {20 * time.Second, nil}, {100 * time.Millisecond, logport.ErrOutcomeUnknown}} {
		actx, cancel := context.WithTimeout(ctx, c.timeout)
		res, err := l.Append(actx, deposedSession, last, events.New(deposedSession, "web", "alice", events.ToolEnabled{Name: "grep"}))
		cancel()
		time.Sleep(500 * time.Millisecond) // the delayed copies reach the server: not synchronisation
		now, lerr := direct.LeaderLastSeq(ctx, deposedSession)
		if lerr != nil {
			t.Fatal(lerr)
		}
		if now != last+1 {
			t.Fatalf("the session went from %d to %d, want one event stored", last, now)
		}
		switch {
		case c.want == nil && (err != nil || res.Last != now):
			t.Fatalf("append within %v: %+v, %v; want stored at %d", c.timeout, res, err, now)
		case c.want != nil && !errors.Is(err, c.want):
			t.Fatalf("append within %v: %+v, %v; want %v (it is stored at %d)", c.timeout, res, err, c.want, now)
		}
		last = now
	}
}
