package main

import (
	"context"
	"errors"
	"flag"
	"os"
)

// runConfig is `oncebox config`: every setting of serve and dev as the table of
// docs/configuration.md.
func runConfig(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("config", flag.ContinueOnError)
	addGlobalFlags(fs)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return &exitError{code: 2, err: errors.New("usage: oncebox config (no arguments)")}
	}
	printSettings(os.Stdout)
	return nil
}
