package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/dbtest"
	"github.com/oncebox/oncebox/outbox"
)

// recoveryTarget is the promise of issue 28: with default settings, an op in flight on
// a serve process that is SIGKILLed settles within this long of the kill.
const recoveryTarget = 20 * time.Second

// TestSIGKILLSettlesWithin20sOnRestart: a serve worker with default settings is
// SIGKILLed after the catalog target acted and before its answer was heard, and is
// started again: the new process proves the old one gone (its liveness lock is free),
// takes the job over and hands the op to the reconciler at once, which settles it from
// the target's own record within 20 s of the kill, with one effect.
func TestSIGKILLSettlesWithin20sOnRestart(t *testing.T) {
	testSIGKILLSettles(t, false)
}

// TestSIGKILLSettlesWithin20sByAnotherServe: the same with a second serve process,
// alive all along and never restarted: it takes the dead one's job over.
func TestSIGKILLSettlesWithin20sByAnotherServe(t *testing.T) {
	testSIGKILLSettles(t, true)
}

func testSIGKILLSettles(t *testing.T, other bool) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	conn := dbtest.ConnString(t, pool)
	crm := newBlockedCRM(t)
	api, tn := crm.apiProcess(t, pool, nil)

	// Default settings: only what the test needs to run (its database and catalog).
	workerArgs := "serve --database-url " + conn + " --tools-file " + crm.toolsFile + " --roles worker,periodic"
	first, _ := startChild(t, workerArgs)
	res, err := api.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "lead-1", Tool: "crm.create_lead",
		Args: json.RawMessage(`{"name":"Ada"}`)})
	require.NoError(t, err)
	crm.waitActed(t)
	if other {
		// The other serve starts once the first holds the op's job, and stays up.
		startChild(t, workerArgs)
		time.Sleep(2 * time.Second)
	}
	killedAt := time.Now()
	crm.kill(t, first)
	if !other {
		startChild(t, workerArgs)
	}

	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = api.Outbox().Get(ctx, tn.ID, "lead-1")
		return err == nil && op.Status == outbox.StatusSucceeded
	}, recoveryTarget, 100*time.Millisecond, "not settled within %s of the SIGKILL: op %+v", recoveryTarget, op)
	t.Logf("settled %s after the SIGKILL", time.Since(killedAt).Round(10*time.Millisecond))
	require.Equal(t, 1, crm.fake.EffectCount(), "one object at the target")
	require.Len(t, crm.fake.EffectsFor(res.Op.ID), 1)
	require.Equal(t, crm.fake.EffectsFor(res.Op.ID)[0].ID, op.VendorRef, "settled from the target's own record")
}
