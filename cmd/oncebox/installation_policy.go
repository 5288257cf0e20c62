package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendors/catalog"
)

const installationPolicyUsage = "usage: oncebox policy show [--format text|json] | set TOOL --mode never|always|above [--above N | --above usd=N ...] [--approvers 2] | " +
	"clear TOOL | budget set NAME --window 24h [--count N] [--amount usd=N ...] [--tool X] ... | budget delete NAME"

// runPolicy is `oncebox policy`: the installation's approval rules and budgets, stored
// in Postgres, which every process and the CLI read. serve's flags (--approval-policy,
// --refund-approval-above, --budgets) only seed them when nothing is stored under a
// tool or budget name; a tenant's own rules and budgets (`oncebox tenant policy`,
// `oncebox tenant budget`) override them.
func runPolicy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("policy", flag.ContinueOnError)
	f := newBudgetFlags(fs)
	mode := fs.String("mode", "", "with set: never, always or above")
	above := thresholds{}
	fs.Var(above, "above", "with set --mode above: N (minor units, any currency) or currency=N; repeatable")
	approvers := fs.Int("approvers", 1, "with set: distinct approver tokens needed (2 = four eyes)")
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if _, err := f.g.log.logger(); err != nil {
		return err
	}
	rest, err := policyBudgetVerb(fs.Args())
	if err != nil {
		return err
	}
	if len(rest) == 0 || (rest[0] == "show" && len(rest) != 1) || (rest[0] != "show" && len(rest) != 2) {
		return &exitError{code: 2, err: errors.New(installationPolicyUsage)}
	}
	if *f.format != "text" && *f.format != "json" {
		return &exitError{code: 2, err: fmt.Errorf("--format %q: want text or json", *f.format)}
	}
	pool, err := openMigratedPool(ctx, f.g.databaseURL())
	if err != nil {
		return err
	}
	defer pool.Close()
	gov, err := cliGovernance(pool)
	if err != nil {
		return err
	}
	rule := governance.ApprovalRule{Mode: governance.ApprovalMode(*mode), Approvers: *approvers}
	if len(above) > 0 {
		rule.Above = above
	}
	return policyCommand(ctx, gov, rest, rule, f)
}

// policyCommand runs one `oncebox policy` command on gov.
func policyCommand(ctx context.Context, gov *governance.Governance, rest []string, rule governance.ApprovalRule, f *budgetFlags) error {
	switch rest[0] {
	case "show":
		in, err := gov.Installation(ctx)
		if err != nil {
			return err
		}
		return printInstallation(os.Stdout, in, *f.format == "json")
	case "set":
		e, err := gov.SetDefaultRule(ctx, rest[1], rule, cliActor())
		if err != nil {
			return err
		}
		warnUnknownTool(rest[1])
		fmt.Fprintf(os.Stderr, "the installation's rule of %s is stored (version %s); every process applies it to its next op\n", rest[1], e.Version)
	case "clear":
		if err := gov.ClearDefaultRule(ctx, rest[1]); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "the installation's rule of %s is removed: the catalog's or the tool's own rule applies\n", rest[1])
	case "budget set":
		b, err := f.budget(rest[1])
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		if err := gov.SetDefaultBudget(ctx, b, cliActor()); err != nil {
			return err
		}
		if b.Tool != "" {
			warnUnknownTool(b.Tool)
		}
		fmt.Fprintf(os.Stderr, "the installation's budget %q is stored; every process applies it to its next op\n", b.Name)
	case "budget delete":
		if err := gov.DeleteDefaultBudget(ctx, rest[1]); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "the installation's budget %q is deleted\n", rest[1])
	default:
		return &exitError{code: 2, err: errors.New(installationPolicyUsage)}
	}
	return nil
}

// printInstallation writes the installation's stored policy as two tables or as JSON.
func printInstallation(out io.Writer, in governance.Installation, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(out).Encode(in)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOOL\tMODE\tABOVE\tAPPROVERS\tUPDATED\tBY")
	for _, r := range in.Rules {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", r.Tool, r.Rule.Mode, thresholds(r.Rule.Above), max(1, r.Rule.Approvers),
			r.UpdatedAt.UTC().Format(time.RFC3339), r.UpdatedBy)
	}
	if len(in.Rules) == 0 {
		fmt.Fprintln(w, "(no approval rule stored)")
	}
	fmt.Fprintln(w, "\nBUDGET\tTOOL\tSCOPE\tWINDOW\tCOUNT\tAMOUNT\tON EXCEED\tUPDATED\tBY")
	for _, tb := range in.Budgets {
		b := tb.Budget
		tool, scope := b.Tool, b.Scope
		if tool == "" {
			tool = "(every)"
		}
		if scope == "" {
			scope = governance.ScopeTenant
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", b.Name, tool, scope, time.Duration(b.Window), b.Count,
			thresholds(b.Amount), b.OnExceedOrDefault(), tb.UpdatedAt.UTC().Format(time.RFC3339), tb.UpdatedBy)
	}
	if len(in.Budgets) == 0 {
		fmt.Fprintln(w, "(no budget stored)")
	}
	return w.Flush()
}

// warnUnknownTool warns on stderr when tool is neither built in nor a tool of the
// installation's catalog (ONCEBOX_TOOLS_FILE): the CLI loads no tenant's catalog and
// connects to no upstream, so it accepts any well-formed tool name, and says so, so that
// a misspelt name is seen.
func warnUnknownTool(tool string) {
	for _, t := range tools.Builtin(tools.Config{NoMailRedaction: true}) {
		if t.Name == tool {
			return
		}
	}
	if file := os.Getenv("ONCEBOX_TOOLS_FILE"); file != "" {
		if c, err := catalog.Load(file, os.Getenv); err == nil {
			if _, ok := c.Tools[tool]; ok {
				return
			}
		}
	}
	fmt.Fprintf(os.Stderr, "oncebox: warning: %s is neither a built-in tool nor one of ONCEBOX_TOOLS_FILE's; it is accepted as a tool of "+
		"a tenant's catalog or upstream, which the CLI does not load: check its spelling against the tenant's tools (MCP tools/list)\n", tool)
}

// policyBudgetVerb joins `budget set|delete` into one verb ("budget set NAME" becomes
// ["budget set", NAME]); other arguments are returned as they are.
func policyBudgetVerb(rest []string) ([]string, error) {
	if len(rest) == 0 || rest[0] != "budget" {
		return rest, nil
	}
	rest = rest[1:]
	if len(rest) != 2 || (rest[0] != "set" && rest[0] != "delete") {
		return nil, &exitError{code: 2, err: errors.New(installationPolicyUsage)}
	}
	return append([]string{"budget " + rest[0]}, rest[1:]...), nil
}

// cliGovernance is the policy and budgets as the CLI reads and writes them: the stored
// rules over the built-in tools, no flag's seed (every command but serve, dev and mcp
// ignores --approval-policy, --refund-approval-above and --budgets).
func cliGovernance(pool *pgxpool.Pool) (*governance.Governance, error) {
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{NoMailRedaction: true})...)
	if err != nil {
		return nil, err
	}
	return governance.New(governance.Config{Pool: pool, Tools: reg})
}
