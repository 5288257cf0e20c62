package governance_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
)

// moneyTool is a tool with an amount: args {"amount": integer, "currency": "usd"}; an
// absent amount is "no amount" (like a full refund).
func moneyTool() vendorapi.Tool {
	type args struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	return vendorapi.Tool{
		Name:     "test.money",
		Vendor:   "money",
		Validate: func(json.RawMessage) error { return nil },
		Amount: func(raw json.RawMessage) (int64, string, bool) {
			var a args
			if err := json.Unmarshal(raw, &a); err != nil || a.Amount == 0 {
				return 0, "", false
			}
			return a.Amount, a.Currency, true
		},
	}
}

// echoTool is a tool without an amount.
func echoTool() vendorapi.Tool {
	return vendorapi.Tool{Name: "test.echo", Vendor: "echo", Validate: func(json.RawMessage) error { return nil }}
}

func newTenant(t *testing.T, pool *pgxpool.Pool, name string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(),
		"INSERT INTO oncebox_tenant (name) VALUES ($1) RETURNING id", name).Scan(&id))
	return id
}

func newGovernance(t *testing.T, pool *pgxpool.Pool, policy governance.ApprovalPolicy, budgets ...governance.Budget) *governance.Governance {
	t.Helper()
	reg, err := outbox.NewRegistry(moneyTool(), echoTool())
	require.NoError(t, err)
	g, err := governance.New(governance.Config{Pool: pool, Tools: reg, Approvals: policy, Budgets: budgets})
	require.NoError(t, err)
	return g
}

// call is one new op as the enqueue shows it to the gate.
type call struct {
	tenant       int64
	tool         vendorapi.Tool
	args         string
	conversation string
	token        int64
}

// admit asks g about c in a transaction of its own, committed when the op is admitted
// or held (as the enqueue's would be), and reads the rule's stored version as the
// enqueue's insert does.
func admit(t *testing.T, g *governance.Governance, pool *pgxpool.Pool, c call) (outbox.Admission, error) {
	t.Helper()
	ctx := context.Background()
	var (
		v   outbox.Admission
		err error
	)
	txErr := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var (
			version                      int64
			budgetVersion, installedVers string
		)
		if err := tx.QueryRow(ctx, `SELECT coalesce((SELECT version FROM oncebox_approval_policy WHERE tenant_id = $1 AND tool = $2), 0),
			(SELECT coalesce(max(version), 0)::text || ':' || count(*) FROM oncebox_tenant_budget WHERE tenant_id = $1),
			(SELECT coalesce(max(version), 0)::text || ':' || count(*) FROM oncebox_installation_policy)`,
			c.tenant, c.tool.Name).Scan(&version, &budgetVersion, &installedVers); err != nil {
			return err
		}
		op := &outbox.Op{TenantID: c.tenant, Tool: c.tool.Name, ConversationID: c.conversation}
		v, err = g.Admit(ctx, tx, outbox.GateOp{Op: op, Tool: c.tool, Args: json.RawMessage(c.args), TokenID: c.token,
			PolicyVersion: version, BudgetVersion: budgetVersion, InstallationVersion: installedVers})
		return err
	})
	if err != nil {
		return outbox.Admission{}, err
	}
	require.NoError(t, txErr)
	return v, nil
}

// held returns why the admission holds the op, or "" when it admits it.
func held(v outbox.Admission) string {
	if v.Hold == nil {
		return ""
	}
	return v.Hold.Why
}
