package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/oncebox/oncebox/devkit/bench"
)

// runBench is `oncebox bench`: every benchmark scenario against its baseline, measured
// in this one run, printed as one Markdown table. Progress goes to stderr. The run uses
// fresh schemas of its own and drops them.
func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	g := addGlobalFlags(fs)
	quick := fs.Bool("quick", false, "shrink every scenario to run in about a minute (a smoke test)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("bench: unexpected arguments %q", fs.Args())}
	}
	if _, err := g.log.logger(); err != nil {
		return err
	}
	if strings.TrimSpace(g.databaseURL()) == "" {
		return errNoDatabase()
	}
	_, err := bench.Run(ctx, bench.Config{DatabaseURL: g.databaseURL(), Quick: *quick, Out: os.Stdout, Progress: os.Stderr})
	return err
}
