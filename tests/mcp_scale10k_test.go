//go:build scale

package tests

import "testing"

// scale10k is the MCP corpus plus 100 generated servers of 90 tools.
var scale10k = scaleSize{name: "10k", servers: 100, perServer: 90, rounds: 3}

// The scale matrix on a registry of 10,095 tools (the MCP corpus and
// 100 generated servers of 90 tools): every operation over HTTP and NATS
// succeeds and stays within its bound. It takes a few minutes, so it runs
// under the scale build tag, which CI sets (.ci/run):
//
//	go test -tags scale -run TestMCPScaleMatrix10k ./tests/
func TestMCPScaleMatrix10k(t *testing.T) {
	runScaleMatrix(t, scale10k)
}
