package vendorevents_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendors/sendgrid"
	"github.com/oncebox/oncebox/vendors/stripe"
)

func TestReportShowsDeliveryAndFailedRefunds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sgEvents := e.sgEvents
	sgEvents.Final = "bounce"
	mail := e.withSendGrid(t, &sgEvents)
	wrapped, _ := e.withStripe(t, &e.stEvents)
	e.start(t, mail, wrapped)
	since := time.Now().Add(-time.Minute)

	m := e.enqueue(t, "mail-bounces", protocol.ToolMail, mailArgs())
	pi := e.enqueue(t, "pi-1", protocol.ToolPaymentIntent, map[string]any{"amount": 900, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true})
	e.waitStatus(t, pi.ID, protocol.StatusSucceeded)
	re := e.enqueue(t, "refund-1", protocol.ToolRefund, map[string]any{"payment_intent": e.get(t, pi.ID).VendorRef, "amount": 400})
	refund := e.waitStatus(t, re.ID, protocol.StatusSucceeded)
	e.waitStatus(t, m.ID, protocol.StatusSucceeded)
	e.waitEvents(t, m.ID, 2)
	e.waitEvents(t, re.ID, 1)
	require.NoError(t, e.stFake.FailRefund(refund.VendorRef)) // the bank sends the money back
	e.waitEvents(t, re.ID, 2)

	sgSrv := httptest.NewServer(e.sgFake)
	t.Cleanup(sgSrv.Close)
	sgLister, err := sendgrid.New(sendgrid.Config{APIKey: "SG.report", BaseURL: sgSrv.URL, ActivityRatePerMinute: -1})
	require.NoError(t, err)
	stSrv := httptest.NewServer(e.stFake)
	t.Cleanup(stSrv.Close)
	stLister, err := stripe.New(stripe.Config{APIKey: "sk_test_report", BaseURL: stSrv.URL})
	require.NoError(t, err)
	rep, err := finance.BuildReport(context.Background(), e.pool, finance.ReportParams{
		Since: since, Until: time.Now().Add(time.Second), Events: e.store,
		Listers: map[string]finance.Lister{"stripe": stLister, "sendgrid": finance.ListerFunc(sgLister.ListMessages)}})
	require.NoError(t, err)
	byOp := map[string]finance.Line{}
	for _, l := range rep.Lines {
		byOp[l.OpID] = l
	}
	require.Equal(t, finance.CategoryMatched, byOp[m.ID].Category)
	require.Equal(t, "bounced", byOp[m.ID].Delivery)
	require.Equal(t, finance.CategoryMatched, byOp[pi.ID].Category)
	require.Equal(t, finance.CategoryRefundFailed, byOp[re.ID].Category)
	require.Contains(t, byOp[re.ID].Detail, refund.VendorRef)
	require.Equal(t, 1, rep.Problems)
	require.False(t, rep.Clean())
}
