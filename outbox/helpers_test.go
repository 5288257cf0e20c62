package outbox_test

import (
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/vendorapi"
)

// echoTool is a minimal tool for outbox's own tests: args {"n": integer >= 0}.
func echoTool(vendor string) vendorapi.Tool {
	return vendorapi.Tool{
		Name:   "test.echo",
		Vendor: vendor,
		Validate: func(args json.RawMessage) error {
			var a struct {
				N *float64 `json:"n"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return &vendorapi.ValidationError{Field: "args", Message: "must be a JSON object"}
			}
			if a.N == nil || *a.N < 0 || *a.N != float64(int64(*a.N)) {
				return &vendorapi.ValidationError{Field: "args.n", Message: "must be an integer of at least 0"}
			}
			return nil
		},
	}
}

type env struct {
	pool *pgxpool.Pool
	ob   *outbox.Outbox
}

// newInsertOnly builds an Outbox that enqueues but works no jobs.
func newInsertOnly(t *testing.T) env {
	t.Helper()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(echoTool("echo"))
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	return env{pool: pool, ob: ob}
}

func newSchema(t *testing.T) *pgxpool.Pool { return dbtest.Schema(t) }

func dbConnString(t *testing.T, pool *pgxpool.Pool) string { return dbtest.ConnString(t, pool) }

// newGate returns the governance gate of an Outbox on pool with tools reg: the default
// approval policy and budgets given.
func newGate(t *testing.T, pool *pgxpool.Pool, reg *outbox.Registry, policy governance.ApprovalPolicy, budgets ...governance.Budget) *governance.Governance {
	t.Helper()
	g, err := governance.New(governance.Config{Pool: pool, Tools: reg, Approvals: policy, Budgets: budgets})
	require.NoError(t, err)
	return g
}
