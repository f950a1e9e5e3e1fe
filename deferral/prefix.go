package deferral

import (
	"bytes"
	"crypto/sha256"

	"github.com/toolintent/engine/resolver"
)

// PrefixChange says what a provider request did to the prompt-cache prefix
// of the request before it, as far as the tools array goes (R30).
type PrefixChange uint8

const (
	// PrefixSame: the array is byte-identical (cache breakpoints aside).
	PrefixSame PrefixChange = iota
	// PrefixExtended: the previous array is a prefix of this one: tools
	// were appended after it, so the cached prefix still holds.
	PrefixExtended
	// PrefixBroken: a byte of the previous array changed: a cache miss
	// from the first changed tool on.
	PrefixBroken
)

var prefixChangeNames = [...]string{"same", "extended", "broken"}

// String returns "same", "extended" or "broken".
func (c PrefixChange) String() string {
	if int(c) < len(prefixChangeNames) {
		return prefixChangeNames[c]
	}
	return "PrefixChange(?)"
}

// Prefix is what a later request needs of one rendered tools array to say
// whether the prompt cache survived: the hash of the array without its
// cache breakpoint (resolver.CacheMarker, which moves to the new last tool
// when one is appended and is not cached content), and the hash and length
// of that array without its closing bracket. The zero Prefix is "no
// previous request".
type Prefix struct {
	full, stem [sha256.Size]byte
	stemLen    int
	valid      bool
}

// PrefixOf returns the Prefix of a rendered tools array (a JSON array as
// the resolver renders it).
func PrefixOf(rendering []byte) Prefix {
	s := stripMarker(rendering)
	p := Prefix{full: sha256.Sum256(s), valid: true}
	if n := len(s); n > 0 && s[n-1] == ']' {
		p.stemLen = n - 1
		p.stem = sha256.Sum256(s[:n-1])
	}
	return p
}

// Compare says what next does to the prefix p was taken from: the same
// array, an array that appends tools after it, or one that changes it.
// Without a previous request (the zero Prefix) it reports PrefixBroken:
// nothing was cached.
func (p Prefix) Compare(next []byte) PrefixChange {
	if !p.valid {
		return PrefixBroken
	}
	s := stripMarker(next)
	if sha256.Sum256(s) == p.full {
		return PrefixSame
	}
	if p.stemLen == 0 || len(s) <= p.stemLen {
		return PrefixBroken
	}
	if c := s[p.stemLen]; !(c == ',' || p.stemLen == 1 && c == '{') { // a tool boundary ("[" then the first tool)
		return PrefixBroken
	}
	if sha256.Sum256(s[:p.stemLen]) != p.stem {
		return PrefixBroken
	}
	return PrefixExtended
}

// stripMarker removes the one cache breakpoint of a rendering, if any.
func stripMarker(b []byte) []byte {
	i := bytes.Index(b, []byte(resolver.CacheMarker))
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b)-len(resolver.CacheMarker))
	out = append(out, b[:i]...)
	return append(out, b[i+len(resolver.CacheMarker):]...)
}
