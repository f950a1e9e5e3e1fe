package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
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
func (l *Log) ReadLeader(ctx context.Context, seq uint64) (Record, error) {
	ctx, cancel := l.withTimeout(ctx)
	defer cancel()
	req, _ := json.Marshal(struct {
		Seq uint64 `json:"seq"`
	}{seq})
	m, err := l.nc.RequestWithContext(ctx, l.cfg.apiPrefix()+"STREAM.MSG.GET."+l.name, req)
	if err != nil {
		return Record{}, fmt.Errorf("read event %d from the stream leader: %w", seq, err)
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
		return Record{}, fmt.Errorf("read event %d from the stream leader: %w", seq, err)
	}
	if resp.Error != nil {
		if resp.Error.Code == 404 {
			return Record{}, fmt.Errorf("read event %d from the stream leader: %w", seq, ErrNotStored)
		}
		return Record{}, fmt.Errorf("read event %d from the stream leader: %d %s", seq, resp.Error.Code, resp.Error.Desc)
	}
	if resp.Message == nil || resp.Message.Seq != seq {
		return Record{}, fmt.Errorf("read event %d from the stream leader: reply without that message", seq)
	}
	h := nats.Header{}
	if len(resp.Message.Header) > 0 {
		hm, err := nats.DecodeHeadersMsg(resp.Message.Header)
		if err != nil {
			return Record{}, fmt.Errorf("read event %d from the stream leader: headers: %w", seq, err)
		}
		h = hm
	}
	l.msgsRead.Add(1)
	r := l.record(seq, resp.Message.Subject, resp.Message.Time, h.Get(headerMsgID), resp.Message.Data)
	r.First = firstOfSubject(h)
	return r, nil
}
