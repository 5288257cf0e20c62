package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/tenant"
)

const budgetUsage = "usage: oncebox tenant budget set --tenant T NAME --window 24h [--count N] [--amount usd=5000 ...] " +
	"[--tool X] [--scope tenant|token|conversation] [--conversations N] [--on-exceed approval|refuse] | list --tenant T [--format text|json] | delete --tenant T NAME"

// budgetFlags are the flags of `oncebox tenant budget`.
type budgetFlags struct {
	g                                   *globalFlags
	tenant, window, tool, scope, exceed *string
	others, format                      *string
	count, conversations                *int64
	amount                              thresholds
}

func newBudgetFlags(fs *flag.FlagSet) *budgetFlags {
	f := &budgetFlags{g: addGlobalFlags(fs), amount: thresholds{}}
	f.tenant = fs.String("tenant", "", "the tenant's name (required)")
	f.window = fs.String("window", "", "with set: the length of the budget's fixed windows, such as 1h, 24h or 7d")
	f.count = fs.Int64("count", 0, "with set: how many ops a window admits (0: no count limit)")
	fs.Var(f.amount, "amount", "with set: currency=N (minor units) a window admits, or N for \"*\" (every currency not named); repeatable")
	f.tool = fs.String("tool", "", "with set: the one tool the budget counts, a built-in, catalog or upstream tool (default every tool)")
	f.scope = fs.String("scope", "", "with set: tenant (default), token or conversation")
	f.conversations = fs.Int64("conversations", 0, "with set and --scope conversation: each token's total across all its "+
		"conversations is capped at N times the limits (0: the default, 10)")
	f.exceed = fs.String("on-exceed", "", "with set: approval (default: the op waits for a person) or refuse (429)")
	f.others = fs.String("other-currencies", "", "with set: shared or approval (default: shared with a \"*\" amount, approval without)")
	f.format = fs.String("format", "text", "with list: text or json")
	return f
}

// budget is the Budget that set's flags describe.
func (f *budgetFlags) budget(name string) (governance.Budget, error) {
	if *f.window == "" {
		return governance.Budget{}, errors.New("--window is required: the length of the budget's windows, such as 24h")
	}
	w, err := governance.ParseWindow(*f.window)
	if err != nil {
		return governance.Budget{}, fmt.Errorf("--window: %w", err)
	}
	b := governance.Budget{Name: name, Tool: *f.tool, Scope: governance.BudgetScope(*f.scope), Window: governance.Duration(w),
		Count: *f.count, Conversations: *f.conversations, OnExceed: governance.OnExceed(*f.exceed), OtherCurrencies: governance.OtherCurrencies(*f.others)}
	if len(f.amount) > 0 {
		b.Amount = f.amount
	}
	return b, nil
}

// runTenantBudget is `oncebox tenant budget`: a tenant's own budgets, stored in
// Postgres, which replace the installation's stored budget (`oncebox policy budget`,
// seeded by serve's --budgets) of the same name and add to the others. --tool may name
// any tool the tenant can call, a catalog's or an upstream's included. Every serve process applies a change to its next op.
func runTenantBudget(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("tenant budget", flag.ContinueOnError)
	f := newBudgetFlags(fs)
	if err := parseArgs(fs, args); err != nil {
		return err
	}
	if _, err := f.g.log.logger(); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) == 0 || (rest[0] == "list" && len(rest) != 1) || (rest[0] != "list" && len(rest) != 2) {
		return &exitError{code: 2, err: errors.New(budgetUsage)}
	}
	if *f.tenant == "" {
		return &exitError{code: 2, err: errors.New("--tenant is required: the name of the tenant whose budgets these are")}
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
	t, err := tenant.NewStore(pool).ByName(ctx, *f.tenant)
	if err != nil {
		return err
	}
	switch rest[0] {
	case "set":
		b, err := f.budget(rest[1])
		if err != nil {
			return &exitError{code: 2, err: err}
		}
		if err := gov.SetTenantBudget(ctx, t.ID, b, cliActor()); err != nil {
			return err
		}
		if b.Tool != "" {
			warnUnknownTool(b.Tool)
		}
		fmt.Fprintf(os.Stderr, "tenant %q: budget %q set; every process applies it to its next op\n", t.Name, b.Name)
		return nil
	case "delete":
		if err := gov.DeleteTenantBudget(ctx, t.ID, rest[1]); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "tenant %q: budget %q deleted\n", t.Name, rest[1])
		return nil
	case "list":
		usage, err := gov.BudgetUsage(ctx, t.ID)
		if err != nil {
			return err
		}
		return printBudgetUsage(os.Stdout, usage, *f.format == "json")
	}
	return &exitError{code: 2, err: errors.New(budgetUsage)}
}

// budgetRow is one line of `oncebox tenant budget list`.
type budgetRow struct {
	Budget    string    `json:"budget"`
	Source    string    `json:"source"`
	Tool      string    `json:"tool"`
	Scope     string    `json:"scope"`
	Window    string    `json:"window"`
	Currency  string    `json:"currency"`
	Used      int64     `json:"used"`
	Limit     int64     `json:"limit"`
	Left      int64     `json:"left"`
	OnExceed  string    `json:"on_exceed"`
	WindowEnd time.Time `json:"window_end"`
}

// printBudgetUsage writes the budgets' usage as a table or a JSON list.
func printBudgetUsage(out io.Writer, usage []governance.BudgetUsage, asJSON bool) error {
	rows := make([]budgetRow, 0, len(usage))
	for _, u := range usage {
		rows = append(rows, budgetRow{Budget: u.Budget.Name, Source: string(u.Source), Tool: u.Budget.Tool, Scope: u.Scope,
			Window: governance.FormatWindow(time.Duration(u.Budget.Window)), Currency: u.Currency, Used: u.Used, Limit: u.Limit, Left: u.Left,
			OnExceed: string(u.Budget.OnExceedOrDefault()), WindowEnd: u.WindowEnd.UTC()})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Budget < rows[j].Budget })
	if asJSON {
		return json.NewEncoder(out).Encode(rows)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BUDGET\tSOURCE\tTOOL\tSCOPE\tWINDOW\tLIMIT OF\tUSED\tLIMIT\tLEFT\tON EXCEED")
	for _, r := range rows {
		what := "ops"
		if r.Currency != "" {
			what = r.Currency
		}
		tool := r.Tool
		if tool == "" {
			tool = "(every)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Budget, r.Source, tool, r.Scope, r.Window, what,
			money.Limit(r.Used, r.Currency), money.Limit(r.Limit, r.Currency), money.Limit(r.Left, r.Currency), r.OnExceed)
	}
	return w.Flush()
}
