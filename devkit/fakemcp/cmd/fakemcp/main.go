// Command fakemcp serves the fake upstream MCP server (package fakemcp) over stdio,
// its mails and crash knob in a state file: fakemcp -state FILE.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/oncebox/oncebox/devkit/fakemcp"
)

func main() {
	state := flag.String("state", "", "the state file (mails and crash knob)")
	flag.Parse()
	if *state == "" {
		fmt.Fprintln(os.Stderr, "fakemcp: -state is required")
		os.Exit(2)
	}
	s, err := fakemcp.NewFileBacked(*state, func() {
		fmt.Fprintln(os.Stderr, "fakemcp: crashing after acting")
		os.Exit(3)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakemcp:", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "fakemcp: serving over stdio")
	if err := s.MCP().Run(context.Background(), s.StdioTransport()); err != nil {
		fmt.Fprintln(os.Stderr, "fakemcp:", err)
		os.Exit(1)
	}
}
