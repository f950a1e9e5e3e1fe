package events

import (
	"errors"
	"strings"
	"testing"
)

// One subject-token rule: [A-Za-z0-9_-] only, the first bad byte
// named; a session id is that rule plus 1..MaxSessionLen bytes.
func TestTokenRule(t *testing.T) {
	for s, want := range map[string]int{"": -1, "sess_01-A": -1, "a.b": 1, "a b": 1, "*": 0, "ok>": 2, "é": 0} {
		if got := BadTokenByte(s); got != want {
			t.Errorf("BadTokenByte(%q) = %d, want %d", s, got, want)
		}
	}
	if ValidToken("") || !ValidToken("web") || ValidToken("a.b") {
		t.Error("ValidToken disagrees with the rule")
	}
	for _, s := range []string{"", "a.b", strings.Repeat("a", MaxSessionLen+1)} {
		if err := ValidateSessionID(s); !errors.Is(err, ErrInvalidSession) {
			t.Errorf("ValidateSessionID(%q) = %v, want ErrInvalidSession", s, err)
		}
	}
	if err := ValidateSessionID(strings.Repeat("a", MaxSessionLen)); err != nil {
		t.Errorf("a %d-byte session id is refused: %v", MaxSessionLen, err)
	}
}
