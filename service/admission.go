package service

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/toolintent/engine/internal/clip"
	"github.com/toolintent/engine/wire"
)

// Admission: the requests in flight that the
// transports share, per channel and in all. LiveHub bounds live streams
// the same way.

// Limiter bounds the requests in flight per channel and in total (issue
// 11, item 7): one channel flooding the engine with slow requests
// (min_seq waits, large appends) gets "busy" replies while the other
// channels are served. Every HTTP channel the engine does not know
// shares the one key UnknownChannels: made-up Engine-Channel
// values cannot multiply the per-channel budget into the total.
type Limiter struct {
	mu         sync.Mutex
	perChannel int
	total      int
	all        int
	inFlight   map[string]int
}

// UnknownChannels is the Limiter key of every HTTP channel that is not
// known (the api's httpLimitKey decides); it is no valid channel token,
// so no real channel shares it.
const UnknownChannels = "\x00unknown"

// OtherChannels is the channel label of requests from unknown HTTP
// channels in the api's Config.Observe (and so in /metrics).
const OtherChannels = "other"

// ChannelLabel is the metrics label of a Limiter key.
func ChannelLabel(key string) string {
	if key == UnknownChannels {
		return OtherChannels
	}
	return key
}

// NewLimiter returns a Limiter of perChannel requests per key and total
// in all.
func NewLimiter(perChannel, total int) *Limiter {
	return &Limiter{perChannel: perChannel, total: total, inFlight: map[string]int{}}
}

// Acquire takes a slot for key (a channel, or UnknownChannels for
// channel), or returns a wire.CodeBusy (429) *wire.Error.
func (l *Limiter) Acquire(key, channel string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight[key] >= l.perChannel {
		if key == UnknownChannels {
			return &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeBusy,
				Message: fmt.Sprintf("channel %q is not a known HTTP channel, and the unknown ones share %d requests in flight, all taken: retry later, or use a known channel (serve --http-channel, or a token of --http-tokens)", clip.String(channel, clip.Max), l.perChannel)}
		}
		return &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeBusy,
			Message: fmt.Sprintf("channel %q has %d requests in flight, the most the engine handles at once per channel: retry later", clip.String(channel, clip.Max), l.perChannel)}
	}
	if l.all >= l.total {
		return &wire.Error{Status: http.StatusTooManyRequests, Code: wire.CodeBusy,
			Message: fmt.Sprintf("the engine has %d requests in flight, the most it handles at once: retry later", l.total)}
	}
	l.inFlight[key]++
	l.all++
	return nil
}

// Release frees a slot of key.
func (l *Limiter) Release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.inFlight[key]--; l.inFlight[key] <= 0 {
		delete(l.inFlight, key)
	}
}

// InFlight is how many slots key holds now.
func (l *Limiter) InFlight(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inFlight[key]
}
