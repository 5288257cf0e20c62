package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// TestTenantBudgetCLI runs `oncebox tenant budget` as a child process: a budget is set,
// listed with its source and what its window used, changed, and deleted; an Outbox
// running all along (no --budgets) applies each change to its next op, without a
// restart. Bad input is refused with a sentence and a non-zero exit.
func TestTenantBudgetCLI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	acme, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "ONCEBOX_BUDGETS="}
	run := func(args string) (string, string, int) { return runCLI(t, args, env...) }

	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{NoMailRedaction: true})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	n := 0
	pay := func() error {
		n++
		_, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: acme.ID, Key: fmt.Sprintf("pay-%d", n), Tool: "stripe.payment_intent",
			Args: json.RawMessage(`{"amount": 1000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}`)})
		return err
	}
	require.NoError(t, pay(), "no budget yet")

	out, stderr, code := run("tenant budget set --tenant acme pay --window 24h --count 2 --amount usd=5000 --tool stripe.payment_intent --on-exceed refuse")
	require.Zero(t, code, out+stderr)
	require.NoError(t, pay())
	require.NoError(t, pay())
	require.ErrorIs(t, pay(), governance.ErrBudgetExceeded, "the CLI's budget of 2 applies to the running Outbox")

	type row struct {
		Budget, Source, Tool, Window, Currency string
		OnExceed                               string `json:"on_exceed"`
		Used, Limit, Left                      int64
	}
	list := func() map[string]row {
		out, stderr, code := run("tenant budget list --tenant acme --format json")
		require.Zero(t, code, stderr)
		var rows []row
		require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
		m := map[string]row{}
		for _, r := range rows {
			m[r.Budget+"/"+r.Currency] = r
		}
		return m
	}
	got := list()
	require.Equal(t, row{Budget: "pay", Source: "tenant", Tool: "stripe.payment_intent", Window: "24h", OnExceed: "refuse",
		Used: 2, Limit: 2, Left: 0}, got["pay/"])
	require.Equal(t, int64(2000), got["pay/usd"].Used)
	require.Equal(t, int64(3000), got["pay/usd"].Left)

	out, stderr, code = run("tenant budget set --tenant acme pay --window 24h --count 3 --tool stripe.payment_intent --on-exceed refuse")
	require.Zero(t, code, out+stderr)
	require.NoError(t, pay(), "raised to 3: the next op runs")
	require.Equal(t, int64(3), list()["pay/"].Used)

	out, stderr, code = run("tenant budget set --tenant acme convs --window 1h --count 1 --scope conversation --conversations 2")
	require.Zero(t, code, out+stderr)

	out, _, code = run("tenant budget list --tenant acme")
	require.Zero(t, code)
	require.Contains(t, out, "LEFT")
	require.Contains(t, out, "pay")

	for args, want := range map[string]string{
		"tenant budget set --tenant acme pay --count 3":                               "--window is required",
		"tenant budget set --tenant acme pay --window soon --count 3":                 "--window: \"soon\" is not a window such as 1h, 24h or 7d",
		"tenant budget set --tenant acme pay --window 1h":                             "set count, amount, or both",
		"tenant budget set --tenant acme pay --window 1h --count 1 --scope all":       "want tenant, token or conversation",
		"tenant budget set --tenant acme pay --window 1h --count 1 --tool No/pe":      "is not a tool name",
		"tenant budget set pay --window 1h --count 1":                                 "--tenant is required",
		"tenant budget delete --tenant acme nope":                                     "no budget of its own named \"nope\"",
		"tenant budget list --tenant nobody":                                          "nobody",
		"tenant budget set --tenant acme pay --window 1h --count 1 --conversations 3": "it needs scope conversation",
	} {
		_, stderr, code := run(args)
		require.NotZero(t, code, args)
		require.Contains(t, stderr, want, args)
	}

	out, stderr, code = run("tenant budget delete --tenant acme pay")
	require.Zero(t, code, out+stderr)
	require.Empty(t, list())
	for range 3 {
		require.NoError(t, pay(), "deleted: nothing bounds acme")
	}

	_, stderr, _ = run("tenant budget set --help")
	require.Contains(t, stderr, "-on-exceed")
	require.Contains(t, stderr, "-database-url")
	require.NotContains(t, stderr, "-stripe-api-key", "--help shows the budget's own flags")
}

// TestTenantBudgetListAsMoney: `tenant budget list` writes amounts as money ("$50.00
// USD"), a "*" limit in words, and windows as people write them; --window takes days.
func TestTenantBudgetListAsMoney(t *testing.T) {
	t.Parallel()
	pool := dbtest.Schema(t)
	_, _, err := tenant.NewStore(pool).Create(context.Background(), "acme")
	require.NoError(t, err)
	env := []string{"DATABASE_URL=" + dbtest.ConnString(t, pool), "ONCEBOX_BUDGETS="}
	run := func(args string) (string, string, int) { return runCLI(t, args, env...) }
	// Money as money and windows as people write them: 1d is accepted, 7d shown as such.
	out, stderr, code := run("tenant budget set --tenant acme week --window 7d --amount usd=5000 --amount 300")
	require.Zero(t, code, out+stderr)
	out, stderr, code = run("tenant budget set --tenant acme day --window 1d --count 5")
	require.Zero(t, code, out+stderr)
	out, _, code = run("tenant budget list --tenant acme")
	require.Zero(t, code)
	require.Regexp(t, `week\s+tenant\s+\(every\)\s+tenant\s+7d\s+usd\s+\$0\.00 USD\s+\$50\.00 USD\s+\$50\.00 USD\s+approval`, out)
	require.Contains(t, out, "300 minor units of any other currency")
	require.Regexp(t, `day\s+tenant\s+\(every\)\s+tenant\s+24h\s+ops\s+0\s+5\s+5`, out)
	require.NotContains(t, out, "0m0s")
}
