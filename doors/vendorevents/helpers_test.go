package vendorevents_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/dbtest"
	"github.com/oncebox/oncebox/testkit/optest"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
	"github.com/oncebox/oncebox/vendors/stripe"
)

const stripeSecret = "whsec_test_vendorevents"

// tenantSecret is the signing secret of tenant acme's own Stripe endpoint.
const tenantSecret = "whsec_test_tenant_acme"

// tenantSecrets is acme's own Stripe signing secret (the server's reads it sealed from
// the tenant's vendor settings).
type tenantSecrets struct{ e *env }

func (s tenantSecrets) StripeEventSecret(_ context.Context, name string) (int64, string, error) {
	if name != "acme" {
		return 0, "", nil
	}
	return s.e.tenant, tenantSecret, nil
}

// outcomes counts what the Store tells its Observer.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) VendorEvent(vendor, outcome string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[vendor+"/"+outcome]++
}

func (o *outcomes) get(k string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[k]
}

// env is a schema, a Store, the event endpoints on a test server, and, once vendors
// are added, an Outbox with a Reconciler whose vendors consult the events first.
type env struct {
	pool     *pgxpool.Pool
	store    *vendorevents.Store
	obs      *outcomes
	url      string
	sgKeyB64 string
	sgFake   *fakesendgrid.Server
	stFake   *fakestripe.Server
	sgEvents fakesendgrid.EventsConfig
	stEvents fakestripe.EventsConfig
	ob       *outbox.Outbox
	tenant   int64
}

func newEnv(t testing.TB) *env {
	t.Helper()
	pool := dbtest.Schema(t)
	obs := &outcomes{n: map[string]int{}}
	store, err := vendorevents.New(vendorevents.Config{Pool: pool, Observer: obs})
	require.NoError(t, err)
	key, pub, err := fakesendgrid.NewEventKey()
	require.NoError(t, err)
	e := &env{pool: pool, store: store, obs: obs, sgKeyB64: pub}
	h, err := vendorevents.NewHandler(vendorevents.HandlerConfig{Store: store, StripeSecret: stripeSecret, SendGridPublicKey: pub,
		TenantSecrets: tenantSecrets{e},
		OnEvents: func(ctx context.Context, _ string, ids []string) error {
			if e.ob == nil {
				return nil
			}
			return e.ob.CheckSoon(ctx, ids)
		}})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	e.sgEvents = fakesendgrid.EventsConfig{Config: fakesendgrid.EventDelivery{URL: srv.URL + vendorevents.PathSendGrid}, Key: key}
	e.stEvents = fakestripe.EventsConfig{Config: fakestripe.EventDelivery{URL: srv.URL + vendorevents.PathStripe}, Secret: stripeSecret}
	e.tenant = optest.Tenant(t, pool, "acme")
	return e
}

// withSendGrid adds a fake SendGrid posting events to the endpoint (events nil: none)
// and a mail vendor whose lookups consult the events first.
func (e *env) withSendGrid(t *testing.T, events *fakesendgrid.EventsConfig) vendorapi.Vendor {
	t.Helper()
	e.sgFake = fakesendgrid.New(fakesendgrid.Config{ActivityRatePerMinute: -1})
	srv := httptest.NewServer(e.sgFake)
	t.Cleanup(srv.Close)
	if events != nil {
		require.NoError(t, e.sgFake.SetEvents(events))
		t.Cleanup(func() { _ = e.sgFake.SetEvents(nil) })
	}
	v, err := sendgrid.New(sendgrid.Config{APIKey: "SG.vendorevents-test", BaseURL: srv.URL, Timeout: 2 * time.Second,
		LookupLag: time.Second, ActivityRatePerMinute: -1})
	require.NoError(t, err)
	return vendorevents.WrapVendor(v, e.store, 30*time.Second)
}

// withStripe adds a fake Stripe whose search lags an hour, posting events, and a
// search-only Stripe vendor (no list scan) whose lookups consult the events first.
func (e *env) withStripe(t *testing.T, events *fakestripe.EventsConfig) (vendorapi.Vendor, *stripe.Vendor) {
	t.Helper()
	e.stFake = fakestripe.New(fakestripe.Config{SearchLag: time.Hour})
	srv := httptest.NewServer(e.stFake)
	t.Cleanup(srv.Close)
	if events != nil {
		require.NoError(t, e.stFake.SetEvents(events))
		t.Cleanup(func() { _ = e.stFake.SetEvents(nil) })
	}
	v, err := stripe.New(stripe.Config{APIKey: "sk_test_vendorevents", BaseURL: srv.URL, Timeout: 2 * time.Second,
		SearchLag: time.Hour, DisableListScan: true})
	require.NoError(t, err)
	return vendorevents.WrapVendor(v, e.store, 30*time.Second), v
}

// start builds the Outbox on vendors and works jobs until the test ends.
func (e *env) start(t *testing.T, vendors ...vendorapi.Vendor) {
	t.Helper()
	e.ob = optest.NewOutbox(t, e.pool, tools.Config{}, vendors...)
	optest.Start(t, e.ob)
}

func (e *env) enqueue(t *testing.T, key, tool string, args any) *outbox.Op {
	t.Helper()
	return optest.Enqueue(t, e.ob, e.tenant, key, tool, args)
}

// get reads an op by id.
func (e *env) get(t *testing.T, id string) *outbox.Op {
	t.Helper()
	return optest.ByID(t, e.pool, e.ob, e.tenant, id)
}

// waitStatus polls until the op reaches status.
func (e *env) waitStatus(t *testing.T, id string, status protocol.Status) *outbox.Op {
	t.Helper()
	return optest.WaitStatus(t, e.pool, e.ob, e.tenant, id, status)
}

// waitEvents waits until n events tagged with opID are stored.
func (e *env) waitEvents(t *testing.T, opID string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		return e.count(t, "SELECT count(*) FROM oncebox_vendor_event WHERE op_tag = $1", opID) >= n
	}, 15*time.Second, 20*time.Millisecond, "events of op %s never arrived", opID)
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	return dbtest.Count(t, e.pool, sql, args...)
}

// decisions returns the reconciler's decisions about an op, in order.
func (e *env) decisions(t *testing.T, id string) []string {
	t.Helper()
	h, err := e.ob.History(context.Background(), e.tenant, id)
	require.NoError(t, err)
	var out []string
	for _, ev := range h.Events {
		var d struct {
			Decision string `json:"decision"`
		}
		if ev.Kind == "reconcile" && json.Unmarshal(ev.Detail, &d) == nil {
			out = append(out, d.Decision)
		}
	}
	return out
}

func mailArgs() map[string]any {
	return map[string]any{"from": map[string]any{"email": "shop@example.com"},
		"to": []any{map[string]any{"email": "ada@example.com"}}, "subject": "Receipt", "text": "Thanks"}
}
