// Package server is what `engine serve` runs: Run wires the
// event log (an embedded NATS server or an external cluster), the views
// and the projection, the service, the NATS micro and HTTP transports,
// and the operator's checks — the write probe, the log-integrity
// watcher, the start-up store check, the append guard, the disk checks,
// the acknowledged watermark and the start-up wait for NATS — from one
// Config. cmd/engine maps its flags to a Config and calls Run; the other
// commands that work on the store (rebuild, stream repair, registry push)
// open it with OpenLog.
//
// Error messages and log lines name the `engine serve` flag of a bad
// setting: they are the command's.
package server
