package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// TestCatalogToolAcrossSIGKILL: a real `oncebox serve` worker is killed (SIGKILL) after
// the catalog tool's target acted but before the answer was recorded; the next serve
// settles the op through the target's lookup path, and the target holds one object.
func TestCatalogToolAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	conn := dbtest.ConnString(t, pool)
	crm := newBlockedCRM(t)

	// The test process records the op (API role only: it dispatches nothing).
	api, tn := crm.apiProcess(t, pool, nil)

	workerArgs := "serve --database-url " + conn + " --tools-file " + crm.toolsFile + killWorkerFlags
	first, _ := startChild(t, workerArgs+" --roles worker")

	res, err := api.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "lead-1", Tool: "crm.create_lead",
		Args: json.RawMessage(`{"name":"Ada"}`)})
	require.NoError(t, err)
	crm.waitActed(t)
	crm.kill(t, first)

	_, _ = pool.Exec(ctx, "DELETE FROM river_leader") // the dead process's leadership
	startChild(t, workerArgs+" --roles worker,periodic")

	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = api.Outbox().Get(ctx, tn.ID, "lead-1")
		return err == nil && op.Status == protocol.StatusSucceeded
	}, 120*time.Second, 200*time.Millisecond, "op: %+v", op)
	require.Equal(t, 1, crm.fake.EffectCount(), "one object at the target")
	require.Len(t, crm.fake.EffectsFor(res.Op.ID), 1)
	require.Equal(t, crm.fake.EffectsFor(res.Op.ID)[0].ID, op.VendorRef, "settled from the target's own record")
}
