package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolintent/engine/logport"
)

// TestIsCASConflict: both of JetStream's expected-sequence refusals are
// conflicts, wrapped or not; other API errors are not. A replicated views
// bucket answers 10164, which views.go once missed (NATS-FACTS).
func TestIsCASConflict(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence: 7"}, true},
		{&jetstream.APIError{Code: 400, ErrorCode: 10164, Description: "wrong last sequence"}, true},
		{fmt.Errorf("put view k: %w", &jetstream.APIError{Code: 400, ErrorCode: 10164}), true},
		{&jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum messages exceeded"}, false},
		{errors.New("wrong last sequence"), false},
		{nil, false},
	} {
		if got := IsCASConflict(tc.err); got != tc.want {
			t.Errorf("IsCASConflict(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestInFlightRefusal: only a 10164 refusal that left the session at the
// expected sequence is sent again; a session that moved is a conflict.
func TestInFlightRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 7, InFlight: true}, true},
		{fmt.Errorf("append: %w", &logport.ConflictError{Session: "s", Expected: 7, Actual: 7, InFlight: true}), true},
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 9, InFlight: true}, false},
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 7}, false},
		{logport.ErrConflict, false},
		{nil, false},
	} {
		if got := inFlightRefusal(tc.err, 7); got != tc.want {
			t.Errorf("inFlightRefusal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestUnsettledRefusal: a refusal for a write in flight at the expected
// sequence, or one naming a sequence below expected (a deposed leader's
// answer), is sent again; one naming a sequence past expected is a
// conflict.
func TestUnsettledRefusal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 7, InFlight: true}, true},
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 3}, true},
		{fmt.Errorf("append: %w", &logport.ConflictError{Session: "s", Expected: 7, Actual: 6, InFlight: true}), true},
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 7}, false},
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 9}, false},
		{&logport.ConflictError{Session: "s", Expected: 7, Actual: 9, InFlight: true}, false},
		{logport.ErrConflict, false},
		{nil, false},
	} {
		if got := unsettledRefusal(tc.err, 7); got != tc.want {
			t.Errorf("unsettledRefusal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A re-send refused because an earlier try with the same message id is
// still being stored (10158, "duplicate message id is in process", as
// after a leader change) is an unknown outcome the append path re-sends,
// not a conflict answered to the caller.
func TestMsgIDInProcessIsOutcomeUnknown(t *testing.T) {
	l := &Log{}
	err := l.publishError(context.Background(), "s1", 7, &jetstream.APIError{Code: 409, ErrorCode: 10158, Description: "duplicate message id is in process"})
	if !errors.Is(err, logport.ErrOutcomeUnknown) || errors.Is(err, logport.ErrConflict) {
		t.Fatalf("10158: %v, want ErrOutcomeUnknown and no conflict", err)
	}
	var ou *logport.OutcomeUnknownError
	if !errors.As(err, &ou) || ou.Session != "s1" || ou.AfterSeq != 7 {
		t.Fatalf("10158: %#v, want the session and the expected sequence", err)
	}
}
