package main

import (
	"context"
	"flag"

	"github.com/oncebox/oncebox/server"
)

// runServe is `oncebox serve`: the API, the workers and the periodic jobs (--roles), with
// every setting of settings().
func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	cfg, logger, err := parseServerArgs(fs, args)
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx)
}
