package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestAFoldedCleanRunReadsAsItsAttempt: from v0.3.0 a clean run that settles its op
// writes no attempt row but sets the op's clean_finished_at (migration 037); every
// binary that may run beside it reads the same history. Here the fold is written as
// v0.3.0 will (the row deleted, clean_finished_at set): the history shows the attempt
// as before; reopening the op (a person's retry, by any binary) first writes the folded
// attempt as a row of its own, so nothing of it is lost when its fields change.
func TestAFoldedCleanRunReadsAsItsAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := optest.NewEnv(t, outbox.Config{}, v)
	op := e.Enqueue(t, "folded", protocol.ToolWebhookPost, optest.HookArgs(1))
	e.Start(t)
	e.WaitStatus(t, op.ID, protocol.StatusSucceeded)
	require.Equal(t, 1, fake.EffectCount())

	before, err := e.Ob.History(ctx, e.Tenant, op.ID)
	require.NoError(t, err)
	require.Len(t, before.Attempts, 1)
	want := before.Attempts[0]

	_, err = e.Pool.Exec(ctx, `WITH a AS (DELETE FROM oncebox_attempt WHERE op_id = $1 RETURNING finished_at)
		UPDATE oncebox_op SET clean_finished_at = (SELECT finished_at FROM a) WHERE id = $1`, op.ID)
	require.NoError(t, err)
	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_attempt WHERE op_id = $1", op.ID))

	folded, err := e.Ob.History(ctx, e.Tenant, op.ID)
	require.NoError(t, err)
	require.Len(t, folded.Attempts, 1)
	got := folded.Attempts[0]
	require.Empty(t, got.Token, "a folded attempt's token was never kept")
	got.Token = want.Token
	requireSameAttempt(t, want, got)

	// Another tenant sees nothing of it.
	other, err := e.Ob.History(ctx, e.Tenant+1000, op.ID)
	require.NoError(t, err)
	require.Empty(t, other.Attempts)

	// Reopened as v0.2.0 does on a person's retry: the fold becomes a row first.
	_, err = e.Pool.Exec(ctx, "UPDATE oncebox_op SET status = 'pending', updated_at = now() WHERE id = $1", op.ID)
	require.NoError(t, err)
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM oncebox_attempt WHERE op_id = $1", op.ID))
	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_op WHERE id = $1 AND clean_finished_at IS NOT NULL", op.ID))
	unfolded, err := e.Ob.History(ctx, e.Tenant, op.ID)
	require.NoError(t, err)
	require.Len(t, unfolded.Attempts, 1)
	got = unfolded.Attempts[0]
	require.NotEmpty(t, got.Token)
	got.Token = want.Token
	requireSameAttempt(t, want, got)
}

func requireSameAttempt(t *testing.T, want, got outbox.Attempt) {
	t.Helper()
	require.True(t, want.StartedAt.Equal(got.StartedAt), "started %s, want %s", got.StartedAt, want.StartedAt)
	require.NotNil(t, got.FinishedAt)
	require.WithinDuration(t, *want.FinishedAt, *got.FinishedAt, time.Microsecond)
	want.StartedAt, got.StartedAt = time.Time{}, time.Time{}
	want.FinishedAt, got.FinishedAt = nil, nil
	require.Equal(t, want, got)
}
