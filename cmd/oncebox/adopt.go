package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"text/tabwriter"
	"time"

	"github.com/oncebox/oncebox/tenant"
)

const adoptUsage = "usage: oncebox tenant adopt --tenant T VENDOR ID [ID ...] | tenant adopt --list [--tenant T] [--format text|json]"

// runTenantAdopt is `oncebox tenant adopt`: objects made outside oncebox (a payment taken
// before oncebox, by the dashboard) that a tenant's ops may act on (a refund of it), or
// the list of those adopted.
func runTenantAdopt(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenant adopt", flag.ContinueOnError)
	g := addGlobalFlags(fs)
	name := fs.String("tenant", "", "the tenant that adopts the objects (with --list: only its objects)")
	list := fs.Bool("list", false, "list the adopted objects instead")
	format := fs.String("format", "text", "with --list: text or json")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if _, err := g.log.logger(); err != nil {
		return err
	}
	rest := fs.Args()
	switch {
	case *format != "text" && *format != "json":
		return &exitError{code: 2, err: fmt.Errorf("--format %q: want text or json", *format)}
	case *list && len(rest) > 0, !*list && (*name == "" || len(rest) < 2):
		return &exitError{code: 2, err: errors.New(adoptUsage)}
	}
	pool, err := openMigratedPool(ctx, g.databaseURL())
	if err != nil {
		return err
	}
	defer pool.Close()
	store := tenant.NewStore(pool)
	if *list {
		objs, err := store.Objects(ctx, *name)
		if err != nil {
			return err
		}
		return printObjects(os.Stdout, objs, *format == "json")
	}
	n, err := store.Adopt(ctx, *name, rest[0], rest[1:], cliActor())
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "tenant %q adopted %d %s object(s) (%d already adopted)\n", *name, n, rest[0], len(rest)-1-n)
	return nil
}

// cliActor names the person running a command that records who did it (an adoption,
// a budget, a vendor setting): "cli:" and the user's name.
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli"
}

// objectRow is one listed adopted object.
type objectRow struct {
	Tenant    string    `json:"tenant"`
	Vendor    string    `json:"vendor"`
	ID        string    `json:"id"`
	AdoptedAt time.Time `json:"adopted_at"`
	AdoptedBy string    `json:"adopted_by"`
}

// printObjects prints adopted objects as a table or a JSON list.
func printObjects(out io.Writer, objs []tenant.Object, asJSON bool) error {
	if asJSON {
		rows := make([]objectRow, 0, len(objs))
		for _, o := range objs {
			rows = append(rows, objectRow(o))
		}
		return json.NewEncoder(out).Encode(rows)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tVENDOR\tOBJECT\tADOPTED\tBY")
	for _, o := range objs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", o.Tenant, o.Vendor, o.ID, o.AdoptedAt.Format(time.RFC3339), o.AdoptedBy)
	}
	return w.Flush()
}
