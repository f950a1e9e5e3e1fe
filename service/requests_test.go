package service

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolintent/engine/wire"
)

// Until takes a sequence or an RFC 3339 time.
func TestUntilParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[wire.Until]string{
		"":                          "{0 0001-01-01 00:00:00 +0000 UTC}",
		"42":                        "{42 0001-01-01 00:00:00 +0000 UTC}",
		"2025-06-01T12:00:00Z":      "{0 2025-06-01 12:00:00 +0000 UTC}",
		"2025-06-01T12:00:00 02:00": "{0 2025-06-01 12:00:00 +0200 +0200}",
	} {
		got, err := parseUntil(in)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("parse(%q) = %v, %v; want %s", in, got, err, want)
		}
	}
	for _, in := range []wire.Until{"0", "abc", "2025-06-01", "-3", "99999999999999999999999"} {
		if _, err := parseUntil(in); err == nil || !strings.Contains(err.Error(), "until") {
			t.Errorf("parse(%q) = %v, want an error naming until", in, err)
		}
	}
	var u wire.Until
	if err := json.Unmarshal([]byte(`17`), &u); err != nil || u != "17" {
		t.Errorf("until from a JSON number: %q %v", u, err)
	}
	if err := json.Unmarshal([]byte(`true`), &u); err == nil {
		t.Error("until from true: no error")
	}
}
