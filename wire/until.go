package wire

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// Until bounds a history or an explanation: a stream sequence ("42", or
// the JSON number 42) or an RFC 3339 time ("2025-06-01T12:00:00Z"). Empty
// means now.
type Until string

// UntilSeq bounds at a sequence.
func UntilSeq(seq uint64) Until { return Until(strconv.FormatUint(seq, 10)) }

// UntilTime bounds at a time.
func UntilTime(t time.Time) Until { return Until(t.UTC().Format(time.RFC3339Nano)) }

// UnmarshalJSON accepts a string or a non-negative integer; anything else
// is an *Error with CodeInvalid naming the value.
func (u *Until) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*u = ""
		return nil
	}
	if len(b) > 0 && b[0] >= '0' && b[0] <= '9' {
		if _, err := strconv.ParseUint(string(b), 10, 64); err != nil {
			return Invalid(`field "until" %s: want a sequence number or an RFC 3339 time`, Clip(b))
		}
		*u = Until(b)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return Invalid(`field "until" must be a sequence number or an RFC 3339 time string, got %s`, Clip(b))
	}
	*u = Until(s)
	return nil
}

// Bound reads u: a sequence (seq > 0) or a time; empty (or blanks) is
// no bound (0 and the zero time). A "+02:00" offset that arrived as
// " 02:00" (an unescaped query string) is read as "+02:00". Anything else
// is an *Error with CodeInvalid naming the value.
func (u Until) Bound() (seq uint64, t time.Time, err error) {
	s := strings.TrimSpace(string(u))
	if s == "" {
		return 0, time.Time{}, nil
	}
	if s[0] >= '0' && s[0] <= '9' && !strings.ContainsAny(s, "-:T") {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, time.Time{}, Invalid("until %q: want a sequence number or an RFC 3339 time: %v", Clip([]byte(s)), err)
		}
		if n == 0 {
			return 0, time.Time{}, Invalid("until 0: sequences start at 1; leave until empty for no bound")
		}
		return n, time.Time{}, nil
	}
	t, err = time.Parse(time.RFC3339Nano, s)
	if err != nil && strings.Contains(s, " ") {
		t, err = time.Parse(time.RFC3339Nano, strings.Replace(s, " ", "+", 1))
	}
	if err != nil {
		return 0, time.Time{}, Invalid("until %q is neither a sequence number nor an RFC 3339 time (like 2025-06-01T12:00:00Z)", Clip([]byte(s)))
	}
	return 0, t, nil
}

// History pages: a reply holds at most this many entries.
const (
	// DefaultHistoryPage is the page size of a request without limit.
	DefaultHistoryPage = 100
	// MaxHistoryPage is the largest limit a request may give.
	MaxHistoryPage = 1000
	// MaxHistoryPageBytes ends a page once its entries pass this many
	// bytes of JSON (the NATS server's default max_payload is 1 MiB).
	MaxHistoryPageBytes = 512 << 10
)

// MaxCommands bounds the commands of one append request.
const MaxCommands = 100
