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
	tokenName := fs.String("token", "", "the approver or admin token deciding, or its listed prefix (required): "+
		"four-eyes rules count its person (or the token) once")
	cfg, logger, err := parseServerArgsFor(fs, args, showOnly(cellSettings, vendorSettings))
	if err != nil {
		return err
	}
	if err := inTenantCell(ctx, &cfg, *tenantName); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &exitError{code: 2, err: fmt.Errorf("usage: oncebox %s --tenant T --token TOKEN KEY [--reason R]", verb)}
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
	if *tokenName == "" {
		return &exitError{code: 2, err: fmt.Errorf("oncebox %s: name the deciding token with --token (the token or its listed prefix, "+
			"from oncebox tenant token list): a decision counts its person once", verb)}
	}
	p, err := srv.Tenants().Principal(ctx, *tenantName, *tokenName)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if !p.Role.CanDecide() {
		return &exitError{code: 2, err: fmt.Errorf("oncebox %s: the token has the role %s; an approver or admin token decides", verb, p.Role)}
	}
	res, err := srv.Outbox().Decide(ctx, outbox.Decision{TenantID: tid, Key: fs.Arg(0), Approve: verb == "approve",
		Actor: p.Actor() + " (cli)", Voter: p.Voter(), TokenID: p.TokenID, Role: string(p.Role), Reason: *reason})
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s\n", res.Op.Key, res.Op.Status)
	return nil
}
