// Command tiny is the 20-line client whose binary size the client
// package's tests report: it resolves a session's tools over HTTP.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/toolintent/engine/client"
)

func main() {
	c := client.NewHTTP(os.Getenv("ENGINE_SERVER"))
	v, err := c.Resolve(context.Background(), client.ResolveRequest{Session: "s1"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(v.Tools)
}
