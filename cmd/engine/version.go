package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolintent/engine/api"
)

// commit may be set at link time (-ldflags "-X main.commit=$(git
// rev-parse HEAD)") for builds without VCS stamping (-buildvcs=false).
var commit string

// versionCmd prints what this binary is.
type versionCmd struct {
	JSON bool `name:"json" help:"Print as JSON."`
}

// buildVersion describes the binary: module version and VCS commit from
// the build info, the Go, nats-server and API versions.
type buildVersion struct {
	Module      string `json:"module"`
	Version     string `json:"version"`
	Commit      string `json:"commit,omitempty"`
	CommitTime  string `json:"commit_time,omitempty"`
	Modified    bool   `json:"modified,omitempty"`
	Go          string `json:"go"`
	Platform    string `json:"platform"`
	NATSServer  string `json:"nats_server"`
	NATSClient  string `json:"nats_go"`
	APIVersion  string `json:"api_version"`
	ServiceName string `json:"service_name"`
}

func readBuildVersion() buildVersion {
	v := buildVersion{Module: "github.com/toolintent/engine", Version: "(unknown)", Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, NATSServer: server.VERSION, APIVersion: api.Version, ServiceName: api.ServiceName}
	v.Commit = commit
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

func (c *versionCmd) Run(context.Context) error {
	v := readBuildVersion()
	if c.JSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	commit := v.Commit
	if commit == "" {
		commit = "unknown (built without VCS information: -buildvcs=false, or outside a git checkout)"
	} else if v.Modified {
		commit += " (modified)"
	}
	fmt.Printf("engine %s\nmodule      %s\ncommit      %s\ngo          %s %s\nnats-server %s (embedded)\nnats.go     %s\napi         %s %s\n",
		v.Version, v.Module, commit, v.Go, v.Platform, v.NATSServer, v.NATSClient, v.ServiceName, v.APIVersion)
	return nil
}
