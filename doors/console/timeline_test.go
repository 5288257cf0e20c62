package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
)

// TestTimelineIsCausal: a vendor event stamped to the second, within the second the op
// was created in, comes after the creation and the attempt that made its object, not
// before; ties at one instant go by cause; a reconcile decision reads as a sentence.
func TestTimelineIsCausal(t *testing.T) {
	t.Parallel()
	created := time.Date(2026, 3, 4, 5, 6, 7, 400_000_000, time.UTC)
	answered := created.Add(200 * time.Millisecond)
	op := &outbox.Op{ID: "op-1", Tool: protocol.ToolPaymentIntent, Vendor: "stripe", CreatedAt: created}
	h := &outbox.History{
		Attempts: []outbox.Attempt{{Attempt: 1, StartedAt: created, FinishedAt: &answered, Outcome: "unknown"}},
		Events: []outbox.Event{{At: answered.Add(time.Second), Kind: "reconcile", FromStatus: "unknown", ToStatus: "succeeded",
			Actor: "reconciler", Detail: json.RawMessage(`{"decision":"succeeded","vendor":"stripe","objects":[{"id":"pi_123"}]}`)}},
	}
	evs := []vendorevents.Event{{Type: "payment_intent.succeeded", ObjectType: "payment_intent", ObjectID: "pi_123",
		OccurredAt: created.Truncate(time.Second)}}
	var what []string
	for _, e := range Timeline(op, h, evs) {
		what = append(what, e.What)
	}
	require.Equal(t, []string{
		"asked for",
		"attempt 1: sent to Stripe",
		"vendor event: payment_intent.succeeded",
		"Stripe answered attempt 1: no clear answer: it may or may not have happened",
		"the reconciler found the charge pi_123 at Stripe and settled the op as succeeded",
	}, what)
}
