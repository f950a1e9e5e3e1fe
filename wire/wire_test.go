package wire_test

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/toolintent/engine/wire"
)

// Wire is the vocabulary a light client links, so it imports
// the standard library only: no third-party module, and of the engine only
// the intent leaf (whose Intent is the wire's) and internal/clip, both
// themselves stdlib-only.
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, d := range strings.Fields(string(out)) {
		switch d {
		case "github.com/toolintent/engine/wire", "github.com/toolintent/engine/intent", "github.com/toolintent/engine/internal/clip":
		default:
			t.Errorf("wire imports %s", d)
		}
	}
}

// The error envelope: a conflict always carries expected and actual (even
// 0), no other code does; a reply without the envelope gets its status's
// documented code (409 conflict, 507 storage_full, never invalid or
// internal), and errors.Is matches by code.
func TestErrorEnvelope(t *testing.T) {
	for _, c := range []struct {
		e    wire.Error
		want string
	}{
		{wire.Error{Code: wire.CodeConflict, Message: "m"}, `{"error":{"code":"conflict","message":"m","expected":0,"actual":0}}`},
		{wire.Error{Code: wire.CodeInvalid, Message: "m", Expected: 3}, `{"error":{"code":"invalid","message":"m"}}`},
	} {
		b, err := json.Marshal(wire.Envelope{Error: &c.e})
		if err != nil || string(b) != c.want {
			t.Errorf("%+v: %s %v, want %s", c.e, b, err, c.want)
		}
	}
	for status, code := range map[int]string{409: wire.CodeConflict, 507: wire.CodeStorageFull, 418: wire.CodeInvalid, 500: wire.CodeInternal, 502: wire.CodeUnavailable} {
		e := wire.DecodeError(status, []byte("<html>proxy</html>"), "2")
		if e.Code != code || e.Status != status || e.RetryAfter.Seconds() != 2 || !errors.Is(e, &wire.Error{Code: code}) {
			t.Errorf("%d without an envelope: %+v, want code %s", status, e, code)
		}
	}
	e := wire.DecodeError(409, []byte(`{"error":{"code":"no_turn","message":"m"}}`), "")
	if e.Code != wire.CodeNoTurn || e.Message != "m" || e.Status != 409 {
		t.Errorf("envelope: %+v", e)
	}
}

// Until takes a sequence as a JSON number or string, and an RFC 3339
// time; anything else is an invalid request naming the value.
func TestUntil(t *testing.T) {
	var r wire.HistoryRequest
	if err := json.Unmarshal([]byte(`{"session":"s","until":42}`), &r); err != nil || r.Until != "42" {
		t.Fatalf("number: %q %v", r.Until, err)
	}
	err := json.Unmarshal([]byte(`{"session":"s","until":true}`), &r)
	if !errors.Is(err, &wire.Error{Code: wire.CodeInvalid}) || !strings.Contains(err.Error(), "true") {
		t.Fatalf("bool: %v", err)
	}
	if wire.UntilSeq(7) != "7" {
		t.Fatal(wire.UntilSeq(7))
	}
	// Bound: a sequence, a time, or an invalid request naming until.
	if seq, _, err := wire.Until("42").Bound(); seq != 42 || err != nil {
		t.Fatalf("bound 42: %d %v", seq, err)
	}
	if _, tm, err := wire.Until("2025-06-01T12:00:00 02:00").Bound(); err != nil || tm.Format(time.RFC3339) != "2025-06-01T12:00:00+02:00" {
		t.Fatalf("bound with an unescaped offset: %v %v", tm, err)
	}
	if _, _, err := wire.Until("0").Bound(); !errors.Is(err, &wire.Error{Code: wire.CodeInvalid}) || !strings.Contains(err.Error(), "until") {
		t.Fatalf("bound 0: %v", err)
	}
}
