package outbox_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/vendorapi"
)

// noteTool is a tool whose ops are identified by "to" and "ref", with free "text" and
// "subject" it redacts, for the identity tests.
func noteTool() vendorapi.Tool {
	return vendorapi.Tool{
		Name: "test.note", Vendor: "echo", Identity: []string{"to", "ref"},
		Validate: func(json.RawMessage) error { return nil },
		Redact:   func(json.RawMessage) json.RawMessage { return json.RawMessage(`{"redacted":true}`) },
	}
}

// TestIdentityMatchIsRecordedNotRefused: under a key minted by identity, a call whose
// other arguments differ is the op already stored (a replay with Matched naming the
// fields that differed, compared on the sealed arguments of a redacting tool), and is
// recorded as a match of that op; without ByIdentity it is a key conflict, as before.
func TestIdentityMatchIsRecordedNotRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := newSchema(t)
	reg, err := outbox.NewRegistry(noteTool())
	require.NoError(t, err)
	sealKey := make([]byte, seal.KeySize)
	_, _ = rand.Read(sealKey)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, SealKey: sealKey})
	require.NoError(t, err)
	tenant := optest.Tenant(t, pool, "acme")

	first := json.RawMessage(`{"to": "ann", "ref": "o-1", "text": "Your order shipped."}`)
	reworded := json.RawMessage(`{"ref": "o-1", "to": "ann", "text": "Good news: it is on its way!", "subject": "Shipped"}`)
	a, _, err := ob.IdentityFingerprint("test.note", first)
	require.NoError(t, err)
	b, declared, err := ob.IdentityFingerprint("test.note", reworded)
	require.NoError(t, err)
	require.True(t, declared)
	require.Equal(t, a, b, "the identity fields are the same")
	other, _, err := ob.IdentityFingerprint("test.note", json.RawMessage(`{"to": "bob", "ref": "o-1", "text": "Your order shipped."}`))
	require.NoError(t, err)
	require.NotEqual(t, a, other)

	made, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k-1", Tool: "test.note", Args: first, ByIdentity: true})
	require.NoError(t, err)
	require.False(t, made.Replayed)

	_, err = ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k-1", Tool: "test.note", Args: reworded})
	var kc *outbox.KeyConflictError
	require.True(t, errors.As(err, &kc), "a caller's own key is guarded by the whole payload: %v", err)

	m, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k-1", Tool: "test.note", Args: reworded, ByIdentity: true,
		ConversationID: "conv-2"})
	require.NoError(t, err)
	require.True(t, m.Replayed)
	require.Equal(t, made.Op.ID, m.Op.ID)
	require.NotNil(t, m.Matched)
	require.Equal(t, []string{"subject", "text"}, m.Matched.Differed)

	same, err := ob.Enqueue(ctx, outbox.EnqueueParams{TenantID: tenant, Key: "k-1", Tool: "test.note", Args: first, ByIdentity: true})
	require.NoError(t, err)
	require.True(t, same.Replayed)
	require.Nil(t, same.Matched, "the very same payload is a plain replay")

	matches, err := ob.IdentityMatches(ctx, tenant, made.Op.ID)
	require.NoError(t, err)
	require.Len(t, matches, 1)
	require.Equal(t, []string{"subject", "text"}, matches[0].Differed)
	require.Equal(t, "conv-2", matches[0].ConversationID)
	require.WithinDuration(t, time.Now(), matches[0].At, time.Minute)
	require.Equal(t, 1, dbtest.Count(t, pool, "SELECT count(*) FROM oncebox_op"))

	none, err := ob.IdentityMatches(ctx, optest.Tenant(t, pool, "other"), made.Op.ID)
	require.NoError(t, err)
	require.Empty(t, none, "another tenant sees no match of the op")
}

// TestKeyByIdentity: calls of one identity share the key of the first; a payload's
// window opened before (by v0.1.0, under the payload's call) gives its key and points
// the identity's window at it; each call leaves its payload's window open under the key
// returned, for v0.1.0 processes.
func TestKeyByIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newInsertOnly(t)
	acme := optest.Tenant(t, e.pool, "acme")

	k, err := e.ob.KeyByIdentity(ctx, acme, "id-1", "payload-1", "fresh-1", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "fresh-1", k)
	k, err = e.ob.KeyByIdentity(ctx, acme, "id-1", "payload-2", "fresh-2", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "fresh-1", k, "the same identity, other words")
	old, err := e.ob.KeyInWindow(ctx, acme, "payload-2", "v010-fresh", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "fresh-1", old, "a v0.1.0 process sending payload 2 finds the key")

	legacy, err := e.ob.KeyInWindow(ctx, acme, "payload-3", "v010-key", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "v010-key", legacy)
	k, err = e.ob.KeyByIdentity(ctx, acme, "id-3", "payload-3", "fresh-3", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "v010-key", k, "the window v0.1.0 opened for the very same call wins")
	k, err = e.ob.KeyByIdentity(ctx, acme, "id-3", "payload-4", "fresh-4", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "v010-key", k, "the identity's window now holds it")

	k, err = e.ob.KeyByIdentity(ctx, acme, "id-5", "", "fresh-5", time.Hour)
	require.NoError(t, err)
	require.Equal(t, "fresh-5", k, "no payload window")
	require.Equal(t, 0, dbtest.Count(t, e.pool, "SELECT count(*) FROM oncebox_key_window WHERE call_hash = ''"))

	_, err = e.ob.KeyByIdentity(ctx, acme, "same", "same", "fresh", time.Hour)
	require.Error(t, err)
}

// TestIdentityFieldsAreChecked: a tool's identity may not name a field twice or an
// empty one.
func TestIdentityFieldsAreChecked(t *testing.T) {
	t.Parallel()
	for _, bad := range [][]string{{"to", "to"}, {""}} {
		tool := noteTool()
		tool.Identity = bad
		_, err := outbox.NewRegistry(tool)
		require.ErrorContains(t, err, `tool "test.note": Identity names`)
	}
}
