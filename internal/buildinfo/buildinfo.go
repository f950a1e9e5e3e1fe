// Package buildinfo says what the running binary is: the module version
// and VCS commit from the Go build information, and the Go, embedded
// nats-server and nats.go versions. engine version and the
// engine_build_info metric both read it.
package buildinfo

import (
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"
)

// Info describes a build.
type Info struct {
	Module     string `json:"module"`
	Version    string `json:"version"`
	Commit     string `json:"commit,omitempty"`
	CommitTime string `json:"commit_time,omitempty"`
	Modified   bool   `json:"modified,omitempty"`
	Go         string `json:"go"`
	Platform   string `json:"platform"`
	NATSServer string `json:"nats_server"`
	NATSClient string `json:"nats_go"`
}

// Commit, when set at link time (-ldflags "-X
// github.com/toolintent/engine/internal/buildinfo.Commit=$(git rev-parse
// HEAD)"), names the commit of a build without VCS stamping
// (-buildvcs=false).
var Commit string

// Read returns the running binary's build.
func Read() Info {
	v := Info{Module: "github.com/toolintent/engine", Version: "(unknown)", Commit: Commit, Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, NATSServer: server.VERSION}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Module, v.Version = bi.Main.Path, bi.Main.Version
	for _, d := range bi.Deps {
		if d.Path == "github.com/nats-io/nats.go" {
			v.NATSClient = d.Version
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
