package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oncebox/oncebox/cells"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendoraccount"
)

const tenantUsage = "usage: oncebox tenant create NAME | token create [--role agent|approver|admin|operator] [--person P] NAME | " +
	"token list [NAME] | token revoke TOKEN | list  (--format text|json) | policy ... | budget ... | adopt ... | vendor ..."

// runTenant is `oncebox tenant`: tenants and their API tokens. A new token is printed once,
// as the last word of the last line of standard output, or as the token member of a JSON
// object with --format json.
func runTenant(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "policy" {
		return runTenantPolicy(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "budget" {
		return runTenantBudget(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "adopt" {
		return runTenantAdopt(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "vendor" {
		return runTenantVendor(ctx, args[1:])
	}
	if len(args) > 0 && args[0] == "move" {
		return runTenantMove(ctx, args[1:])
	}
	fs := flag.NewFlagSet("tenant", flag.ContinueOnError)
	g := addGlobalFlags(fs)
	roleName := fs.String("role", string(tenant.RoleAgent), "role of a new token: agent, auditor, approver, admin or operator")
	person := fs.String("person", "", "with token create: the person the token belongs to (an email); four-eyes rules count a person once")
	format := fs.String("format", "text", "text or json")
	cell := fs.String("cell", "", "with create: the cell to create the tenant in (default: the home cell, DATABASE_URL's)")
	cellsFlag := secretVar(fs, "cells", "ONCEBOX_CELLS", "", "with create --cell: the cells other than the home cell, as serve's --cells")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if _, err := g.log.logger(); err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return &exitError{code: 2, err: fmt.Errorf("--format %q: want text or json", *format)}
	}
	if rest := fs.Args(); *cell != "" && *cell != cells.Home {
		if len(rest) != 2 || rest[0] != "create" {
			return &exitError{code: 2, err: errors.New("--cell is for tenant create; other tenant commands take the cell's own --database-url")}
		}
		return createInCell(ctx, g.databaseURL(), *cellsFlag, rest[1], *cell, func(store *tenant.Store, name string) error {
			_, token, err := store.Create(ctx, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "tenant %q created in cell %s; its agent API token follows (shown once, only its hash is stored)\n", name, *cell)
			c := tenantCtx{out: os.Stdout, json: *format == "json"}
			return c.printToken(name, tenant.RoleAgent, token)
		})
	}
	role, err := tenant.ParseRole(*roleName)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	rest := fs.Args()
	run, ok := tenantCommand(rest)
	if !ok {
		return &exitError{code: 2, err: errors.New(tenantUsage)}
	}
	pool, err := openMigratedPool(ctx, g.databaseURL())
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(rest) == 2 && rest[0] == "create" {
		// A name the directory places in another cell is taken (in a cell's own database
		// the directory is empty).
		if placed, err := cells.Placed(ctx, pool, rest[1]); err == nil && placed.Cell != cells.Home {
			return fmt.Errorf("%w: %q, in cell %s", tenant.ErrExists, rest[1], placed.Cell)
		}
	}
	settings, err := vendoraccount.New(pool, nil)
	if err != nil {
		return err
	}
	return run(ctx, tenantCtx{store: tenant.NewStore(pool), settings: settings, out: os.Stdout, json: *format == "json", role: role, person: *person})
}

// tenantCtx is what a tenant subcommand works with.
type tenantCtx struct {
	store *tenant.Store
	// settings reads the claims on the installation's accounts, which a second tenant
	// ends (tenant vendor own).
	settings *vendoraccount.Settings
	out      io.Writer
	json     bool
	role     tenant.Role
	// person is --person, for token create.
	person string
}

// tenantCommand returns the subcommand named by the positional arguments.
func tenantCommand(rest []string) (func(context.Context, tenantCtx) error, bool) {
	switch {
	case len(rest) == 2 && rest[0] == "create":
		return func(ctx context.Context, c tenantCtx) error {
			if c.role != tenant.RoleAgent {
				return &exitError{code: 2, err: errors.New("tenant create makes an agent token; add others with: oncebox tenant token create --role ROLE NAME")}
			}
			_, token, err := c.store.Create(ctx, rest[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "tenant %q created; its agent API token follows (shown once, only its hash is stored)\n", rest[1])
			c.noteEndedClaims(ctx)
			return c.printToken(rest[1], tenant.RoleAgent, token)
		}, true
	case len(rest) == 3 && rest[0] == "token" && (rest[1] == "create" || rest[1] == "new"):
		return func(ctx context.Context, c tenantCtx) error {
			token, err := c.store.NewTokenFor(ctx, rest[2], c.role, c.person)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "%s token for tenant %q follows (shown once, only its hash is stored)\n", c.role, rest[2])
			return c.printToken(rest[2], c.role, token)
		}, true
	case len(rest) == 3 && rest[0] == "token" && rest[1] == "revoke":
		return func(ctx context.Context, c tenantCtx) error {
			if err := c.store.RevokeToken(ctx, rest[2]); err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "revoked")
			return nil
		}, true
	case len(rest) >= 2 && len(rest) <= 3 && rest[0] == "token" && rest[1] == "list":
		return func(ctx context.Context, c tenantCtx) error {
			return c.listTokens(ctx, rest[2:])
		}, true
	case len(rest) == 1 && rest[0] == "list":
		return func(ctx context.Context, c tenantCtx) error { return c.listTenants(ctx) }, true
	}
	return nil, false
}

// printToken prints a new token: alone on the last line, or as JSON.
func (c tenantCtx) printToken(tenantName string, role tenant.Role, token string) error {
	if c.json {
		return json.NewEncoder(c.out).Encode(map[string]string{"tenant": tenantName, "role": string(role), "token": token})
	}
	_, err := fmt.Fprintln(c.out, token)
	return err
}

// tokenRow is one listed token.
type tokenRow struct {
	Tenant    string     `json:"tenant"`
	ID        int64      `json:"id"`
	Prefix    string     `json:"prefix"`
	Role      string     `json:"role"`
	Person    string     `json:"person,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

// listTokens lists the tokens of the named tenant, or of every tenant.
func (c tenantCtx) listTokens(ctx context.Context, names []string) error {
	if len(names) == 0 {
		ts, err := c.store.List(ctx)
		if err != nil {
			return err
		}
		for _, t := range ts {
			names = append(names, t.Name)
		}
	} else if _, err := c.store.ByName(ctx, names[0]); err != nil {
		return err
	}
	rows := []tokenRow{}
	for _, name := range names {
		toks, err := c.store.Tokens(ctx, name)
		if err != nil {
			return err
		}
		for _, k := range toks {
			rows = append(rows, tokenRow{Tenant: name, ID: k.ID, Prefix: k.Prefix, Role: string(k.Role), Person: k.Person, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt})
		}
	}
	if c.json {
		return json.NewEncoder(c.out).Encode(rows)
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tID\tPREFIX\tROLE\tCREATED\tREVOKED")
	for _, r := range rows {
		revoked := "-"
		if r.RevokedAt != nil {
			revoked = r.RevokedAt.Format(time.RFC3339)
		}
		fmt.Fprintf(w, "%s\t%d\t%s…\t%s\t%s\t%s\n", r.Tenant, r.ID, r.Prefix, r.Role, r.CreatedAt.Format(time.RFC3339), revoked)
	}
	return w.Flush()
}

// listTenants lists tenants with their tokens' prefixes and roles.
func (c tenantCtx) listTenants(ctx context.Context) error {
	ts, err := c.store.List(ctx)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tCREATED\tTOKENS")
	for _, t := range ts {
		toks, err := c.store.Tokens(ctx, t.Name)
		if err != nil {
			return err
		}
		var names []string
		for _, k := range toks {
			n := k.Prefix + "… " + string(k.Role)
			if k.RevokedAt != nil {
				n += " (revoked)"
			}
			names = append(names, n)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", t.ID, t.Name, t.CreatedAt.Format(time.RFC3339), strings.Join(names, ", "))
	}
	return w.Flush()
}

// noteEndedClaims says which claims on the installation's accounts (tenant vendor own)
// a new tenant ended: their objects need adoption again.
func (c tenantCtx) noteEndedClaims(ctx context.Context) {
	owners, err := c.settings.Owners(ctx, 0)
	if err != nil {
		return // A note only: the tenant exists.
	}
	for _, o := range owners {
		if !o.InForce {
			fmt.Fprintf(os.Stderr, "note: the claim on the installation's %s account (tenant vendor own) is no longer in force now that "+
				"another tenant exists: objects made outside oncebox need adoption again (oncebox tenant adopt)\n", o.Vendor)
		}
	}
}
