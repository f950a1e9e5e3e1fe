package api

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/toolintent/engine/internal/clip"
)

// replyAllowed reports whether the engine may publish a reply to subject
// (issue 11, item 3). A reply goes only to an inbox: the first token is
// _INBOX (nats.go, natscli) or starts with _INBOX_ (the private inbox
// prefixes of deploy/nats-server.conf, set with nats.CustomInboxPrefix),
// or is _R_, the server's mapping of a reply subject for a request that
// came through a service import from another account.
// Anything else, in particular the engine's own subjects (the event log,
// the API), the JetStream and KV API ($JS., $KV.) and the system subjects,
// is refused: otherwise a caller could make the engine write its JSON
// reply into the log or a KV bucket by naming it as the reply subject.
func replyAllowed(subject string) error {
	first, rest, ok := strings.Cut(subject, ".")
	if !ok || rest == "" {
		return fmt.Errorf("reply subject %q is not an inbox: use a reply subject under _INBOX. or _INBOX_<user>. (nats.go's default, or nats.CustomInboxPrefix)", clip.String(subject, clip.Max))
	}
	if first != "_INBOX" && first != "_R_" && !strings.HasPrefix(first, "_INBOX_") {
		return fmt.Errorf("reply subject %q is not an inbox: the engine replies only to subjects under _INBOX.> or _INBOX_<user>.>", clip.String(subject, clip.Max))
	}
	for _, tok := range strings.Split(rest, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n") {
			return fmt.Errorf("reply subject %q is not a valid inbox subject", clip.String(subject, clip.Max))
		}
	}
	return nil
}

// limiter bounds the requests in flight per channel and in total (issue
// 11, item 7): one channel flooding the engine with slow requests
// (min_seq waits, large appends) gets "busy" replies while the other
// channels are served. Every HTTP channel the engine does not know
// shares the one key unknownChannels (#24 row 6): made-up Engine-Channel
// values cannot multiply the per-channel budget into the total.
type limiter struct {
	mu         sync.Mutex
	perChannel int
	total      int
	all        int
	inFlight   map[string]int
}

// unknownChannels is the limiter key of every HTTP channel that is not
// known (see API.httpLimitKey); it is no valid channel token, so no real
// channel shares it.
const unknownChannels = "\x00unknown"

// OtherChannels is the channel label of requests from unknown HTTP
// channels in Config.Observe (and so in /metrics).
const OtherChannels = "other"

// channelLabel is the label Config.Observe gets for a limiter key.
func channelLabel(key string) string {
	if key == unknownChannels {
		return OtherChannels
	}
	return key
}

func newLimiter(perChannel, total int) *limiter {
	return &limiter{perChannel: perChannel, total: total, inFlight: map[string]int{}}
}

// acquire takes a slot for key (a channel, or unknownChannels for
// channel), or returns a CodeBusy error.
func (l *limiter) acquire(key, channel string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight[key] >= l.perChannel {
		if key == unknownChannels {
			return &APIError{Status: http.StatusTooManyRequests, Code: CodeBusy,
				Message: fmt.Sprintf("channel %q is not a known HTTP channel, and the unknown ones share %d requests in flight, all taken: retry later, or use a known channel (serve --http-channel, or a token of --http-tokens)", clip.String(channel, clip.Max), l.perChannel)}
		}
		return &APIError{Status: http.StatusTooManyRequests, Code: CodeBusy,
			Message: fmt.Sprintf("channel %q has %d requests in flight, the most the engine handles at once per channel: retry later", clip.String(channel, clip.Max), l.perChannel)}
	}
	if l.all >= l.total {
		return &APIError{Status: http.StatusTooManyRequests, Code: CodeBusy,
			Message: fmt.Sprintf("the engine has %d requests in flight, the most it handles at once: retry later", l.total)}
	}
	l.inFlight[key]++
	l.all++
	return nil
}

func (l *limiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all--
	if l.inFlight[key]--; l.inFlight[key] <= 0 {
		delete(l.inFlight, key)
	}
}
