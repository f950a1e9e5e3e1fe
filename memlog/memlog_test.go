package memlog_test

import (
	"testing"

	"github.com/toolintent/engine/logtest"
	"github.com/toolintent/engine/memlog"
)

// The in-memory log keeps the contract of service.Log.
func TestConformance(t *testing.T) {
	logtest.Run(t, func(*testing.T) logtest.Log { return memlog.New() })
}
