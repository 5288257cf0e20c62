package notify_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
)

// moneyTool is a tool with an amount, args {"amount": minor units, "currency": code}.
func moneyTool() vendorapi.Tool {
	type args struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	return vendorapi.Tool{
		Name:   "test.money",
		Vendor: "money",
		Validate: func(raw json.RawMessage) error {
			var a args
			if err := json.Unmarshal(raw, &a); err != nil {
				return &vendorapi.ValidationError{Field: "args", Message: "must be a JSON object"}
			}
			return nil
		},
		Amount: func(raw json.RawMessage) (int64, string, bool) {
			var a args
			if err := json.Unmarshal(raw, &a); err != nil || a.Amount == 0 {
				return 0, "", false
			}
			return a.Amount, a.Currency, true
		},
	}
}

func newTenant(t *testing.T, pool *pgxpool.Pool, name string) int64 {
	t.Helper()
	var id int64
	require.NoError(t, pool.QueryRow(context.Background(),
		"INSERT INTO oncebox_tenant (name) VALUES ($1) RETURNING id", name).Scan(&id))
	return id
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// newGate returns the governance gate of an Outbox on pool with tools reg and the
// approval policy given.
func newGate(t *testing.T, pool *pgxpool.Pool, reg *outbox.Registry, policy governance.ApprovalPolicy) *governance.Governance {
	t.Helper()
	g, err := governance.New(governance.Config{Pool: pool, Tools: reg, Approvals: policy})
	require.NoError(t, err)
	return g
}
