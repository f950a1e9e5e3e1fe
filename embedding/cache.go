package embedding

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
)

// Cache keeps vectors by key so that restarts and other engines reuse
// them: the engine's implementation is a JetStream KV bucket
// (<PREFIX>_EMBEDDINGS). Keys are "<model>.<tool hash>": the model part
// (Keys.Model) is 16 hex digits, the tool hash 64. Implementations are
// safe for concurrent use.
type Cache interface {
	// Load returns the values stored under keys, all of which begin with
	// prefix + "."; a key with none is absent from the map.
	Load(ctx context.Context, prefix string, keys []string) (map[string][]byte, error)
	// Put stores value under key.
	Put(ctx context.Context, key string, value []byte) error
}

// modelKey is the key part of a model and the prefixes its texts get:
// the first 16 hex digits of their SHA-256 with the text version, so
// that another model, another prefix or another way of writing a tool's
// text never reuses a vector.
func modelKey(model, documentPrefix string) string {
	h := sha256.Sum256([]byte("toolintent/embedding/" + textVersion + "\x00" + model + "\x00" + documentPrefix))
	return hex.EncodeToString(h[:8])
}

// valueMagic opens every stored vector: the format's name and version.
const valueMagic = "EV01"

// encodeVector is the stored form of a vector: valueMagic, the dimension
// (uint32, little-endian), then each number (float32, little-endian).
func encodeVector(v []float32) []byte {
	b := make([]byte, 8, 8+4*len(v))
	copy(b, valueMagic)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(v)))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

// decodeVector reads encodeVector's form; false for anything else (a
// value of another format or damaged), which is embedded again.
func decodeVector(b []byte) ([]float32, bool) {
	if len(b) < 8 || string(b[:4]) != valueMagic {
		return nil, false
	}
	dim := binary.LittleEndian.Uint32(b[4:])
	if dim == 0 || dim > MaxDim || len(b) != 8+4*int(dim) {
		return nil, false
	}
	v := make([]float32, dim)
	var sq float64
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[8+4*i:]))
		sq += float64(v[i]) * float64(v[i])
	}
	if sq == 0 || math.IsNaN(sq) || math.IsInf(sq, 0) {
		return nil, false
	}
	return v, true
}
