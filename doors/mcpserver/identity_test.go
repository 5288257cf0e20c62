package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

// reworded is payment(amount) with another description, as a re-prompted model words it.
func reworded(amount int, description string) map[string]any {
	p := payment(amount)
	p["description"] = description
	return p
}

// TestRewordedCallIsTheSameOperation: two MCP sessions naming no conversation ask for
// the same payment with two descriptions: one op, the second answer says in one
// sentence that it was already requested, when and how it stands, and that occurrence
// asks for another; the match is recorded with the field that differed. The first
// wording again is a plain replay; occurrence 2 is a second op.
func TestRewordedCallIsTheSameOperation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs1, ts := e.overHTTP(t)
	cs2 := e.connectHTTP(t, ts)

	first := structured(t, call(t, cs1, "stripe_payment_intent", reworded(2500, "Order 1042 for Ada"), nil))
	require.False(t, first.Replayed)
	res := call(t, cs2, "stripe_payment_intent", reworded(2500, "Payment for Ada's order #1042"), nil)
	require.False(t, res.IsError, text(t, res))
	got := structured(t, res)
	require.True(t, got.Replayed)
	require.Equal(t, first.ID, got.ID)
	require.NotNil(t, got.Matched)
	require.Equal(t, []string{"description"}, got.Matched.Differed)
	require.Equal(t, []string{"amount", "currency"}, got.Matched.Identity)
	msg := text(t, res)
	require.Contains(t, msg, "Not done again: the same payment (same amount and currency) was already requested at ")
	require.Contains(t, msg, "worded differently (description differed), so this call was not executed")
	require.Contains(t, msg, `call again with "occurrence": 2.`)
	require.Equal(t, 1, e.countOps(t))

	var n int
	var differed []string
	require.NoError(t, e.pool.QueryRow(context.Background(),
		"SELECT count(*) OVER (), differed FROM oncebox_identity_match WHERE op_id = $1", first.ID).Scan(&n, &differed))
	require.Equal(t, 1, n)
	require.Equal(t, []string{"description"}, differed)

	again := structured(t, call(t, e.inMemory(t), "stripe_payment_intent", reworded(2500, "Order 1042 for Ada"), nil))
	require.True(t, again.Replayed)
	require.Nil(t, again.Matched, "the first wording again is a plain replay")

	second := reworded(2500, "Ada's second order")
	second["occurrence"] = 2
	two := structured(t, call(t, cs2, "stripe_payment_intent", second, nil))
	require.False(t, two.Replayed)
	require.NotEqual(t, first.ID, two.ID)
	require.Equal(t, 2, e.countOps(t))

	other := structured(t, call(t, cs1, "stripe_payment_intent", reworded(2600, "Order 1042 for Ada"), nil))
	require.False(t, other.Replayed, "another amount is another payment")
	require.Equal(t, 3, e.countOps(t))
}

// TestIdentityInAConversation: in a named conversation a reworded call is the same
// operation too; in another conversation it is not; a tool call id names its own call
// (another payload under it is refused as before).
func TestIdentityInAConversation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cs := e.inMemory(t)
	conv := mcp.Meta{mcpserver.MetaConversationID: "conv-7"}
	first := structured(t, call(t, cs, "stripe_payment_intent", reworded(700, "Invoice 7"), conv))
	got := structured(t, call(t, e.inMemory(t), "stripe_payment_intent", reworded(700, "Paying invoice seven"), conv))
	require.Equal(t, first.ID, got.ID)
	require.NotNil(t, got.Matched)

	elsewhere := structured(t, call(t, cs, "stripe_payment_intent", reworded(700, "Invoice 7"), mcp.Meta{mcpserver.MetaConversationID: "conv-8"}))
	require.NotEqual(t, first.ID, elsewhere.ID, "another conversation")

	byCall := mcp.Meta{mcpserver.MetaConversationID: "conv-9", mcpserver.MetaToolCallID: "call_1"}
	call(t, cs, "stripe_payment_intent", reworded(700, "Invoice 7"), byCall)
	res := call(t, cs, "stripe_payment_intent", reworded(700, "Invoice seven"), byCall)
	require.True(t, res.IsError)
	require.Contains(t, text(t, res), "already made earlier with other arguments")
	require.Equal(t, 3, e.countOps(t))
}

// TestNoIdentityMeansTheWholePayload: webhook.post declares no identity fields, so
// another body is another op; a refund's reason is wording, its amount is not.
func TestNoIdentityMeansTheWholePayload(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	hook := func(name string) map[string]any {
		return map[string]any{"target": "crm", "path": "/contacts", "body": map[string]any{"name": name}}
	}
	call(t, e.inMemory(t), "webhook_post", hook("Ada"), nil)
	call(t, e.inMemory(t), "webhook_post", hook("Ada L."), nil)
	require.Equal(t, 2, e.countOps(t))

	refund := func(amount int, reason string) map[string]any {
		return map[string]any{"payment_intent": "pi_1", "amount": amount, "reason": reason}
	}
	call(t, e.inMemory(t), "stripe_refund", refund(100, "duplicate"), nil)
	m := structured(t, call(t, e.inMemory(t), "stripe_refund", refund(100, "requested_by_customer"), nil))
	require.NotNil(t, m.Matched)
	require.Equal(t, []string{"reason"}, m.Matched.Differed)
	call(t, e.inMemory(t), "stripe_refund", refund(200, "duplicate"), nil)
	require.Equal(t, 4, e.countOps(t))
}

// TestBuiltinIdentityFieldsAreSchemaProperties: every identity field of a built-in tool
// is a property of the input schema MCP offers.
func TestBuiltinIdentityFieldsAreSchemaProperties(t *testing.T) {
	t.Parallel()
	for _, bt := range mcpserver.BuiltinTools() {
		props := schemaProperties(t, bt.InputSchema)
		for _, f := range tools.Identity(bt.Name) {
			require.Contains(t, props, f, "%s: identity field %q", bt.Name, f)
		}
	}
	require.NotEmpty(t, tools.Identity(protocol.ToolPaymentIntent))
	require.Nil(t, tools.Identity(protocol.ToolWebhookPost))
}

// schemaProperties returns the names of the properties at a schema's root.
func schemaProperties(t *testing.T, schema json.RawMessage) []string {
	t.Helper()
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(schema, &s))
	var out []string
	for k := range s.Properties {
		out = append(out, k)
	}
	return out
}
