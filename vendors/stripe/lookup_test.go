package stripe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

func lookupPI(t *testing.T, v *stripe.Vendor, opID string, since time.Time) []vendorapi.VendorObject {
	t.Helper()
	res, err := v.Lookup(context.Background(), vendorapi.LookupParams{OpID: opID, Tool: protocol.ToolPaymentIntent,
		Args: json.RawMessage(`{"amount":100,"currency":"usd"}`), Since: since})
	require.NoError(t, err)
	return res.Objects
}

func TestLookupPaymentIntentByTag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	start := time.Now()
	res, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-a", "ka", piArgs(100, "pm_card_visa"))
	require.NoError(t, err)
	_, err = h.dispatch(t, protocol.ToolPaymentIntent, "op-b", "kb", piArgs(200, "pm_card_visa"))
	require.NoError(t, err)
	// Another op's object and an untagged one are not found.
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 300})

	objs := lookupPI(t, h.v, "op-a", start)
	require.Len(t, objs, 1, "search and the list scan both find it; merged by id")
	o := objs[0]
	require.Equal(t, res.VendorRef, o.ID)
	require.Equal(t, "op-a", o.OpID)
	require.EqualValues(t, 100, o.Amount)
	require.Equal(t, "usd", o.Currency)
	require.Equal(t, "succeeded", o.Status)
	require.WithinDuration(t, start, o.Created, 2*time.Second)
	require.JSONEq(t, string(res.Result), string(o.Summary), "the summary is what Dispatch stores")
	requireNoSecret(t, string(o.Summary))

	require.Empty(t, lookupPI(t, h.v, "op-none", start))
}

func TestLookupFindsDeclinedAndDuplicatePaymentIntents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-d", "kd", piArgs(100, "pm_card_chargeDeclined"))
	require.Error(t, err)
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 100, Metadata: map[string]string{vendorapi.TagKey: "op-d"}})

	objs := lookupPI(t, h.v, "op-d", time.Now().Add(-time.Minute))
	require.Len(t, objs, 2)
	statuses := []string{objs[0].Status, objs[1].Status}
	require.ElementsMatch(t, []string{"requires_payment_method", "succeeded"}, statuses)
}

func TestLookupSearchLagWithoutListScan(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{
		fake:   fakestripe.Config{SearchLag: time.Hour},
		adjust: func(c *stripe.Config) { c.DisableListScan = true; c.SearchLag = time.Hour },
	})
	require.Equal(t, time.Hour, h.v.LookupLag())
	_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-l", "kl", piArgs(100, "pm_card_visa"))
	require.NoError(t, err)
	require.Empty(t, lookupPI(t, h.v, "op-l", time.Now().Add(-time.Minute)), "search has not caught up yet")
	require.Empty(t, h.rec.getsOf("/v1/payment_intents"), "no list scan")

	h.fake.SetSearchLag(0)
	require.Len(t, lookupPI(t, h.v, "op-l", time.Now().Add(-time.Minute)), 1)
}

func TestLookupListScanFindsFreshPaymentIntentAtOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{fake: fakestripe.Config{SearchLag: time.Hour}})
	require.Equal(t, 5*time.Second, h.v.LookupLag())
	since := time.Now()
	res, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-f", "kf", piArgs(100, "pm_card_visa"))
	require.NoError(t, err)
	objs := lookupPI(t, h.v, "op-f", since)
	require.Len(t, objs, 1)
	require.Equal(t, res.VendorRef, objs[0].ID)

	gets := h.rec.getsOf("/v1/payment_intents")
	require.Len(t, gets, 1)
	require.Equal(t, []string{"100"}, gets[0].Form["limit"])
	require.NotEmpty(t, gets[0].Form["created[gte]"])
	search := h.rec.getsOf("/v1/payment_intents/search")
	require.Len(t, search, 1)
	require.Equal(t, []string{`metadata["oncebox_op"]:"op-f"`}, search[0].Form["query"])
}

func TestLookupListScanPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{fake: fakestripe.Config{SearchLag: time.Hour}})
	old := time.Now().Add(-time.Minute)
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 1, Created: old, Metadata: map[string]string{vendorapi.TagKey: "op-p"}})
	for range 150 {
		h.fake.AddPaymentIntent(fakestripe.PaymentIntent{Amount: 2})
	}
	objs := lookupPI(t, h.v, "op-p", old.Add(time.Minute)) // Since minus the 5-minute margin covers it.
	require.Len(t, objs, 1)
	require.EqualValues(t, 1, objs[0].Amount)
	require.Len(t, h.rec.getsOf("/v1/payment_intents"), 2, "two pages of 100")
}

func TestLookupSearchUnavailable(t *testing.T) {
	t.Parallel()
	// No search: the stub answers 404 to everything but lists.
	base := stubServer(t, http.StatusNotFound, func(*http.Request) string {
		return `{"error":{"type":"invalid_request_error","message":"Unrecognized request URL"}}`
	})
	v, err := stripe.New(stripe.Config{APIKey: testKey, BaseURL: base, DisableListScan: true})
	require.NoError(t, err)
	_, err = v.Lookup(context.Background(), vendorapi.LookupParams{OpID: "op", Tool: protocol.ToolPaymentIntent, Since: time.Now()})
	require.ErrorIs(t, err, vendorapi.ErrLookupUnavailable)
	require.NotContains(t, err.Error(), testKey)
}

func TestLookupRefundByTag(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_r", Amount: 1000})
	r1, err := h.dispatch(t, protocol.ToolRefund, "op-r1", "r1", map[string]any{"payment_intent": "pi_r", "amount": 100})
	require.NoError(t, err)
	_, err = h.dispatch(t, protocol.ToolRefund, "op-r2", "r2", map[string]any{"payment_intent": "pi_r", "amount": 200})
	require.NoError(t, err)

	res, err := h.v.Lookup(context.Background(), vendorapi.LookupParams{OpID: "op-r1", Tool: protocol.ToolRefund,
		Args: json.RawMessage(`{"payment_intent":"pi_r","amount":100}`), Since: time.Now()})
	require.NoError(t, err)
	require.Len(t, res.Objects, 1)
	require.Equal(t, r1.VendorRef, res.Objects[0].ID)
	require.Equal(t, "op-r1", res.Objects[0].OpID)
	require.EqualValues(t, 100, res.Objects[0].Amount)
	require.JSONEq(t, string(r1.Result), string(res.Objects[0].Summary))
	gets := h.rec.getsOf("/v1/refunds")
	require.Len(t, gets, 1)
	require.Equal(t, []string{"pi_r"}, gets[0].Form["payment_intent"])

	// By charge.
	charge := h.fake.PaymentIntents()[0].LatestCharge
	res, err = h.v.Lookup(context.Background(), vendorapi.LookupParams{OpID: "op-r2", Tool: protocol.ToolRefund,
		Args: json.RawMessage(`{"charge":"` + charge + `"}`), Since: time.Now()})
	require.NoError(t, err)
	require.Len(t, res.Objects, 1)
	require.EqualValues(t, 200, res.Objects[0].Amount)
}

func TestListObjects(t *testing.T) {
	t.Parallel()
	base := time.Now().Truncate(time.Second)
	h := newHarness(t, harnessOpts{})
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_before", Amount: 1, Created: base.Add(-time.Hour)})
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_in", Amount: 2, Created: base.Add(-30 * time.Minute),
		Metadata: map[string]string{vendorapi.TagKey: "op-in"}})
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_untagged", Amount: 3, Created: base.Add(-20 * time.Minute)})
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_at_until", Amount: 4, Created: base})
	_, err := h.dispatch(t, protocol.ToolRefund, "op-re", "r", map[string]any{"payment_intent": "pi_in"})
	require.NoError(t, err)

	objs, err := h.v.ListObjects(context.Background(), base.Add(-time.Hour+time.Second), base.Add(time.Minute))
	require.NoError(t, err)
	var ids []string
	byID := map[string]vendorapi.VendorObject{}
	for _, o := range objs {
		ids = append(ids, o.ID)
		byID[o.ID] = o
	}
	refundID := h.fake.Refunds()[0].ID
	require.ElementsMatch(t, []string{"pi_in", "pi_untagged", "pi_at_until", refundID}, ids)
	require.Equal(t, "op-in", byID["pi_in"].OpID)
	require.Equal(t, "", byID["pi_untagged"].OpID)
	require.Equal(t, "op-re", byID[refundID].OpID)
	require.Contains(t, string(byID["pi_in"].Summary), `"object":"payment_intent"`)
	require.Contains(t, string(byID[refundID].Summary), `"object":"refund"`)
	require.EqualValues(t, 2, byID[refundID].Amount)

	// [since, until): an object created at until belongs to the next window.
	objs, err = h.v.ListObjects(context.Background(), base.Add(-time.Hour+time.Second), base)
	require.NoError(t, err)
	for _, o := range objs {
		require.NotEqual(t, "pi_at_until", o.ID)
	}
	require.Len(t, objs, 2, "pi_in and pi_untagged; the refund was created at or after until")
}

func TestLookupUnknownTool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	_, err := h.v.Lookup(context.Background(), vendorapi.LookupParams{OpID: "op", Tool: "sendgrid.mail"})
	require.Error(t, err)
	require.False(t, errors.Is(err, vendorapi.ErrLookupUnavailable))
}
