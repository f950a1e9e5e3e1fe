package jetstream_test

import (
	"net"
	"strings"
	"testing"

	"github.com/toolintent/engine/jetstream"
)

// A taken port is reported by the pre-check (naming the address and
// the --listen fix), not by the 30 s readiness timeout.
func TestEmbeddedPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	_, err = jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: t.TempDir(), Port: port})
	if err == nil || !strings.Contains(err.Error(), ln.Addr().String()) || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("error = %v, want one naming %s and --listen", err, ln.Addr())
	}
}

// The embedded server refuses a non-loopback host without
// authentication.
func TestEmbeddedRefusesOpenNonLoopback(t *testing.T) {
	_, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{DataDir: t.TempDir(), Host: "0.0.0.0"})
	if err == nil || !strings.Contains(err.Error(), "0.0.0.0") || !strings.Contains(err.Error(), "authentication") {
		t.Fatalf("error = %v, want a refusal naming the host", err)
	}
}
