package actor_test

import (
	"context"
	"fmt"

	"github.com/toolintent/engine/actor"
)

// Hash mode stores a keyed token: the same key and actor always give the
// same one, so an operator searches an audit for Token(user id).
func ExampleSealer_Token() {
	s, err := actor.New(actor.Config{Mode: actor.Hash, Key: []byte("an operator key of 32 bytes or more")})
	if err != nil {
		panic(err)
	}
	stored, _ := s.Seal(context.Background(), "alice@example.com")
	fmt.Println(stored == s.Token("alice@example.com"), len(stored), stored[:3])
	// Output: true 35 h1:
}
