package deferral

import (
	"bytes"
	"crypto/sha256"
	"hash"

	"github.com/toolintent/engine/resolver"
)

// PrefixChange says what a provider request did to the prompt-cache prefix
// of the request before it, as far as the tools array goes.
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
// the resolver renders it). It hashes the array once, without copying it.
func PrefixOf(rendering []byte) Prefix {
	s := stripped(rendering)
	p := Prefix{valid: true}
	h := sha256.New()
	n := s.len()
	if n > 0 && s.at(n-1) == ']' {
		p.stemLen = n - 1
		s.write(h, 0, n-1)
		h.Sum(p.stem[:0])
		s.write(h, n-1, n)
	} else {
		s.write(h, 0, n)
	}
	h.Sum(p.full[:0])
	return p
}

// Compare says what next does to the prefix p was taken from: the same
// array, an array that appends tools after it, or one that changes it.
// Without a previous request (the zero Prefix) it reports PrefixBroken:
// nothing was cached. It hashes next once, without copying it; a caller
// that holds next's Prefix compares the two first (equal Prefixes are the
// same array).
func (p Prefix) Compare(next []byte) PrefixChange {
	if !p.valid {
		return PrefixBroken
	}
	s := stripped(next)
	n := s.len()
	h := sha256.New()
	var sum [sha256.Size]byte
	stemOK := false
	if p.stemLen > 0 && n > p.stemLen {
		s.write(h, 0, p.stemLen)
		stemOK = [sha256.Size]byte(h.Sum(sum[:0])) == p.stem
		s.write(h, p.stemLen, n)
	} else {
		s.write(h, 0, n)
	}
	if [sha256.Size]byte(h.Sum(sum[:0])) == p.full {
		return PrefixSame
	}
	if !stemOK {
		return PrefixBroken
	}
	if c := s.at(p.stemLen); !(c == ',' || p.stemLen == 1 && c == '{') { // a tool boundary ("[" then the first tool)
		return PrefixBroken
	}
	return PrefixExtended
}

// strippedArray is a rendering seen without its one cache breakpoint
// (resolver.CacheMarker), if any: the bytes before the marker, then those
// after it, addressed as one array without copying them.
type strippedArray struct {
	b   []byte
	cut int // where the marker starts; len(b) when there is none
	gap int // the marker's length; 0 when there is none
}

func stripped(b []byte) strippedArray {
	i := bytes.Index(b, []byte(resolver.CacheMarker))
	if i < 0 {
		return strippedArray{b: b, cut: len(b)}
	}
	return strippedArray{b: b, cut: i, gap: len(resolver.CacheMarker)}
}

func (s strippedArray) len() int { return len(s.b) - s.gap }

// at returns the byte at offset i of the stripped array.
func (s strippedArray) at(i int) byte {
	if i < s.cut {
		return s.b[i]
	}
	return s.b[i+s.gap]
}

// write writes bytes [from, to) of the stripped array to h.
func (s strippedArray) write(h hash.Hash, from, to int) {
	if from < s.cut {
		h.Write(s.b[from:min(to, s.cut)])
	}
	if to > s.cut {
		h.Write(s.b[max(from, s.cut)+s.gap : to+s.gap])
	}
}
