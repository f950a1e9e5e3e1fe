// Package clip shortens values quoted in error messages and bounds stored
// texts: the one clip of the engine. It imports only the standard library.
package clip

import (
	"strings"
	"unicode/utf8"
)

// Max is the usual bound, in bytes, of a value quoted in an error message.
const Max = 80

// String shortens s for an error message: s itself when it has at most max
// bytes, else Text(s, max) followed by "...". The result is valid UTF-8
// when shortened.
func String(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return Text(s, max) + "..."
}

// Text makes s valid UTF-8 (invalid bytes become U+FFFD) of at most max
// bytes, cut on a rune boundary, with no marker: for texts that are
// stored, such as a rejection's reason.
func Text(s string, max int) string {
	s = strings.ToValidUTF8(s, "\ufffd")
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Raw quotes a raw JSON value for an error message: trimmed, "nothing"
// when empty, else String of it at 60 bytes.
func Raw(raw []byte) string {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return "nothing"
	}
	return String(s, 60)
}
