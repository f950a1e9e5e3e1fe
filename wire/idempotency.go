package wire

import (
	"crypto/sha256"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxIdempotencyKey is the longest idempotency key, in bytes.
const MaxIdempotencyKey = 255

// CheckIdempotencyKey reports whether key is a usable idempotency key (the
// engine's rule, so a client can refuse it before sending): any string of 1
// to 255 bytes of UTF-8 without control characters. Keys are opaque and
// case-sensitive: "A" and "a" are two keys.
func CheckIdempotencyKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("idempotency key is empty: send 1 to %d bytes (a UUID, say) or no key", MaxIdempotencyKey)
	case len(key) > MaxIdempotencyKey:
		return fmt.Errorf("idempotency key of %d bytes is too long: at most %d (a UUID is 36)", len(key), MaxIdempotencyKey)
	case !utf8.ValidString(key):
		return fmt.Errorf("idempotency key %q is not UTF-8", key)
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("idempotency key %q holds a control character (%U): use printable characters", key, r)
		}
	}
	return nil
}

// IdempotencyEventIDs returns the ids of the n events an append with
// idempotency key key stores on session: the first 16 bytes of
// SHA-256("toolintent/engine idempotency key v1" 0x00 session 0x00 key)
// written as a ULID (26 characters of Crockford base32, upper case; its
// time field is hash bits, not a time), then that 128-bit number plus 1,
// 2, ... for the further events. The engine computes the same (a test
// checks that they agree), so a client knows the ids before the reply.
func IdempotencyEventIDs(session, key string, n int) []string {
	sum := sha256.Sum256([]byte("toolintent/engine idempotency key v1\x00" + session + "\x00" + key))
	var id [16]byte
	copy(id[:], sum[:16])
	out := make([]string, n)
	for i := range out {
		out[i] = ulidString(id)
		for b := len(id) - 1; b >= 0; b-- { // id + 1
			id[b]++
			if id[b] != 0 {
				break
			}
		}
	}
	return out
}

// ulidString writes 128 bits as a ULID: 26 characters of Crockford base32,
// the first carrying the top 3 bits.
func ulidString(id [16]byte) string {
	const alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
	var out [26]byte
	// 130 bits, two leading zeros: character i holds bits [5i-2, 5i+3) of the 128.
	bit := func(i int) int { // bit i of id, 0 the most significant; <0 is 0
		if i < 0 {
			return 0
		}
		return int(id[i/8]>>(7-uint(i%8))) & 1
	}
	for c := range out {
		v := 0
		for k := range 5 {
			v = v<<1 | bit(5*c-2+k)
		}
		out[c] = alphabet[v]
	}
	return string(out[:])
}
