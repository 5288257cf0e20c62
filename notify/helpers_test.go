package notify_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
)

// newGate returns the governance gate of an Outbox on pool with tools reg and the
// approval policy given.
func newGate(t *testing.T, pool *pgxpool.Pool, reg *outbox.Registry, policy governance.ApprovalPolicy) *governance.Governance {
	t.Helper()
	g, err := governance.New(governance.Config{Pool: pool, Tools: reg, Approvals: policy})
	require.NoError(t, err)
	return g
}
