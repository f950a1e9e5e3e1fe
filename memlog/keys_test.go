package memlog_test

import (
	"testing"

	"github.com/toolintent/engine/keystest"
	"github.com/toolintent/engine/memlog"
)

func TestKeysConformance(t *testing.T) {
	keystest.Run(t, func(*testing.T) keystest.Keys { return memlog.NewKeys() })
}
