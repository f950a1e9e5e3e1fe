package resolver

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
)

// Domain-separation prefixes of the two hashes; a change to either byte
// layout must change its prefix.
const (
	toolHashDomain     = "toolintent/tool/v1\x00"
	contractHashDomain = "toolintent/contract/v1\x00"
)

// toolDigest is the SHA-256 of one tool's contract bytes:
//
//	"toolintent/tool/v1\x00"
//	u32be len(name) name  u32be len(description) description
//	u32be len(parameters) parameters  u32be len(permission) permission
//	byte available  byte deferred
//	[ "native" u32be len(anthropic) anthropic u32be len(openai) openai ]
//
// The native part is present only when the tool has a provider-native
// form, so the hashes of other tools are as before; the layout stays
// unambiguous because every field is length-prefixed. Parameters and
// native forms are hashed as given; tools from a Registry carry the
// canonical bytes, so the hash does not depend on the file's formatting.
func toolDigest(t *Tool) [sha256.Size]byte {
	n := len(toolHashDomain) + 16 + len(t.Name) + len(t.Description) + len(t.Parameters) + len(t.Permission) + 2
	if !t.Native.IsZero() {
		n += 6 + 8 + len(t.Native.Anthropic) + len(t.Native.OpenAI)
	}
	var stack [512]byte
	b := stack[:0]
	if n > len(stack) {
		b = make([]byte, 0, n)
	}
	b = append(b, toolHashDomain...)
	b = appendField(b, t.Name)
	b = appendField(b, t.Description)
	b = binary.BigEndian.AppendUint32(b, uint32(len(t.Parameters)))
	b = append(b, t.Parameters...)
	b = appendField(b, t.Permission)
	b = append(b, boolByte(t.Available), boolByte(t.Deferred))
	if !t.Native.IsZero() {
		b = append(b, "native"...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(t.Native.Anthropic)))
		b = append(b, t.Native.Anthropic...)
		b = binary.BigEndian.AppendUint32(b, uint32(len(t.Native.OpenAI)))
		b = append(b, t.Native.OpenAI...)
	}
	return sha256.Sum256(b)
}

func appendField(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// ToolHash returns the hex SHA-256 of one tool's contract: its name,
// description, parameters, permission, availability, deferral mark and
// provider-native forms. Two
// tools have the same ToolHash exactly when those agree, so a checkpoint can
// say which tool of a contract changed.
func ToolHash(t Tool) string {
	d := toolDigest(&t)
	return hex.EncodeToString(d[:])
}

// ContractHash returns the hex SHA-256 of a tool contract: the registry
// version and, for each tool in order, its ToolHash digest (which covers
// name, description, canonical parameters, permission, availability and the
// deferral mark). The byte layout is
//
//	"toolintent/contract/v1\x00" u32be len(version) version u32be len(tools)
//	sha256(tool 0) sha256(tool 1) ...
//
// Order matters: the provider prompt cache does. It is the hash a
// Resolution carries and a checkpoint records.
func ContractHash(version string, tools []Tool) string {
	h := newContractHash(contractPrefix(version), len(tools))
	for i := range tools {
		d := toolDigest(&tools[i])
		h.Write(d[:])
	}
	return hexSum(h)
}

// ContractHashFromToolHashes computes ContractHash from a registry version
// and the ToolHash of each tool of the contract, in order. A checkpoint that
// records (name, ToolHash) entries can so check that they add up to its
// contract hash without the tools themselves. A malformed tool hash
// is an error naming its position.
func ContractHashFromToolHashes(version string, toolHashes []string) (string, error) {
	h := newContractHash(contractPrefix(version), len(toolHashes))
	var d [sha256.Size]byte
	for i, th := range toolHashes {
		if len(th) != 2*sha256.Size {
			return "", fmt.Errorf("hash contract: tool hash %d %q is not 64 hex digits; pass ToolHash values", i, th)
		}
		if _, err := hex.Decode(d[:], []byte(th)); err != nil {
			return "", fmt.Errorf("hash contract: tool hash %d %q is not 64 hex digits; pass ToolHash values: %w", i, th, err)
		}
		h.Write(d[:])
	}
	return hexSum(h), nil
}

// contractPrefix is the start of a contract's hashed bytes: the domain and
// the version field.
func contractPrefix(version string) []byte {
	return appendField([]byte(contractHashDomain), version)
}

func newContractHash(prefix []byte, n int) hash.Hash {
	h := sha256.New()
	h.Write(prefix)
	h.Write(binary.BigEndian.AppendUint32(make([]byte, 0, 4), uint32(n)))
	return h
}

func hexSum(h hash.Hash) string {
	var out [2 * sha256.Size]byte
	hex.Encode(out[:], h.Sum(make([]byte, 0, sha256.Size)))
	return string(out[:])
}
