package events

// MaxPartitions bounds the number of event-stream partitions of a layout.
const MaxPartitions = 256

// Partition returns the partition, in [0, partitions), that session
// belongs to in a layout of partitions event streams: the FNV-1a 32-bit
// hash of the session id modulo partitions. It is the function
// nats-server computes for the subject mapping
// "<prefix>.events.*" → "<prefix>.events.{{partition(K,1)}}.{{wildcard(1)}}",
// so an engine and a server mapping route every session alike. A
// partitions of 1 or less is the unpartitioned layout: 0.
func Partition(session string, partitions int) int {
	if partitions <= 1 {
		return 0
	}
	// FNV-1a, 32 bits, inline: no hash.Hash allocation on the append path.
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h := uint32(offset32)
	for i := 0; i < len(session); i++ {
		h ^= uint32(session[i])
		h *= prime32
	}
	return int(h % uint32(partitions))
}
