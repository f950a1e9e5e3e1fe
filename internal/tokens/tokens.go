// Package tokens holds the bearer tokens of the engine's HTTP gateway: a
// tokens file (a JSON array of Token) read once at start-up, and the
// lookup of a request's token. Each token names the channel (and
// optionally the actor) its requests write as, and may be read-only.
// The api package authenticates with it; engine serve loads it.
package tokens

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/toolintent/engine/service"
)

// Token is one entry of a tokens file: a bearer token and the channel
// (and optionally the actor) its requests write as.
type Token struct {
	// Token is the secret, at least MinLen characters.
	Token string `json:"token"`
	// Channel is recorded on the events the token's requests write; an
	// Engine-Channel header must be absent or equal.
	Channel string `json:"channel"`
	// Actor, when set, is the only actor the token may write as.
	Actor string `json:"actor,omitempty"`
	// ReadOnly tokens may call only the read operations (intent, resolve,
	// history, explain, sessions, registry, budget, turn-inspect,
	// turn-call-check, registry-diff and the live streams).
	ReadOnly bool `json:"read_only,omitempty"`
}

// Set is the tokens of a tokens file. Build it with Load or Parse. It is
// safe for concurrent use (read-only after Parse).
type Set struct {
	byHash map[[32]byte]Token
}

// MinLen is the shortest token a tokens file may hold.
const MinLen = 16

// Parse reads a tokens file: a JSON array of Token, e.g.
//
//	[{"token":"4f1c…","channel":"web"},
//	 {"token":"9a07…","channel":"audit","read_only":true}]
func Parse(data []byte) (*Set, error) {
	var list []Token
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("tokens: want a JSON array of {\"token\",\"channel\",\"actor\",\"read_only\"}: %w", err)
	}
	if len(list) == 0 {
		return nil, errors.New("tokens: the file lists no token")
	}
	t := &Set{byHash: make(map[[32]byte]Token, len(list))}
	for i, e := range list {
		if len(e.Token) < MinLen {
			return nil, fmt.Errorf("tokens: entry %d (channel %q): token has %d characters, want at least %d (e.g. openssl rand -hex 24)", i, e.Channel, len(e.Token), MinLen)
		}
		if err := service.ValidToken("channel of tokens entry "+fmt.Sprint(i), e.Channel); err != nil {
			return nil, fmt.Errorf("tokens: %v", err)
		}
		if err := service.ValidActor(e.Actor); err != nil {
			return nil, fmt.Errorf("tokens: entry %d: %v", i, err)
		}
		h := sha256.Sum256([]byte(e.Token))
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("tokens: entry %d repeats an earlier token", i)
		}
		t.byHash[h] = e
	}
	return t, nil
}

// Load reads a tokens file (see Parse).
func Load(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokens file: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Lookup finds a token. The set is keyed by the token's SHA-256, so the
// lookup time does not depend on how much of a guess matches a token.
func (t *Set) Lookup(token string) (Token, bool) {
	e, ok := t.byHash[sha256.Sum256([]byte(token))]
	return e, ok
}
