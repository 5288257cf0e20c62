package opstate

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
)

// TestFirstStatusComesFromTheTable: an op's first status is one of the table's initial
// rows, and Hold, the one write that gives a new op a first status other than the
// insert's pending, checks it and records its event and metric like any transition.
func TestFirstStatusComesFromTheTable(t *testing.T) {
	t.Parallel()
	var firsts []protocol.Status
	for _, tr := range InitialTransitions() {
		require.Empty(t, tr.From, "an initial row comes from no status")
		require.Equal(t, Gate, tr.By)
		require.True(t, Allowed("", tr.To, Gate, ""))
		firsts = append(firsts, tr.To)
	}
	require.Equal(t, Initial(), firsts)
	require.False(t, Allowed("", protocol.StatusSucceeded, Gate, ""), "no op is created settled")
	require.False(t, Allowed("", protocol.StatusAwaitingApproval, Worker, ""), "only the gate gives a first status")

	e := newWalkEnv(t)
	ctx := context.Background()
	id, _ := e.seedOp(t, protocol.StatusPending)
	before := e.read(t, id).events
	a := e.inTx(t, func(tx pgx.Tx) (*Applied, error) { return e.m.Hold(ctx, tx, id, map[string]string{"why": "test"}) })
	require.NotNil(t, a)
	r := e.read(t, id)
	require.Equal(t, protocol.StatusAwaitingApproval, r.status)
	require.Equal(t, before+1, r.events, "the hold records its event")
	require.Equal(t, string(Gate), r.lastActor)
	require.Contains(t, e.seen, "fake ->awaiting_approval", "the hold is counted")

	// An op no longer pending is not held again.
	a = e.inTx(t, func(tx pgx.Tx) (*Applied, error) { return e.m.Hold(ctx, tx, id, nil) })
	require.Nil(t, a)
}
