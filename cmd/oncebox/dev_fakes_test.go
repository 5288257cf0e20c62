package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
)

// TestDevFakesKeepTheirObjects: what dev's fakes held is saved beside the cluster and
// restored into the next run's fakes, so a report in dev still finds earlier runs'
// objects; a missing file is an empty state.
func TestDevFakesKeepTheirObjects(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "slot-0.fakes.json")
	stripe, sendgrid := fakestripe.New(fakestripe.Config{}), fakesendgrid.New(fakesendgrid.Config{})
	n, err := loadFakes(path, stripe, sendgrid)
	require.NoError(t, err)
	require.Zero(t, n)

	created := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	stripe.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_1", Amount: 2000, Currency: "usd", Created: created,
		Metadata: map[string]string{"oncebox_op": "op-1"}})
	stripe.AddRefund(fakestripe.Refund{ID: "re_1", Amount: 500, PaymentIntent: "pi_1", Created: created,
		Metadata: map[string]string{"oncebox_op": "op-2"}})
	sendgrid.AddMessage(fakesendgrid.Message{XMessageID: "msg-1", CustomArgs: map[string]string{"oncebox_op": "op-3"}, AcceptedAt: created})
	require.NoError(t, saveFakes(path, stripe, sendgrid))

	stripe2, sendgrid2 := fakestripe.New(fakestripe.Config{}), fakesendgrid.New(fakesendgrid.Config{})
	n, err = loadFakes(path, stripe2, sendgrid2)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, stripe.PaymentIntents(), stripe2.PaymentIntents())
	require.Equal(t, stripe.Refunds(), stripe2.Refunds())
	pis, refunds := stripe2.ByTag("oncebox_op", "op-2")
	require.Empty(t, pis)
	require.Len(t, refunds, 1)
	require.Len(t, sendgrid2.ByCustomArg("oncebox_op", "op-3"), 1)
}
