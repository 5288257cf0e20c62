package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/tenant"
)

const policyUsage = "usage: oncebox tenant policy list NAME | set NAME TOOL --mode never|always|above [--above N | --above usd=N ...] [--approvers 2] | clear NAME TOOL"

// thresholds is the repeatable --above flag: N (any currency) or currency=N.
type thresholds map[string]int64

// String implements flag.Value.
func (t thresholds) String() string {
	parts := make([]string, 0, len(t))
	for k, v := range t {
		parts = append(parts, k+"="+strconv.FormatInt(v, 10))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// Set implements flag.Value.
func (t thresholds) Set(v string) error {
	cur, amount, ok := strings.Cut(v, "=")
	if !ok {
		cur, amount = governance.AnyCurrency, v
	}
	n, err := strconv.ParseInt(amount, 10, 64)
	if err != nil {
		return fmt.Errorf("want N or currency=N (minor units), got %q", v)
	}
	t[strings.ToLower(cur)] = n
	return nil
}

// runTenantPolicy is `oncebox tenant policy`: a tenant's own approval rules, which
// override the installation's stored ones (`oncebox policy`, seeded by serve's
// --approval-policy and --refund-approval-above) tool by tool. Changing a rule gives it a new version: ops waiting under the old one can then
// be rejected or left to expire, not approved.
func runTenantPolicy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenant policy", flag.ContinueOnError)
	mode := fs.String("mode", "", "never, always or above")
	above := thresholds{}
	fs.Var(above, "above", "with --mode above: N (minor units, any currency) or currency=N; repeatable")
	approvers := fs.Int("approvers", 1, "distinct approver tokens needed (2 = four eyes)")
	format := fs.String("format", "text", "text or json")
	cfg, _, err := parseConfigFor(fs, args, showOnly())
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	rest := fs.Args()
	if len(rest) < 2 || (rest[0] == "list" && len(rest) != 2) || (rest[0] != "list" && len(rest) != 3) {
		return &exitError{code: 2, err: errors.New(policyUsage)}
	}
	pool, err := openMigratedPool(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	gov, err := cliGovernance(pool)
	if err != nil {
		return err
	}
	t, err := tenant.NewStore(pool).ByName(ctx, rest[1])
	if err != nil {
		return err
	}
	switch rest[0] {
	case "set":
		rule := governance.ApprovalRule{Mode: governance.ApprovalMode(*mode), Approvers: *approvers}
		if len(above) > 0 {
			rule.Above = above
		}
		e, err := gov.SetTenantRule(ctx, t.ID, rest[2], rule)
		if err != nil {
			return err
		}
		warnUnknownTool(rest[2])
		fmt.Fprintf(os.Stderr, "tenant %q: %s now follows its own rule (version %s)\n", t.Name, rest[2], e.Version)
		return nil
	case "clear":
		if err := gov.ClearTenantRule(ctx, t.ID, rest[2]); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "tenant %q: %s follows the default again\n", t.Name, rest[2])
		return nil
	case "list":
		rules, err := gov.EffectivePolicy(ctx, t.ID)
		if err != nil {
			return err
		}
		if *format == "json" {
			return json.NewEncoder(os.Stdout).Encode(rules)
		}
		w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TOOL\tMODE\tABOVE\tAPPROVERS\tSOURCE\tVERSION")
		for _, r := range rules {
			approvers := r.Rule.Approvers
			if approvers == 0 {
				approvers = 1
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\n", r.Tool, r.Rule.Mode, thresholds(r.Rule.Above), approvers, r.Source, r.Version)
		}
		return w.Flush()
	}
	return &exitError{code: 2, err: errors.New(policyUsage)}
}
