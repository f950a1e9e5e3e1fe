package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/toolintent/engine/events"
	"github.com/toolintent/engine/jetstream"
	"github.com/toolintent/engine/logport"
)

// rawData is the body of every event type of the bench as a plain msgpack
// struct: what a raw client that knows the wire format (docs/wire-format.md)
// would declare.
type rawData struct {
	Name    string   `msgpack:"name,omitempty"`
	Names   []string `msgpack:"names,omitempty"`
	Enabled *bool    `msgpack:"enabled,omitempty"`
	Preset  string   `msgpack:"preset,omitempty"`
	Turn    uint64   `msgpack:"turn,omitempty"`
}

// rawEvent is the envelope as a raw client declares it: the same keys in
// the same order as events.Encode writes them.
type rawEvent struct {
	ID      string  `msgpack:"id"`
	Session string  `msgpack:"session"`
	Channel string  `msgpack:"channel"`
	Actor   string  `msgpack:"actor"`
	TimeMs  int64   `msgpack:"time_ms"`
	V       int     `msgpack:"v"`
	Type    string  `msgpack:"type"`
	Data    rawData `msgpack:"data"`
}

// rawWriter is the fair raw side of an append: for each message a fresh
// ULID (also its Nats-Msg-Id), a fresh msgpack/v5 encode of a
// ToolDisabled/ToolEnabled event of the same size as the engine's, the
// event-type header and the expected-last-subject-sequence header (CAS).
// One rawWriter per goroutine.
type rawWriter struct {
	session string
	subj    string
	buf     bytes.Buffer
	enc     *msgpack.Encoder
	// casRetries counts publishNext's CAS refusals of the writer's own
	// event (re-sent or refused while the previous write was in flight).
	casRetries int
}

func newRawWriter(session string) *rawWriter {
	w := &rawWriter{session: session, subj: prefixRaw + ".events." + session}
	w.enc = msgpack.NewEncoder(&w.buf)
	w.enc.UseCompactInts(true)
	return w
}

// encode returns the msgpack bytes of toggle event i, freshly encoded.
func (w *rawWriter) encode(id string, i int) ([]byte, string, error) {
	typ := string(toggle(i).EventType())
	ev := rawEvent{ID: id, Session: w.session, Channel: origin.Channel, Actor: origin.Actor,
		TimeMs: time.Now().UnixMilli(), V: events.SchemaVersion, Type: typ, Data: rawData{Name: "bash"}}
	w.buf.Reset()
	if err := w.enc.Encode(&ev); err != nil {
		return nil, "", err
	}
	return bytes.Clone(w.buf.Bytes()), typ, nil
}

// msg builds toggle event i of the session expecting the session at last.
func (w *rawWriter) msg(i int, last uint64) (*nats.Msg, error) {
	id := events.NewID()
	data, typ, err := w.encode(id, i)
	if err != nil {
		return nil, err
	}
	m := nats.NewMsg(w.subj)
	m.Data = data
	m.Header.Set(njs.MsgIDHeader, id)
	m.Header.Set(jetstream.HeaderEventType, typ)
	m.Header.Set(njs.ExpectedLastSubjSeqHeader, strconv.FormatUint(last, 10))
	return m, nil
}

// publishSync publishes event i synchronously and returns its sequence.
func (w *rawWriter) publishSync(ctx context.Context, js njs.JetStream, i int, last uint64) (uint64, error) {
	m, err := w.msg(i, last)
	if err != nil {
		return 0, err
	}
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("raw publish to %s at %d: %w", w.subj, last, err)
	}
	return ack.Sequence, nil
}

// publishAsync publishes event i with PublishMsgAsync and waits for its
// ack (one append in flight per session, as CAS allows).
func (w *rawWriter) publishAsync(ctx context.Context, js njs.JetStream, i int, last uint64) (uint64, error) {
	m, err := w.msg(i, last)
	if err != nil {
		return 0, err
	}
	return w.sendAsync(ctx, js, m, last)
}

// sendAsync publishes m with PublishMsgAsync and waits for its ack.
func (w *rawWriter) sendAsync(ctx context.Context, js njs.JetStream, m *nats.Msg, last uint64) (uint64, error) {
	f, err := js.PublishMsgAsync(m)
	if err != nil {
		return 0, err
	}
	select {
	case ack := <-f.Ok():
		return ack.Sequence, nil
	case err := <-f.Err():
		return 0, fmt.Errorf("raw async publish to %s at %d: %w", w.subj, last, err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// publishNext is publishAsync for a writer on a replicated stream, where
// a CAS refusal does not always mean another writer: 10071 comes back when
// nats.go re-sent a publish (no responders during a leader change) whose
// first copy was stored, and 10164 when the leader still counts a write to
// the subject in flight, even the writer's own previous one whose ack has
// already arrived. The writer is the subject's only one, so it does what
// the engine's append does: it reads where the session is and, if the
// event is not there, sends the same message again (same Nats-Msg-Id, so
// it is stored at most once) until it is acknowledged or the subject moved
// past last. It returns the session's new last sequence.
func (w *rawWriter) publishNext(ctx context.Context, js njs.JetStream, st njs.Stream, i int, last uint64) (uint64, error) {
	m, err := w.msg(i, last)
	if err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	backoff := logport.Backoff{First: time.Millisecond, Max: 50 * time.Millisecond}
	for {
		seq, err := w.sendAsync(wctx, js, m, last)
		if err == nil || !jetstream.IsCASConflict(err) {
			return seq, err
		}
		w.casRetries++
		got, gerr := st.GetLastMsgForSubject(wctx, w.subj)
		if gerr == nil && got.Sequence > last {
			return got.Sequence, nil
		}
		if serr := logport.Sleep(wctx, backoff.Next()); serr != nil {
			return 0, errors.Join(err, gerr, fmt.Errorf("%s did not move past %d: %w", w.subj, last, serr))
		}
	}
}

// rawDecode decodes one stored event with msgpack/v5 into rawEvent: the
// minimal useful work of a raw consumer.
func rawDecode(data []byte, ev *rawEvent) error {
	*ev = rawEvent{}
	return msgpack.Unmarshal(data, ev)
}

// sameSize checks that the raw encode of a toggle event is exactly as
// large as the engine's, and returns that size.
func sameSize() (int, error) {
	eng, err := envelope("sync-e000", true)
	if err != nil {
		return 0, err
	}
	raw, _, err := newRawWriter("sync-r000").encode(events.NewID(), 0)
	if err != nil {
		return 0, err
	}
	if len(raw) != len(eng) {
		return 0, fmt.Errorf("raw event is %d B, the engine's %d B: the baseline would not be fair", len(raw), len(eng))
	}
	return len(eng), nil
}
