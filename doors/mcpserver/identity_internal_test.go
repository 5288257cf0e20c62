package mcpserver

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/tools"
)

// TestIdentityKeysMeetV010Keys: across a rolling upgrade from v0.1.0 the very same call
// finds the same key either way: outside a conversation, the window v0.1.0 opened for
// the payload gives its key, and v0.1.0 finds the key of a window this release opened;
// in a named conversation the first call of an identity gets the key v0.1.0 mints from
// the payload.
func TestIdentityKeysMeetV010Keys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Schema(t)
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{})...)
	require.NoError(t, err)
	gov, err := governance.New(governance.Config{Pool: pool, Tools: reg})
	require.NoError(t, err)
	ob, err := outbox.New(outbox.Config{Pool: pool, Tools: reg, Gate: gov})
	require.NoError(t, err)
	tenants := tenant.NewStore(pool)
	ten, _, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	s, err := New(Config{Outbox: ob, Tenants: tenants, Wait: 50 * time.Millisecond})
	require.NoError(t, err)

	args := func(description string) json.RawMessage {
		return json.RawMessage(`{"amount": 900, "currency": "usd", "description": "` + description + `"}`)
	}
	fp := func(a json.RawMessage) outbox.Fingerprint {
		f, err := ob.Fingerprint(protocol.ToolPaymentIntent, a)
		require.NoError(t, err)
		return f
	}
	// v0.1.0's key for a call naming no conversation.
	v010 := func(a json.RawMessage) string {
		call := windowCall(fp(a), 1)
		k, err := ob.KeyInWindow(ctx, ten.ID, call, windowKey(call), DefaultDedupeWindow)
		require.NoError(t, err)
		return k
	}
	unnamed := callIdentity{Conversation: "session:x", Occurrence: 1}

	old := v010(args("one"))
	k, byIdentity, err := s.key(ctx, ten.ID, protocol.ToolPaymentIntent, args("one"), unnamed, fp(args("one")))
	require.NoError(t, err)
	require.True(t, byIdentity)
	require.Equal(t, old, k, "v0.1.0 first, then this release")

	k, _, err = s.key(ctx, ten.ID, protocol.ToolPaymentIntent, args("two"), unnamed, fp(args("two")))
	require.NoError(t, err)
	require.Equal(t, old, k, "reworded: the same identity")

	fresh := json.RawMessage(`{"amount": 901, "currency": "usd"}`)
	k, _, err = s.key(ctx, ten.ID, protocol.ToolPaymentIntent, fresh, unnamed, fp(fresh))
	require.NoError(t, err)
	require.Equal(t, k, v010(fresh), "this release first, then v0.1.0")

	named := callIdentity{Conversation: "conv-1", Named: true, Occurrence: 1}
	k, byIdentity, err = s.key(ctx, ten.ID, protocol.ToolPaymentIntent, args("one"), named, fp(args("one")))
	require.NoError(t, err)
	require.True(t, byIdentity)
	require.Equal(t, mintKey(named, fp(args("one"))), k, "the key v0.1.0 mints in a conversation")
	k, _, err = s.key(ctx, ten.ID, protocol.ToolPaymentIntent, args("two"), named, fp(args("two")))
	require.NoError(t, err)
	require.Equal(t, mintKey(named, fp(args("one"))), k, "reworded in the conversation: the same key")
}
