package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/client"
	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/internal/opstate"
)

// nativeUpstreamServer runs a whole server in front of a fake MCP server that
// deduplicates send_mail on _meta "oncebox/idempotency_key", declared native_keys with
// the given native_window, send_mail reconciled through find_mail; it enqueues one
// send_mail whose answer the fake loses after acting.
func nativeUpstreamServer(t *testing.T, window string) (*fakemcp.Server, *pgxpool.Pool) {
	t.Helper()
	fake := fakemcp.New()
	fake.SetNativeKeys(true)
	base, token, _, pool := upstreamServerWith(t, fake, func(url string) string {
		return `
upstreams:
  mail:
    url: ` + url + `
    native_keys: true
    native_window: ` + window + `
    tools:
      send_mail: {tag_argument: ref, lookup_tool: find_mail, lookup_argument: ref}
`
	})
	fake.DropAfterActing(1)
	c, err := client.New(client.Config{BaseURL: base, Token: token})
	require.NoError(t, err)
	_, err = c.Enqueue(context.Background(), "native-1", "mail.send_mail", json.RawMessage(`{"to":"eve@example.com","subject":"Hi"}`), nil)
	require.NoError(t, err)
	return fake, pool
}

// opTrail returns the only op's vendor key, its attempts' vendor keys and outcomes, and
// its events as "from->to by actor".
func opTrail(t *testing.T, pool *pgxpool.Pool) (key string, attemptKeys, outcomes, events []string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pool.QueryRow(ctx, "SELECT vendor_key FROM oncebox_op").Scan(&key))
	rows, err := pool.Query(ctx, "SELECT vendor_key, coalesce(outcome, '') FROM "+opstate.AttemptRows+" a ORDER BY id NULLS LAST")
	require.NoError(t, err)
	for rows.Next() {
		var k, o string
		require.NoError(t, rows.Scan(&k, &o))
		attemptKeys, outcomes = append(attemptKeys, k), append(outcomes, o)
	}
	require.NoError(t, rows.Err())
	rows, err = pool.Query(ctx, "SELECT coalesce(from_status, ''), coalesce(to_status, ''), coalesce(actor, '') FROM oncebox_op_event ORDER BY id")
	require.NoError(t, err)
	for rows.Next() {
		var from, to, actor string
		require.NoError(t, rows.Scan(&from, &to, &actor))
		events = append(events, from+"->"+to+" by "+actor)
	}
	require.NoError(t, rows.Err())
	return key, attemptKeys, outcomes, events
}

// TestUpstreamNativeKeysResendInsideWindow: an upstream that declares native_keys acts,
// then its answer is lost; inside native_window the worker sends the call again with the
// same _meta idempotency key (no reconciler, no lookup), the upstream answers it from
// that key without acting, and it holds one mail.
func TestUpstreamNativeKeysResendInsideWindow(t *testing.T) {
	t.Parallel()
	fake, pool := nativeUpstreamServer(t, "24h")
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	require.Equal(t, 2, fake.Calls(), "the lost call and its resend")
	require.Equal(t, 1, fake.Replays(), "the resend was answered from its key")
	mails := fake.Mails()
	require.Len(t, mails, 1, "one side effect")
	key, attemptKeys, outcomes, events := opTrail(t, pool)
	require.Equal(t, key, mails[0].Meta[fakemcp.MetaIdempotencyKey])
	require.Equal(t, []string{key, key}, attemptKeys, "the resend carries the same key")
	require.Equal(t, []string{"unanswered", "succeeded"}, outcomes)
	for _, e := range events {
		require.NotContains(t, e, "unknown", "inside the window the resend is the lookup: %v", events)
	}
	var result string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT result::text FROM oncebox_op").Scan(&result))
	require.Contains(t, result, mails[0].ID, "the upstream's answer to the resend is the op's result")
}

// TestUpstreamNativeKeysOutsideWindowReconciled: with a native_window no longer open
// when the answer is lost (1m, less the minute oncebox keeps clear of a window's end),
// the worker does not resend: the op is unknown and the reconciler settles it through
// the lookup tool, with one call upstream.
func TestUpstreamNativeKeysOutsideWindowReconciled(t *testing.T) {
	t.Parallel()
	fake, pool := nativeUpstreamServer(t, "1m")
	waitStatus(t, pool, "mail.send_mail", "succeeded")

	require.Equal(t, 1, fake.Calls(), "no resend outside the window")
	require.Zero(t, fake.Replays())
	require.Len(t, fake.Mails(), 1)
	_, _, outcomes, events := opTrail(t, pool)
	require.Equal(t, []string{"unknown"}, outcomes)
	require.Contains(t, events, "unknown->succeeded by reconciler", "the reconciler decided: %v", events)
}
