package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Error messages and stored reasons stay bounded and valid UTF-8,
// however long or malformed the value they quote.
func TestClip(t *testing.T) {
	if got := String("short", Max); got != "short" {
		t.Errorf("String of a short value = %q", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes, 2-byte runes
	got := String(long, 81)
	if !utf8.ValidString(got) || !strings.HasSuffix(got, "...") || len(got) > 81+3 {
		t.Errorf("String(long, 81) = %q (%d bytes): want valid UTF-8, at most 84 bytes, ending in ...", got, len(got))
	}
	if got := Text("a\xffb", 10); got != "a\ufffdb" {
		t.Errorf("Text keeps invalid UTF-8: %q", got)
	}
	if got := Text(long, 3); got != "é" {
		t.Errorf("Text(long, 3) = %q, want one rune", got)
	}
}

// The one quote of a raw JSON value in error messages.
func TestRaw(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", "nothing"},
		{"  \n", "nothing"},
		{` "on" `, `"on"`},
		{strings.Repeat("x", 61), strings.Repeat("x", 60) + "..."},
	} {
		if got := Raw([]byte(c.in)); got != c.want {
			t.Errorf("Raw(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
