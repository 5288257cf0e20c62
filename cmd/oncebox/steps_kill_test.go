package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/dbtest"
)

// checkoutTarget is one fake service of examples/checkout, able to hold its answers
// after acting (block) so that a worker can be killed between the two.
type checkoutTarget struct {
	fake    *fakewebhook.Server
	url     string
	release chan struct{}
	acted   chan struct{}
}

func newCheckoutTarget(t *testing.T) *checkoutTarget {
	t.Helper()
	c := &checkoutTarget{fake: fakewebhook.New(fakewebhook.Config{}), acted: make(chan struct{}, 10)}
	srv := httptest.NewServer(c.fake)
	t.Cleanup(srv.Close)
	c.url = srv.URL
	c.fake.EffectHook(func(fakewebhook.Effect) { c.acted <- struct{}{} })
	return c
}

// block makes the target hold its answers after acting until unblock.
func (c *checkoutTarget) block() {
	c.release = make(chan struct{})
	c.fake.SetBlock(c.release)
}

func (c *checkoutTarget) unblock() {
	c.fake.SetBlock(nil)
	close(c.release)
}

func (c *checkoutTarget) waitActed(t *testing.T) {
	t.Helper()
	select {
	case <-c.acted:
	case <-time.After(30 * time.Second):
		t.Fatal("the serve child never reached the target")
	}
}

// TestCheckoutExampleAcrossSIGKILL runs examples/checkout/tools.yaml across real `oncebox
// serve` workers, each SIGKILLed: the first right after the parent op is accepted, the
// second after the charge acted (its answer lost), the third after the receipt was
// mailed (its answer lost), the fourth after the webhook acted (its answer lost); the
// fifth finishes. One charge, one mail, one webhook, and the parent succeeded with every
// step.
func TestCheckoutExampleAcrossSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts serve processes")
	}
	t.Parallel()
	ctx := context.Background()
	pay, mail, shop := newCheckoutTarget(t), newCheckoutTarget(t), newCheckoutTarget(t)
	b, err := os.ReadFile("../../examples/checkout/tools.yaml")
	require.NoError(t, err)
	catalog := strings.NewReplacer("http://127.0.0.1:9091", pay.url, "http://127.0.0.1:9092", mail.url,
		"http://127.0.0.1:9093", shop.url).Replace(string(b))
	require.NotEqual(t, string(b), catalog)
	toolsFile := writeTools(t, catalog)

	pool := dbtest.Schema(t)
	cfg := server.Defaults()
	cfg.DatabaseURL, cfg.Roles, cfg.ToolsFile = dbtest.ConnString(t, pool), server.Roles{API: true}, toolsFile
	api, err := server.New(ctx, cfg, nil)
	require.NoError(t, err)
	t.Cleanup(api.Close)
	tn, _, err := tenant.NewStore(pool).Create(ctx, "acme")
	require.NoError(t, err)

	workerArgs := "serve --database-url " + cfg.DatabaseURL + " --tools-file " + toolsFile + killWorkerFlags + " --roles worker,periodic"
	kill := func(w *exec.Cmd) {
		t.Helper()
		require.NoError(t, w.Process.Signal(syscall.SIGKILL))
		_, _ = w.Process.Wait()
		_, _ = pool.Exec(ctx, "DELETE FROM river_leader") // the dead process's leadership
	}

	pay.block()
	mail.block()
	shop.block()
	first, _ := startChild(t, workerArgs)
	_, err = api.Outbox().Enqueue(ctx, outbox.EnqueueParams{TenantID: tn.ID, Key: "order-1", Tool: "shop.checkout",
		Args: json.RawMessage(`{"order":"o-1","amount":1200,"customer":"cus_1","email":"ada@example.com"}`)})
	require.NoError(t, err)
	kill(first) // right after the parent op is accepted

	second, _ := startChild(t, workerArgs)
	pay.waitActed(t)
	kill(second) // the charge made, its answer not recorded
	pay.unblock()

	third, _ := startChild(t, workerArgs)
	mail.waitActed(t)
	kill(third) // the receipt mailed, its answer not recorded
	mail.unblock()

	fourth, _ := startChild(t, workerArgs)
	shop.waitActed(t)
	kill(fourth) // the webhook acted, its answer not recorded
	shop.unblock()

	startChild(t, workerArgs)
	var op *outbox.Op
	require.Eventually(t, func() bool {
		op, err = api.Outbox().Get(ctx, tn.ID, "order-1")
		return err == nil && op.Status.Settled()
	}, 120*time.Second, 200*time.Millisecond, "op: %+v", op)
	require.Equal(t, protocol.StatusSucceeded, op.Status, "error: %s", op.Error)
	time.Sleep(2 * time.Second) // a second side effect, if any, would land by now
	require.Equal(t, 1, pay.fake.EffectCount(), "one charge")
	require.Equal(t, 1, mail.fake.EffectCount(), "one mail")
	require.Equal(t, 1, shop.fake.EffectCount(), "one webhook")
	require.Len(t, op.Steps, 3)
	for _, s := range op.Steps {
		require.Equal(t, "succeeded", s.Status, s)
	}
	var receipt struct{ Charge string }
	require.NoError(t, json.Unmarshal(mail.fake.Effects()[0].Body, &receipt))
	require.Equal(t, pay.fake.Effects()[0].ID, receipt.Charge, "the receipt names the charge made before the kill")
}
