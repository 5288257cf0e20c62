package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/server"
)

const reviewUsage = "usage: oncebox review list [--tenant T] | review resolve --tenant T KEY (--succeeded REF | --failed | --resend [--new-key]) --reason R"

// runReview is `oncebox review list` (read-only) and `oncebox review resolve`: the ops
// that wait for a person (in needs_review, or awaiting approval: `oncebox approve` and
// `reject` decide those), and a person's resolution of one in needs_review.
func runReview(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("review", flag.ContinueOnError)
	tenantName := fs.String("tenant", "", "tenant name")
	succeeded := fs.String("succeeded", "", "resolve as succeeded with this vendor object id")
	failed := fs.Bool("failed", false, "resolve as failed")
	resend := fs.Bool("resend", false, "release for a resend")
	newKey := fs.Bool("new-key", false, "with --resend: use a fresh vendor key (the vendor holds a stored failure under the old one)")
	reason := fs.String("reason", "", "why (required for resolve; recorded in the op's history)")
	actor := fs.String("actor", envOr("USER", "operator"), "who decides")
	cfg, logger, err := parseServerArgsFor(fs, args, showOnly(cellSettings, vendorSettings))
	if err != nil {
		return err
	}
	if err := inTenantCell(ctx, &cfg, *tenantName); err != nil {
		return err
	}
	pos := fs.Args()
	if len(pos) == 0 {
		return &exitError{code: 2, err: errors.New(reviewUsage)}
	}
	switch pos[0] {
	case "list":
		if len(pos) != 1 {
			return &exitError{code: 2, err: errors.New(reviewUsage)}
		}
		srv, err := offline(ctx, cfg, logger, true)
		if err != nil {
			return err
		}
		defer srv.Close()
		return reviewList(ctx, srv, *tenantName, os.Stdout)
	case "resolve":
		if len(pos) != 2 || *reason == "" {
			return &exitError{code: 2, err: errors.New("usage: oncebox review resolve --tenant T KEY (--succeeded REF | --failed | --resend [--new-key]) --reason R")}
		}
		if *succeeded == "" && !*failed && !*resend {
			return &exitError{code: 2, err: errors.New("say how: --succeeded REF, --failed or --resend")}
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
		key, who := pos[1], *actor+" (cli)"
		var op *outbox.Op
		switch {
		case *succeeded != "":
			op, err = srv.Outbox().ResolveSucceeded(ctx, tid, key, *succeeded, *reason, who)
		case *failed:
			op, err = srv.Outbox().ResolveFailed(ctx, tid, key, *reason, who)
		default:
			op, err = srv.Outbox().ReleaseForResend(ctx, tid, key, *reason, who, *newKey)
		}
		if err != nil {
			return err
		}
		fmt.Printf("%s: %s\n", op.Key, op.Status)
		return nil
	}
	return &exitError{code: 2, err: fmt.Errorf("unknown review command %q (%s)", pos[0], reviewUsage)}
}

// reviewList prints the ops that wait for a person, the named tenant's or every
// tenant's, each with its tenant's name: those in needs_review (a person checks what
// happened and resolves them) and those awaiting approval (an approver approves or
// rejects them), oldest first within each.
func reviewList(ctx context.Context, srv *server.Server, tenantName string, w io.Writer) error {
	var (
		tid int64
		err error
	)
	if tenantName != "" {
		if tid, err = tenantID(ctx, srv, tenantName); err != nil {
			return err
		}
	}
	items, err := srv.Outbox().ListReview(ctx, tid)
	if err != nil {
		return err
	}
	tenants, err := srv.Tenants().List(ctx)
	if err != nil {
		return err
	}
	names := make(map[int64]string, len(tenants))
	for _, t := range tenants {
		names[t.ID] = t.Name
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tKEY\tTOOL\tWAITS FOR\tATTEMPTS\tSINCE\tWHY")
	name := func(id int64) string {
		if n, ok := names[id]; ok {
			return n
		}
		return fmt.Sprintf("(tenant %d)", id)
	}
	for _, it := range items {
		fmt.Fprintf(tw, "%s\t%s\t%s\treview\t%d\t%s\t%s\n", name(it.TenantID), it.Key, it.Tool, it.Attempts,
			it.UpdatedAt.Format(time.RFC3339), it.LastEvent)
	}
	for _, t := range tenants {
		if tid != 0 && t.ID != tid {
			continue
		}
		waiting, err := srv.Outbox().ListWaiting(ctx, t.ID, reviewMaxApprovals)
		if err != nil {
			return err
		}
		for _, wt := range waiting {
			fmt.Fprintf(tw, "%s\t%s\t%s\tapproval\t%d\t%s\t%s\n", t.Name, wt.Op.Key, wt.Op.Tool, wt.Op.Attempts,
				wt.RequestedAt.Format(time.RFC3339), wt.Why)
		}
	}
	return tw.Flush()
}

// reviewMaxApprovals is how many ops awaiting approval review list shows per tenant.
const reviewMaxApprovals = 200
