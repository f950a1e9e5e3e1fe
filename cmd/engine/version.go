package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/toolintent/engine/api"
	"github.com/toolintent/engine/internal/buildinfo"
)

// versionCmd prints what this binary is.
type versionCmd struct {
	JSON bool `name:"json" help:"Print as JSON."`
}

// buildVersion is the build with the API's version and service name.
type buildVersion struct {
	buildinfo.Info
	APIVersion  string `json:"api_version"`
	ServiceName string `json:"service_name"`
}

func (c *versionCmd) Run(context.Context) error {
	v := buildVersion{Info: buildinfo.Read(), APIVersion: api.Version, ServiceName: api.ServiceName}
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

// versionLine is what --version prints: the module version and commit.
func versionLine() string {
	v := buildinfo.Read()
	commit := v.Commit
	if commit == "" {
		commit = "unknown commit"
	} else if v.Modified {
		commit += " (modified)"
	}
	return fmt.Sprintf("engine %s (%s, %s, api %s)", v.Version, commit, v.Go, api.Version)
}
