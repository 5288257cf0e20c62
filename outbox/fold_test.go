package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/optest"
)

// TestACleanRunFoldsItsAttemptIntoAHOTUpdate: from v0.3.0 a clean run that settles its
// op writes no attempt row but sets the op's clean_finished_at (migration 037), and its
// update of the op row is HOT (migration 038: no index on a column it changes, room on
// the page): the op's current version is a heap-only tuple (pageinspect). Every binary
// that may run beside it reads the same history; reopening the op (a person's retry, by
// any binary) first writes the folded attempt as a row of its own, so nothing of it is
// lost when its fields change. Another tenant sees nothing of it.
func TestACleanRunFoldsItsAttemptIntoAHOTUpdate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake, _, v := optest.WebhookFake(t, fakewebhook.Config{}, "/_lookup")
	e := optest.NewEnv(t, outbox.Config{}, v)
	op := e.Enqueue(t, "folded", protocol.ToolWebhookPost, optest.HookArgs(1))
	e.Start(t)
	e.WaitStatus(t, op.ID, protocol.StatusSucceeded)
	require.Equal(t, 1, fake.EffectCount())

	require.Zero(t, e.Count(t, "SELECT count(*) FROM oncebox_attempt WHERE op_id = $1", op.ID), "the clean run wrote an attempt row")
	require.Equal(t, 1, e.Count(t, "SELECT count(*) FROM oncebox_op WHERE id = $1 AND clean_finished_at IS NOT NULL", op.ID))
	require.True(t, isHeapOnly(t, e.Pool, op.ID), "the clean run's update of the op row was not HOT")

	folded, err := e.Ob.History(ctx, e.Tenant, op.ID)
	require.NoError(t, err)
	require.Len(t, folded.Attempts, 1)
	want := folded.Attempts[0]
	require.Empty(t, want.Token, "a folded attempt's token was never kept")
	require.Equal(t, "succeeded", want.Outcome)
	require.Equal(t, 1, want.Attempt)
	require.NotNil(t, want.FinishedAt)
	require.False(t, want.FinishedAt.Before(want.StartedAt))

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
	got := unfolded.Attempts[0]
	require.NotEmpty(t, got.Token)
	got.Token = want.Token
	requireSameAttempt(t, want, got)
}

// isHeapOnly reports whether op id's current row version is a heap-only tuple: the
// update that wrote it was HOT. It reads the row's page with pageinspect.
func isHeapOnly(t *testing.T, pool *pgxpool.Pool, id string) bool {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pageinspect SCHEMA public")
	require.NoError(t, err)
	const heapOnlyTuple = 0x8000 // HEAP_ONLY_TUPLE in t_infomask2
	var infomask2 int
	require.NoError(t, pool.QueryRow(ctx, `SELECT p.t_infomask2 FROM oncebox_op o,
		public.heap_page_items(public.get_raw_page('oncebox_op'::regclass::text, (o.ctid::text::point)[0]::int)) p
		WHERE o.id = $1 AND p.lp = (o.ctid::text::point)[1]::int`, id).Scan(&infomask2))
	return infomask2&heapOnlyTuple != 0
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
