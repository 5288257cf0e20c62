package vendorevents_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendoraccount"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestConnectEventsCountOnlyFromTheOpsAccount: events of a tenant's op made on its
// Connect account carry that account and are the op's; events from another connected
// account tagged with the same op id are stored as orphans and never read as the op's.
func TestConnectEventsCountOnlyFromTheOpsAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	wrapped, v := e.withStripe(t, &e.stEvents)
	e.stFake.AddAccount("acct_A")
	e.stFake.AddAccount("acct_B")
	e.start(t, wrapped)
	require.NoError(t, e.ob.VendorSettings().Set(ctx, vendoraccount.SetParams{TenantID: e.tenant, Vendor: "stripe", Account: "acct_A", By: "test"}))

	args := map[string]any{"amount": 1200, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}
	op := e.enqueue(t, "pi-a", protocol.ToolPaymentIntent, args)
	e.waitStatus(t, op.ID, protocol.StatusSucceeded)
	e.waitEvents(t, op.ID, 2)

	// Another account's object tagged with the op's id (a forged or misrouted event).
	raw, _ := json.Marshal(args)
	_, err := v.Dispatch(ctx, vendorapi.DispatchParams{OpID: op.ID, TenantID: e.tenant, Tool: protocol.ToolPaymentIntent,
		Args: raw, VendorKey: "other-account-key", Attempt: 1, Account: vendorapi.Account{Ref: "acct_B"}})
	require.NoError(t, err)
	e.waitEvents(t, op.ID, 4)

	evs, err := e.store.ForOp(ctx, "stripe", op.ID)
	require.NoError(t, err)
	require.Len(t, evs, 2, "only acct_A's events are the op's")
	for _, ev := range evs {
		require.Equal(t, "acct_A", ev.Account)
		require.False(t, ev.Orphan)
	}
	require.Equal(t, 2, e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE op_tag = $1 AND account = 'acct_B' AND orphan", op.ID))
}
