package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/oncebox/oncebox/internal/bench"
)

// runBench is `oncebox bench`: every benchmark scenario against its baseline, measured
// in this one run, printed as one Markdown table. Progress goes to stderr.
func runBench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	dbURL := fs.String("database-url", os.Getenv("DATABASE_URL"), "Postgres URL (env DATABASE_URL); the run uses fresh schemas of its own and drops them")
	quick := fs.Bool("quick", false, "shrink every scenario to run in about a minute (a smoke test)")
	if err := fs.Parse(args); err != nil {
		return &exitError{code: 2, err: err}
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: fmt.Errorf("bench: unexpected arguments %q", fs.Args())}
	}
	if *dbURL == "" {
		return &exitError{code: 2, err: fmt.Errorf("set DATABASE_URL (or --database-url) to a Postgres URL")}
	}
	_, err := bench.Run(ctx, bench.Config{DatabaseURL: *dbURL, Quick: *quick, Out: os.Stdout, Progress: os.Stderr})
	return err
}
