package jetstream_test

import (
	"context"
	"testing"

	"github.com/toolintent/engine/keystest"
)

func TestKeysConformance(t *testing.T) {
	keystest.Run(t, func(t *testing.T) keystest.Keys {
		l, _ := openLog(t)
		k, err := l.Keys(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return k
	})
}
