package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// TestRetentionStartsWhenTheOpIsTerminal: an op that waited past its TTL (an approval
// after a long weekend) is kept its full TTL from the moment it settles, not purged by
// the next purge run: a retry then still replays it instead of running it again.
func TestRetentionStartsWhenTheOpIsTerminal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	e, tenant := newApprovalOutbox(t, &calls, make([]byte, seal.KeySize))
	res, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "weekend", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	// The op has waited longer than its TTL.
	_, err = e.pool.Exec(ctx, "UPDATE oncebox_op SET expires_at = now() - interval '1 hour' WHERE id = $1", res.Op.ID)
	require.NoError(t, err)

	_, err = e.ob.Reject(ctx, tenant, "weekend", "alice", "no")
	require.NoError(t, err)
	st, err := e.ob.Purge(ctx, purge.Config{})
	require.NoError(t, err)
	require.Zero(t, st.Ops, "an op that just settled was purged")
	settled, err := e.ob.Get(ctx, tenant, "weekend")
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(72*time.Hour), settled.ExpiresAt, time.Minute,
		"the TTL (72h) runs from the moment the op settled, and the op shows it")

	rep, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "weekend", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.True(t, rep.Replayed)
	require.Equal(t, protocol.StatusRejected, rep.Op.Status)
}

// TestReusedKeyAfterPurgeStartsPastTheLastGeneration: the tombstone of a purged op
// remembers its last generation, and a new op under the same key starts at the next
// one, so it never derives a vendor key the purged op used.
func TestReusedKeyAfterPurgeStartsPastTheLastGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	tenant := optest.Tenant(t, e.pool, "acme")
	first, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.Equal(t, vendorapi.VendorKey(tenant, "k", "test.echo", 0), first.Op.VendorKey)
	_, err = e.pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', generation = 2, `+optest.Expired+` WHERE id = $1`, first.Op.ID)
	require.NoError(t, err)
	st, err := e.ob.Purge(ctx, purge.Config{})
	require.NoError(t, err)
	require.Equal(t, 1, st.Ops)

	again, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.True(t, again.ExpiryCollision)
	require.Equal(t, 3, again.Op.Generation)
	want := vendorapi.VendorKey(tenant, "k", "test.echo", 3)
	require.Equal(t, want, again.Op.VendorKey)
	stored, err := e.ob.Get(ctx, tenant, "k")
	require.NoError(t, err)
	require.Equal(t, 3, stored.Generation)
	require.Equal(t, want, stored.VendorKey, "the stored vendor key is the new generation's")
	for g := 0; g <= 2; g++ {
		require.NotEqual(t, vendorapi.VendorKey(tenant, "k", "test.echo", g), stored.VendorKey)
	}

	// Purged again: the tombstone keeps the later generation.
	_, err = e.pool.Exec(ctx, `UPDATE oncebox_op SET status = 'succeeded', `+optest.Expired+` WHERE id = $1`, again.Op.ID)
	require.NoError(t, err)
	_, err = e.ob.Purge(ctx, purge.Config{})
	require.NoError(t, err)
	third, err := e.ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k", Tool: "test.echo", Args: json.RawMessage(`{"n":1}`)})
	require.NoError(t, err)
	require.Equal(t, 4, third.Op.Generation)
}

// TestTTLBelowTheVendorsKeyWindowIsRefused: a tool whose ops would be purged while its
// vendor still remembers their keys is refused when the Outbox is built.
func TestTTLBelowTheVendorsKeyWindowIsRefused(t *testing.T) {
	t.Parallel()
	pool := newSchema(t)
	v, err := webhook.New(webhook.Config{Targets: map[string]webhook.Target{"crm": {BaseURL: "http://127.0.0.1:1"}}, NativeIdempotency: true})
	require.NoError(t, err)
	tool := optest.WebhookTool()
	tool.TTL = time.Hour
	reg, err := outbox.NewRegistry(tool)
	require.NoError(t, err)
	_, err = outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{v}})
	var te *outbox.TTLError
	require.True(t, errors.As(err, &te), "got %v", err)
	require.Equal(t, 24*time.Hour, te.Window)
	require.ErrorContains(t, err, `tool "webhook.post" keeps its ops 1h0m0s, less than vendor "webhook"'s idempotency key window of 24h0m0s`)

	tool.TTL = 24 * time.Hour
	reg, err = outbox.NewRegistry(tool)
	require.NoError(t, err)
	_, err = outbox.New(outbox.Config{Pool: pool, Tools: reg, Vendors: []vendorapi.Vendor{v}})
	require.NoError(t, err)
}
