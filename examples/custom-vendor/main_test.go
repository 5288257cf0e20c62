package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/client"
	"github.com/oncebox/oncebox/examples/custom-vendor/fakesms"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestOwnBinaryWithCustomVendor: the binary's server takes sms.send over the HTTP API;
// the same call, sent twice and four times at once, sends one SMS, and the tool is
// listed with its schema.
func TestOwnBinaryWithCustomVendor(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := dbtest.Schema(t)
	fake := fakesms.New()
	smsAPI := httptest.NewServer(fake)
	t.Cleanup(smsAPI.Close)
	srv, err := newServer(ctx, dbtest.ConnString(t, pool), "127.0.0.1:0", smsAPI.URL, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	addr, err := srv.Listen()
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	_, token, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	c, err := client.New(client.Config{BaseURL: "http://" + addr.String(), Token: token})
	require.NoError(t, err)
	tools, err := c.Tools(ctx)
	require.NoError(t, err)
	require.Len(t, tools, 1)
	require.Equal(t, "sms.send", tools[0].Name)

	args := json.RawMessage(`{"to":"+15550100","body":"Your code is 1234"}`)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			_, err := c.Enqueue(ctx, "otp-1", "sms.send", args, &client.Opts{Wait: 20 * time.Second})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	res, err := c.Enqueue(ctx, "otp-1", "sms.send", args, &client.Opts{Wait: 20 * time.Second})
	require.NoError(t, err)
	require.Equal(t, "succeeded", string(res.Op.Status))
	require.Equal(t, 1, fake.SentFor(res.Op.ID))
	require.Equal(t, 1, fake.Sent(), "one SMS")

	_, err = c.Enqueue(ctx, "otp-2", "sms.send", json.RawMessage(`{"to":"5550100","body":"x"}`), nil)
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, "args.to", p.Field)
}
