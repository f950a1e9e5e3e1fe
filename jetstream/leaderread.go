package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/logport"
)

// ErrNotStored is returned by ReadLeader for a sequence the stream's
// leader holds no event at.
var ErrNotStored = errors.New("no event stored at this sequence")

// ReadLeader reads the event at seq from the stream's leader: a
// STREAM.MSG.GET, which only the leader answers, where the log's other
// reads are direct gets any replica answers from what it holds. A replica
// that lags after a failover or a partition answers "nothing more" for
// events the leader acknowledged; a reader whose direct gets came up short
// asks the leader before it calls the events lost. ErrNotStored when the
// leader has none there.
func (l *Log) ReadLeader(ctx context.Context, seq uint64) (logport.Record, error) {
	r, err := l.leaderGet(ctx, leaderGetRequest{Seq: seq})
	if err != nil {
		return logport.Record{}, fmt.Errorf("read event %d from the stream leader: %w", seq, err)
	}
	if r.Seq != seq {
		return logport.Record{}, fmt.Errorf("read event %d from the stream leader: reply without that message", seq)
	}
	return r, nil
}

// LeaderLastSeq is LastSeq as the stream's leader holds it: a
// STREAM.MSG.GET, which only the leader answers, for the callers that act
// on the answer (a refusal, a search for their own events, a refold)
// where a replica behind the leader would answer with a sequence it
// passed. It costs a JetStream API request where LastSeq's direct get
// does not: not for paths taken on every request.
func (l *Log) LeaderLastSeq(ctx context.Context, session string) (uint64, error) {
	if err := l.checkSession(session); err != nil {
		return 0, fmt.Errorf("last sequence of %q: %w", session, err)
	}
	r, err := l.leaderGet(ctx, leaderGetRequest{LastBy: l.Subject(session)})
	if errors.Is(err, ErrNotStored) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last sequence of %q from the stream leader: %w", session, err)
	}
	return r.Seq, nil
}

// ReadSessionThrough is ReadSession for a caller that knows the session
// holds an event at upTo (a sequence the leader acknowledged or reported):
// when the direct gets end before upTo (a replica behind the leader
// answered them), the rest is read from the stream's leader, one event a
// request. Events erased meanwhile are not asked for again.
func (l *Log) ReadSessionThrough(ctx context.Context, session string, from, upTo uint64) ([]logport.Record, error) {
	recs, err := l.ReadSession(ctx, session, from, upTo)
	if err != nil || upTo == 0 {
		return recs, err
	}
	next := from
	if n := len(recs); n > 0 {
		next = recs[n-1].Seq + 1
	}
	for next <= upTo {
		r, err := l.leaderGet(ctx, leaderGetRequest{Seq: next, NextBy: l.Subject(session)})
		if errors.Is(err, ErrNotStored) || err == nil && r.Seq > upTo {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read session %q from %d on the stream leader: %w", session, next, err)
		}
		recs = append(recs, r)
		next = r.Seq + 1
	}
	return recs, nil
}

// leaderGetRequest is a STREAM.MSG.GET request: the message at Seq, the
// last on subject LastBy, or the first at or after Seq on subject NextBy.
type leaderGetRequest struct {
	Seq    uint64 `json:"seq,omitempty"`
	LastBy string `json:"last_by_subj,omitempty"`
	NextBy string `json:"next_by_subj,omitempty"`
}

// leaderGet asks the event stream's leader for one event; ErrNotStored
// when it holds none that matches.
func (l *Log) leaderGet(ctx context.Context, get leaderGetRequest) (logport.Record, error) {
	m, err := l.leaderMsg(ctx, l.name, get)
	if err != nil {
		return logport.Record{}, err
	}
	r := l.record(m.seq, m.subject, m.time, m.header.Get(headerMsgID), m.data)
	r.First = firstOfSubject(m.header)
	return r, nil
}

// storedMsg is a message as a stream's leader returned it.
type storedMsg struct {
	subject string
	seq     uint64
	header  nats.Header
	data    []byte
	time    time.Time
}

// leaderMsg asks the leader of stream (one of the log's streams) for one
// message (STREAM.MSG.GET); ErrNotStored when it holds none that matches.
// It asks again after a reconnect or a second without an answer: a
// request that reached a node as it died is never answered. Every member
// of the stream's group gets the request, and one that sees no leader
// (an election under way, or a member that has not heard from the leader
// yet) answers 503 at once: that answer is asked again after a short
// back-off for up to noResponderWait, as a read without responders is,
// and the last one is returned as a *jetstream.APIError, which Transient
// accepts (callers that wait out an election retry it).
func (l *Log) leaderMsg(ctx context.Context, stream string, get leaderGetRequest) (storedMsg, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	var m storedMsg
	err := readAgainWhile(ctx, noLeader, func() error {
		var err error
		m, err = l.leaderMsgOnce(ctx, stream, get)
		return err
	})
	return m, err
}

// noLeader reports a JetStream API answer 503: no leader to serve it.
func noLeader(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.Code == 503
}

// leaderMsgOnce is leaderMsg's one request, asked again only while it
// goes unanswered.
func (l *Log) leaderMsgOnce(ctx context.Context, stream string, get leaderGetRequest) (storedMsg, error) {
	req, _ := json.Marshal(get)
	m, err := ask(ctx, l, func(ctx context.Context) (*nats.Msg, error) {
		return l.nc.RequestWithContext(ctx, l.cfg.apiPrefix()+"STREAM.MSG.GET."+stream, req)
	})
	if err != nil {
		return storedMsg{}, err
	}
	var resp struct {
		Error *struct {
			Code    int    `json:"code"`
			ErrCode int    `json:"err_code"`
			Desc    string `json:"description"`
		} `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return storedMsg{}, err
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 {
			return storedMsg{}, ErrNotStored
		}
		return storedMsg{}, &jetstream.APIError{Code: resp.Error.Code, ErrorCode: jetstream.ErrorCode(resp.Error.ErrCode), Description: resp.Error.Desc}
	}
	if resp.Message == nil {
		return storedMsg{}, errors.New("reply without a message")
	}
	h := nats.Header{}
	if len(resp.Message.Header) > 0 {
		hm, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return storedMsg{}, fmt.Errorf("headers: %w", err)
		}
		h = hm
	}
	l.msgsRead.Add(1)
	return storedMsg{subject: resp.Message.Subject, seq: resp.Message.Seq, header: h, data: resp.Message.Data, time: resp.Message.Time}, nil
}

// leaderKV reads key's value and revision in a KV bucket from the bucket
// stream's leader, where a direct get any replica answers could come from
// one behind it: nil with revision 0 when the key was never written, nil
// with the marker's revision when it was deleted or purged.
func (l *Log) leaderKV(ctx context.Context, bucket, key string) ([]byte, uint64, error) {
	m, err := l.leaderMsg(ctx, "KV_"+bucket, leaderGetRequest{LastBy: "$KV." + bucket + "." + key})
	switch {
	case errors.Is(err, ErrNotStored):
		return nil, 0, nil
	case err != nil:
		return nil, 0, fmt.Errorf("read %s/%s from its leader: %w", bucket, key, err)
	}
	if op := m.header.Get("KV-Operation"); op == "DEL" || op == "PURGE" {
		return nil, m.seq, nil
	}
	return m.data, m.seq, nil
}
