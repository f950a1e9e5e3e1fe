package events

import (
	"hash/fnv"
	"strconv"
	"testing"
)

// The partition is FNV-1a 32 modulo the count: the published test
// vectors of the hash, and the standard library's implementation over
// every session-id byte.
func TestPartitionIsFNV1aModuloCount(t *testing.T) {
	// FNV-1a 32 of "a" is 0xe40c292c, of "foobar" 0xbf9cf968 (the
	// reference vectors of the FNV authors).
	for _, c := range []struct {
		session string
		sum     uint32
	}{{"a", 0xe40c292c}, {"foobar", 0xbf9cf968}} {
		for k := 2; k <= 9; k++ {
			if got, want := Partition(c.session, k), int(c.sum%uint32(k)); got != want {
				t.Fatalf("Partition(%q, %d) = %d, want %d", c.session, k, got, want)
			}
		}
	}
	ids := []string{"s", "session-1", "A_b-9", "01JEXAMPLE0000000000000000", string(make([]byte, MaxSessionLen))}
	for _, id := range ids {
		h := fnv.New32a()
		h.Write([]byte(id))
		for _, k := range []int{2, 3, 4, 7, 16, MaxPartitions} {
			if got, want := Partition(id, k), int(h.Sum32()%uint32(k)); got != want {
				t.Fatalf("Partition(%q, %d) = %d, want %d", id, k, got, want)
			}
		}
	}
}

// One partition or none is the unpartitioned layout.
func TestPartitionOfOneStreamIsZero(t *testing.T) {
	for _, k := range []int{-1, 0, 1} {
		if got := Partition("anything", k); got != 0 {
			t.Fatalf("Partition(_, %d) = %d, want 0", k, got)
		}
	}
}

// Sessions spread over the partitions: 10,000 sequential ids put
// between 0.8 and 1.2 of the even share in each of 4 partitions.
func TestPartitionSpreadsSequentialIDs(t *testing.T) {
	const n, k = 10_000, 4
	var count [k]int
	for i := range n {
		count[Partition("session-"+strconv.Itoa(i), k)]++
	}
	for p, c := range count {
		if c < n/k*8/10 || c > n/k*12/10 {
			t.Fatalf("partition %d holds %d of %d sessions, want %d ± 20%%: %v", p, c, n, n/k, count)
		}
	}
}
