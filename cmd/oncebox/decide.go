package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/oncebox/oncebox/outbox"
)

// runDecide is `oncebox approve` and `oncebox reject`: a person's decision on an op that
// awaits approval, with the database's credentials.
func runDecide(ctx context.Context, verb string, args []string) error {
	fs := flag.NewFlagSet(verb, flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant name")
	reason := fs.String("reason", "", "why (recorded in the op's history)")
	actor := fs.String("actor", envOr("USER", "operator"), "who decides")
	cfg, logger, err := parseServerArgs(fs, args)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &exitError{code: 2, err: fmt.Errorf("usage: oncebox %s --tenant T KEY [--reason R]", verb)}
	}
	srv, err := offline(ctx, cfg, logger, false)
	if err != nil {
		return err
	}
	defer srv.Close()
	tid, err := tenantID(ctx, srv, *tenantName)
	if err != nil {
		return err
	}
	var op *outbox.Op
	if verb == "approve" {
		op, err = srv.Outbox().Approve(ctx, tid, fs.Arg(0), *actor+" (cli)", *reason)
	} else {
		op, err = srv.Outbox().Reject(ctx, tid, fs.Arg(0), *actor+" (cli)", *reason)
	}
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", op.Key, op.Status)
	return nil
}
