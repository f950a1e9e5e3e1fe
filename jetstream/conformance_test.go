package jetstream_test

import (
	"testing"

	"github.com/toolintent/engine/logtest"
)

// The JetStream log, on a real in-process nats-server, keeps
// the contract of service.Log (the same suite memlog passes).
func TestConformance(t *testing.T) {
	logtest.Run(t, func(t *testing.T) logtest.Log {
		l, _ := openLog(t)
		return l
	})
}
