package jetstream

import (
	"fmt"
	"testing"
)

// A session set holds exactly the sessions it was made of, and reads
// back from its stored form as the same set; a stored form that is not
// sorted distinct hashes is refused.
func TestSessionSetHoldsItsSessionsAndRoundTrips(t *testing.T) {
	var in []string
	for i := range 1000 {
		in = append(in, fmt.Sprintf("s-%d", i))
	}
	set := NewSessionSet(append(in, in[:10]...))
	back, err := unmarshalSessionSet(set.marshal())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*SessionSet{set, back} {
		if s.Len() != len(in) {
			t.Fatalf("set of %d sessions (10 twice) has %d hashes", len(in), s.Len())
		}
		for _, id := range in {
			if !s.Has(id) {
				t.Fatalf("the set lost %s", id)
			}
		}
		for i := range 1000 {
			if id := fmt.Sprintf("t-%d", i); s.Has(id) {
				t.Fatalf("the set holds %s, never put in", id)
			}
		}
	}
	if (*SessionSet)(nil).Has("s-1") {
		t.Fatal("a nil set holds a session")
	}
	data := set.marshal()
	swapped := append(append([]byte{}, data[8:16]...), data[:8]...)
	if _, err := unmarshalSessionSet(swapped); err == nil {
		t.Fatal("an unsorted set was read back")
	}
	if _, err := unmarshalSessionSet(data[:7]); err == nil {
		t.Fatal("a set of 7 bytes was read back")
	}
}

// The layout record's three forms parse, and a record mixing them, or a
// migrated one without its session set, is refused.
func TestLayoutRecordForms(t *testing.T) {
	for _, ok := range []string{
		`{"partitions":1,"time":"2026-12-06T00:00:00Z"}`,
		`{"partitions":3}`,
		`{"migrating":3}`,
		`{"migrated":{"partitions":3,"one_stream":"TOOLS_EVENTS","one_stream_last_seq":9,"sessions":4,"sessions_object":"x","sessions_sha256":"ab"}}`,
	} {
		if _, err := parseLayout("B", []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{
		`{}`, `{"partitions":0}`, `{"partitions":3,"migrating":3}`,
		`{"migrated":{"partitions":3,"sessions_object":""}}`,
		`{"migrated":{"partitions":1,"sessions_object":"x"}}`,
		`{"partitions":2,"migrated":{"partitions":3,"sessions_object":"x"}}`,
	} {
		if _, err := parseLayout("B", []byte(bad)); err == nil {
			t.Errorf("%s parsed as a layout record", bad)
		}
	}
}
