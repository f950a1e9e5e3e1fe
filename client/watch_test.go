package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolintent/engine/client"
)

// Watch over both transports: a session's events after afterSeq,
// then live ones, without another session's; a refused stream is Watch's
// error; a deleted session ends the watch with ErrWatchEnded.
func TestWatchBothTransports(t *testing.T) {
	nc, err := nats.Connect(engineNATS)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for name, c := range map[string]*client.Client{"http": client.NewHTTP(engineHTTP), "nats": client.NewNATS(nc)} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
			defer cancel()
			s, other := "watch-"+name, "watch-other-"+name
			first, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Enable()}})
			if err != nil {
				t.Fatal(err)
			}
			second, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.DisableTool("bash")}})
			if err != nil {
				t.Fatal(err)
			}
			events, err := c.Watch(ctx, s, first.LastSeq)
			if err != nil {
				t.Fatal(err)
			}
			next, stop := iterPull(events)
			defer stop()
			if ev, err := next(); err != nil || ev.Seq != second.LastSeq || ev.Session != s || ev.Type != "ToolDisabled" {
				t.Fatalf("first event after %d: %+v %v, want seq %d", first.LastSeq, ev, err, second.LastSeq)
			}
			if _, err := c.Append(ctx, client.AppendRequest{Session: other, Commands: []client.Command{client.Enable()}}); err != nil {
				t.Fatal(err)
			}
			third, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Disable()}})
			if err != nil {
				t.Fatal(err)
			}
			if ev, err := next(); err != nil || ev.Seq != third.LastSeq {
				t.Fatalf("live event: %+v %v, want seq %d (not %s's)", ev, err, third.LastSeq, other)
			}
			if _, err := c.SessionDelete(ctx, client.DeleteRequest{Session: s}); err != nil {
				t.Fatal(err)
			}
			if ev, err := next(); err != nil || ev.Type != "SessionDeleted" {
				t.Fatalf("after delete: %+v %v", ev, err)
			}
			if _, err := next(); !errors.Is(err, client.ErrWatchEnded) {
				t.Fatalf("after SessionDeleted: %v, want ErrWatchEnded", err)
			}
			if _, err := c.Watch(ctx, "bad id", 0); !errors.Is(err, client.ErrInvalid) {
				t.Fatalf("watch of a bad id: %v, want ErrInvalid", err)
			}
		})
	}
}

// iterPull turns Watch's iterator into a next function.
func iterPull(seq func(func(client.LiveEvent, error) bool)) (func() (client.LiveEvent, error), func()) {
	type item struct {
		ev  client.LiveEvent
		err error
	}
	ch := make(chan item)
	done := make(chan struct{})
	go func() {
		defer close(ch)
		seq(func(ev client.LiveEvent, err error) bool {
			select {
			case ch <- item{ev, err}:
				return true
			case <-done:
				return false
			}
		})
	}()
	return func() (client.LiveEvent, error) {
			it, ok := <-ch
			if !ok {
				return client.LiveEvent{}, errors.New("watch iterator ended")
			}
			return it.ev, it.err
		}, func() {
			close(done)
		}
}

// A dropped HTTP stream is reconnected with Last-Event-ID: the
// events after the last one seen arrive once each. A proxy cuts the
// first live connection after its first event.
func TestWatchReconnectsHTTP(t *testing.T) {
	target, _ := url.Parse(engineHTTP)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	var lives, resumed atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/live") {
			rp.ServeHTTP(w, r)
			return
		}
		if r.Header.Get("Last-Event-ID") != "" && lives.Load() > 0 {
			resumed.Add(1)
		}
		if lives.Add(1) > 1 {
			rp.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		rp.ServeHTTP(&cutWriter{ResponseWriter: w, cancel: cancel}, r.WithContext(ctx))
	}))
	defer proxy.Close()
	c := client.NewHTTP(proxy.URL)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // hang guard
	defer cancel()
	s := "watch-reconnect"
	var seqs []uint64
	for _, cmd := range []client.Command{client.Enable(), client.DisableTool("bash"), client.Disable()} {
		r, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{cmd}})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, r.LastSeq)
	}
	events, err := c.Watch(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	next, stop := iterPull(events)
	defer stop()
	for _, want := range seqs {
		if ev, err := next(); err != nil || ev.Seq != want {
			t.Fatalf("event %+v %v, want seq %d", ev, err, want)
		}
	}
	// The first connection was cut after the write that carried its first
	// event (perhaps all three): an event appended now arrives over the
	// resumed one, once.
	r, err := c.Append(ctx, client.AppendRequest{Session: s, Commands: []client.Command{client.Enable()}})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := next(); err != nil || ev.Seq != r.LastSeq {
		t.Fatalf("event after the reconnect %+v %v, want seq %d", ev, err, r.LastSeq)
	}
	if lives.Load() < 2 || resumed.Load() < 1 {
		t.Fatalf("%d live connections, %d resumed with Last-Event-ID: want the cut one and a resumed one", lives.Load(), resumed.Load())
	}
}

// cutWriter ends the response after the first event it passes.
type cutWriter struct {
	http.ResponseWriter
	cancel context.CancelFunc
}

func (w *cutWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	if strings.Contains(string(b), "id: ") {
		w.cancel()
	}
	return n, err
}

func (w *cutWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
