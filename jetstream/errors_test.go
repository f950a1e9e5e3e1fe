package jetstream

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// TestIsCASConflict: both of JetStream's expected-sequence refusals are
// conflicts, wrapped or not; other API errors are not. A replicated views
// bucket answers 10164, which views.go once missed (#25, NATS-FACTS).
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
		{&ConflictError{Session: "s", Expected: 7, Actual: 7, InFlight: true}, true},
		{fmt.Errorf("append: %w", &ConflictError{Session: "s", Expected: 7, Actual: 7, InFlight: true}), true},
		{&ConflictError{Session: "s", Expected: 7, Actual: 9, InFlight: true}, false},
		{&ConflictError{Session: "s", Expected: 7, Actual: 7}, false},
		{ErrConflict, false},
		{nil, false},
	} {
		if got := inFlightRefusal(tc.err, 7); got != tc.want {
			t.Errorf("inFlightRefusal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
