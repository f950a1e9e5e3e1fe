package deferral

import (
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"
	"github.com/tiktoken-go/tokenizer/codec"
)

// Encoding is the BPE encoding of the measuring stick: OpenAI's
// cl100k_base, as shipped (embedded, offline) by
// github.com/tiktoken-go/tokenizer. Provider-side counts (Anthropic's in
// particular) are server-side and differ somewhat; cl100k_base is the
// fixed, reproducible reference the estimator is calibrated against.
const Encoding = string(tokenizer.Cl100kBase)

// Tokenizer is the measuring stick: a real BPE tokenizer (Encoding) that
// counts the tokens of an actual payload. Tests and the budget command
// check the cheap estimator (EstimateTool, EstimateDeferred, Estimate)
// against it; the request path never uses it.
//
// A Tokenizer is safe for concurrent use. The first one built in a process
// loads the vocabulary (tens of milliseconds); a binary that never builds
// one links only this encoding's vocabulary, and only if it calls
// NewTokenizer, Count or Table.
type Tokenizer struct {
	codec *codec.Codec
}

// NewTokenizer returns a Tokenizer for Encoding.
func NewTokenizer() *Tokenizer {
	return &Tokenizer{codec: codec.NewCl100kBase()}
}

// Encoding returns the name of the tokenizer's encoding (Encoding).
func (t *Tokenizer) Encoding() string { return t.codec.GetName() }

// Count returns the number of tokens of text.
func (t *Tokenizer) Count(text string) (int, error) {
	n, err := t.codec.Count(text)
	if err != nil {
		return 0, fmt.Errorf("count %s tokens of %d bytes: %w", Encoding, len(text), err)
	}
	return n, nil
}

var (
	sharedOnce sync.Once
	shared     *Tokenizer
)

// Count counts the tokens of text with a process-wide Tokenizer (Encoding),
// built on first use. It is the measuring stick, not the estimator.
func Count(text string) (int, error) {
	sharedOnce.Do(func() { shared = NewTokenizer() })
	return shared.Count(text)
}
