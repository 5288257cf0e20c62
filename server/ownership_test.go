package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	stripego "github.com/stripe/stripe-go/v79"
	stripeclient "github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/testkit/optest"
)

// ownedStripe is a server over the fake Stripe with two tenants, acme and globex.
type ownedStripe struct {
	base         string
	acme, globex string
	pool         *pgxpool.Pool
	fake         *fakestripe.Server
	// down makes the fake Stripe answer every read with a 500, as an outage would.
	down *atomic.Bool
	// sdk is a stripe-go client of the fake, for what is made outside oncebox.
	sdk *stripeclient.API
}

func newOwnedStripe(t *testing.T, roles server.Roles) *ownedStripe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	o := &ownedStripe{fake: fakestripe.New(fakestripe.Config{}), down: &atomic.Bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.down.Load() && r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"type":"api_error","message":"outage"}}`)
			return
		}
		o.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.Roles = roles
	cfg.StripeAPIKey, cfg.StripeAPIBase = "sk_test_owned", srv.URL
	_, o.base = runServer(t, ctx, cfg)
	o.pool = pool
	tenants := tenant.NewStore(pool)
	var err error
	_, o.acme, err = tenants.Create(ctx, "acme")
	require.NoError(t, err)
	_, o.globex, err = tenants.Create(ctx, "globex")
	require.NoError(t, err)
	b := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{URL: stripego.String(srv.URL),
		LeveledLogger: &stripego.LeveledLogger{Level: stripego.LevelNull}})
	o.sdk = stripeclient.New("sk_test_owned", &stripego.Backends{API: b, Connect: b, Uploads: b})
	return o
}

// call sends one API request and returns its status, headers and JSON body.
func (o *ownedStripe) call(t *testing.T, method, path, token, key, body string) (int, http.Header, map[string]any) {
	t.Helper()
	return apiCall(t, context.Background(), o.base+path, method, token, key, body)
}

// refund asks for a full refund of the object named by arg ("payment_intent" or
// "charge").
func (o *ownedStripe) refund(t *testing.T, token, key, arg, id string) (int, http.Header, map[string]any) {
	t.Helper()
	return o.call(t, http.MethodPost, "/v1/ops", token, key, `{"tool": "stripe.refund", "args": {"`+arg+`": "`+id+`"}}`)
}

// ops counts the ops stored for a tenant.
func (o *ownedStripe) ops(t *testing.T, tenantName string) int {
	t.Helper()
	var n int
	require.NoError(t, o.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM oncebox_op o JOIN oncebox_tenant t ON t.id = o.tenant_id WHERE t.name = $1`, tenantName).Scan(&n))
	return n
}

// requireNotOwned checks a refusal: 404 not-found naming the field and the object.
func requireNotOwned(t *testing.T, status int, out map[string]any, field, id string) {
	t.Helper()
	require.Equal(t, http.StatusNotFound, status, out)
	require.Equal(t, "https://oncebox.dev/problems/not-found", out["type"], out)
	require.Equal(t, "args."+field, out["field"], out)
	require.Contains(t, out["detail"], field+" "+id+" is not one of this tenant's objects", out)
}

// TestRefundOfAnotherTenantsPaymentIsRefused: globex's payment, named by acme's agent
// (a pasted id is all a prompt injection needs), is refused before anything is sent,
// by payment_intent and by charge, over HTTP and over MCP: 404 not-found naming the
// field, no op stored for acme, no refund at Stripe. globex refunds its own payment
// once, and a replay of that refund returns the stored op.
func TestRefundOfAnotherTenantsPaymentIsRefused(t *testing.T) {
	t.Parallel()
	o := newOwnedStripe(t, server.Roles{API: true, Worker: true, Periodic: true})
	status, _, pay := o.call(t, http.MethodPost, "/v1/ops?wait=20s", o.globex, "pay-1",
		`{"tool": "stripe.payment_intent", "args": {"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`)
	require.Equal(t, http.StatusAccepted, status, pay)
	require.Equal(t, "succeeded", pay["status"], pay)
	pi := pay["vendor_ref"].(string)
	charge := o.fake.PaymentIntents()[0].LatestCharge
	require.NotEmpty(t, charge)

	status, _, out := o.refund(t, o.acme, "steal-1", "payment_intent", pi)
	requireNotOwned(t, status, out, "payment_intent", pi)
	status, _, out = o.refund(t, o.acme, "steal-2", "charge", charge)
	requireNotOwned(t, status, out, "charge", charge)
	status, _, out = o.call(t, http.MethodGet, "/v1/ops/steal-1", o.acme, "", "")
	require.Equal(t, http.StatusNotFound, status, "the refused call left no op: %v", out)

	ctx := context.Background()
	transport := &mcp.StreamableClientTransport{Endpoint: o.base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: o.acme}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, transport, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stripe_refund", Arguments: map[string]any{"payment_intent": pi}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "payment_intent "+pi+" is not one of this tenant's objects")
	require.Zero(t, o.ops(t, "acme"), "no refused call left an op")

	status, _, own := o.refund(t, o.globex, "refund-1", "payment_intent", pi)
	require.Equal(t, http.StatusAccepted, status, own)
	require.Eventually(t, func() bool { return len(o.fake.Refunds()) == 1 }, 20*time.Second, 50*time.Millisecond)
	status, hdr, again := o.refund(t, o.globex, "refund-1", "payment_intent", pi)
	require.Equal(t, http.StatusOK, status, again)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	require.Equal(t, own["id"], again["id"])
	time.Sleep(200 * time.Millisecond)
	refunds := o.fake.Refunds()
	require.Len(t, refunds, 1, "only globex's own refund reached Stripe")
	require.Equal(t, pi, refunds[0].PaymentIntent)
}

// TestAdoptedAndTaggedPaymentsMayBeRefunded: a payment made outside oncebox may be
// refunded by the tenant that adopted it, and only by it; a payment tagged with one of
// acme's ops still unknown after a crash (no vendor reference) is acme's, not globex's;
// a replay is not checked again, even while Stripe cannot be asked; a payment Stripe
// cannot be asked about is refused with 503 and Retry-After, recording nothing.
func TestAdoptedAndTaggedPaymentsMayBeRefunded(t *testing.T) {
	t.Parallel()
	o := newOwnedStripe(t, server.Roles{API: true}) // no worker: ops stay as recorded
	ctx := context.Background()
	outside, err := o.sdk.PaymentIntents.New(&stripego.PaymentIntentParams{Amount: stripego.Int64(1500),
		Currency: stripego.String("usd"), PaymentMethod: stripego.String("pm_card_visa"), Confirm: stripego.Bool(true)})
	require.NoError(t, err)
	status, _, out := o.refund(t, o.acme, "adopted-1", "payment_intent", outside.ID)
	requireNotOwned(t, status, out, "payment_intent", outside.ID)
	n, err := tenant.NewStore(o.pool).Adopt(ctx, "acme", "stripe", []string{outside.ID}, "test")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	status, _, out = o.refund(t, o.acme, "adopted-1", "payment_intent", outside.ID)
	require.Equal(t, http.StatusAccepted, status, out)
	status, _, out = o.refund(t, o.globex, "adopted-2", "payment_intent", outside.ID)
	requireNotOwned(t, status, out, "payment_intent", outside.ID)

	// acme's payment op, sent by a worker that died before it recorded the answer.
	status, _, pay := o.call(t, http.MethodPost, "/v1/ops", o.acme, "pay-lost",
		`{"tool": "stripe.payment_intent", "args": {"amount": 900, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`)
	require.Equal(t, http.StatusAccepted, status, pay)
	tagged, err := o.sdk.PaymentIntents.New(&stripego.PaymentIntentParams{Amount: stripego.Int64(900),
		Currency: stripego.String("usd"), PaymentMethod: stripego.String("pm_card_visa"), Confirm: stripego.Bool(true),
		Params: stripego.Params{Metadata: map[string]string{"oncebox_op": pay["id"].(string)}}})
	require.NoError(t, err)
	_, err = o.pool.Exec(ctx, `UPDATE oncebox_op SET status = 'unknown' WHERE id = $1`, pay["id"])
	require.NoError(t, err)
	status, _, out = o.refund(t, o.globex, "tagged-1", "payment_intent", tagged.ID)
	requireNotOwned(t, status, out, "payment_intent", tagged.ID)
	status, _, out = o.refund(t, o.globex, "tagged-2", "charge", tagged.LatestCharge.ID)
	requireNotOwned(t, status, out, "charge", tagged.LatestCharge.ID)
	status, _, out = o.refund(t, o.acme, "tagged-1", "payment_intent", tagged.ID)
	require.Equal(t, http.StatusAccepted, status, out)
	status, _, out = o.refund(t, o.acme, "tagged-2", "charge", tagged.LatestCharge.ID)
	require.Equal(t, http.StatusAccepted, status, out)

	o.down.Store(true)
	status, _, out = o.refund(t, o.acme, "tagged-1", "payment_intent", tagged.ID)
	require.Equal(t, http.StatusOK, status, "a replay returns the stored op, unchecked: %v", out)
	status, hdr, out := o.refund(t, o.acme, "down-1", "payment_intent", outside.ID+"x")
	require.Equal(t, http.StatusServiceUnavailable, status, out)
	require.Equal(t, "https://oncebox.dev/problems/vendor-unavailable", out["type"], out)
	require.Equal(t, "args.payment_intent", out["field"], out)
	require.NotEmpty(t, hdr.Get("Retry-After"))
	require.Equal(t, 4, o.ops(t, "acme"), "acme holds its payment and three refunds, nothing of the refused calls")
	require.Zero(t, o.ops(t, "globex"))
	require.Empty(t, o.fake.Refunds(), "no worker ran: nothing was sent")
}

// ownedCatalog is catalogFile with a tool whose path names a ticket that must be the
// tenant's.
func ownedCatalog(baseURL string) string {
	return catalogFile(baseURL) + `
  helpdesk.close_ticket:
    description: Close a ticket.
    class: write
    target: helpdesk
    path: /tickets/{ticket_id}/close
    owned: [ticket_id]
    input_schema:
      type: object
      properties: {ticket_id: {type: string}}
      required: [ticket_id]
`
}

// TestCatalogToolActsOnlyOnTheTenantsObjects: a catalog tool whose path names an owned
// object closes a ticket made by the tenant's own op, and refuses globex's call naming
// it with 404 not-found, over HTTP and MCP: the target receives no call.
func TestCatalogToolActsOnlyOnTheTenantsObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, ownedCatalog(target.URL))
	_, base := runServer(t, ctx, cfg)
	tenants := tenant.NewStore(pool)
	_, acme, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	_, globex, err := tenants.Create(ctx, "globex")
	require.NoError(t, err)

	status, body := postJSON(t, base, acme, "/v1/ops?wait=20s", "ticket-1",
		`{"tool": "helpdesk.create_ticket", "args": {"customer_id": "c1", "subject": "help"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	var made map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &made))
	require.Equal(t, "succeeded", made["status"], body)
	ticket := made["vendor_ref"].(string)
	require.Equal(t, 1, fake.Requests())

	status, body = postJSON(t, base, globex, "/v1/ops", "close-1", fmt.Sprintf(`{"tool": "helpdesk.close_ticket", "args": {"ticket_id": %q}}`, ticket))
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &out))
	requireNotOwned(t, status, out, "ticket_id", ticket)
	transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: globex}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, transport, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "helpdesk_close_ticket", Arguments: map[string]any{"ticket_id": ticket}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "ticket_id "+ticket+" is not one of this tenant's objects")

	status, body = postJSON(t, base, acme, "/v1/ops?wait=20s", "close-1", fmt.Sprintf(`{"tool": "helpdesk.close_ticket", "args": {"ticket_id": %q}}`, ticket))
	require.Equal(t, http.StatusAccepted, status, body)
	require.Contains(t, body, `"status":"succeeded"`)
	effects := fake.Effects()
	require.Len(t, effects, 2, "the ticket and acme's close reached the target, nothing of globex's calls")
	require.Equal(t, "/tickets/"+ticket+"/close", effects[1].Path)
}

// resolveAs resolves the tenant's op under key as succeeded with the object ref, as the
// tenant's approver does after checking the vendor by hand.
func resolveAs(t *testing.T, base, approver, key, ref string) (int, string) {
	t.Helper()
	return postJSON(t, base, approver, "/v1/ops/"+key+"/resolve", "",
		fmt.Sprintf(`{"outcome": "succeeded", "vendor_ref": %q, "reason": "checked by hand"}`, ref))
}

// toReview puts an op in needs_review, as a reconcile that found two objects does.
func toReview(t *testing.T, pool *pgxpool.Pool, tenantName, key string) {
	t.Helper()
	tag, err := pool.Exec(context.Background(), `UPDATE oncebox_op SET status = 'needs_review'
		WHERE idempotency_key = $2 AND tenant_id = (SELECT id FROM oncebox_tenant WHERE name = $1)`, tenantName, key)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected())
}

// TestTypedReferenceNeverHandsOverAnotherTenantsObject (issue 42, item 2): globex's
// approver resolves one of globex's ops as succeeded with acme's ticket id; globex's
// agent then names that ticket over HTTP and MCP: still 404 not-found, and the target
// receives no close. The resolution itself is recorded (finance and support see the
// ref), and acme closes its ticket as before. The TTL purge of the resolved op does not
// make the typed object globex's either.
func TestTypedReferenceNeverHandsOverAnotherTenantsObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(fake)
	t.Cleanup(target.Close)
	cfg, pool := newConfig(t)
	cfg.Addr = "127.0.0.1:0"
	cfg.ToolsFile = writeCatalog(t, ownedCatalog(target.URL))
	srv, base := runServer(t, ctx, cfg)
	tenants := tenant.NewStore(pool)
	_, acme, err := tenants.Create(ctx, "acme")
	require.NoError(t, err)
	_, globex, err := tenants.Create(ctx, "globex")
	require.NoError(t, err)
	approver, err := tenants.NewTokenWithRole(ctx, "globex", tenant.RoleApprover)
	require.NoError(t, err)

	status, body := postJSON(t, base, acme, "/v1/ops?wait=20s", "ticket-1",
		`{"tool": "helpdesk.create_ticket", "args": {"customer_id": "c1", "subject": "help"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	var made map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &made))
	ticket := made["vendor_ref"].(string)

	status, body = postJSON(t, base, globex, "/v1/ops?wait=20s", "ticket-g",
		`{"tool": "helpdesk.create_ticket", "args": {"customer_id": "c2", "subject": "mine"}}`)
	require.Equal(t, http.StatusAccepted, status, body)
	toReview(t, pool, "globex", "ticket-g")
	status, body = resolveAs(t, base, approver, "ticket-g", ticket)
	require.Equal(t, http.StatusOK, status, "a person may record what they saw: %s", body)
	require.Contains(t, body, ticket)

	close := func(key string) (int, map[string]any) {
		status, body := postJSON(t, base, globex, "/v1/ops", key, fmt.Sprintf(`{"tool": "helpdesk.close_ticket", "args": {"ticket_id": %q}}`, ticket))
		var out map[string]any
		require.NoError(t, json.Unmarshal([]byte(body), &out))
		return status, out
	}
	status, out := close("close-g1")
	requireNotOwned(t, status, out, "ticket_id", ticket)
	transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token: globex}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, transport, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "helpdesk_close_ticket", Arguments: map[string]any{"ticket_id": ticket}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "ticket_id "+ticket+" is not one of this tenant's objects")

	// The purge of the resolved op keeps no typed reference as globex's object.
	_, err = pool.Exec(ctx, `UPDATE oncebox_op SET `+optest.Expired+` WHERE idempotency_key = 'ticket-g'`)
	require.NoError(t, err)
	st, err := srv.Outbox().Purge(ctx, outboxPurgeConfig())
	require.NoError(t, err)
	require.Equal(t, 1, st.Ops)
	status, out = close("close-g2")
	requireNotOwned(t, status, out, "ticket_id", ticket)

	status, body = postJSON(t, base, acme, "/v1/ops?wait=20s", "close-a", fmt.Sprintf(`{"tool": "helpdesk.close_ticket", "args": {"ticket_id": %q}}`, ticket))
	require.Equal(t, http.StatusAccepted, status, body)
	effects := fake.Effects()
	require.Len(t, effects, 3, "two tickets and acme's close reached the target, nothing of globex's closes")
	require.Equal(t, "/tickets/"+ticket+"/close", effects[2].Path)
}

// TestTypedPaymentReferenceIsNoRefundLicence (issue 42, item 2, Stripe): globex's
// approver resolves a globex op with acme's PaymentIntent; globex's refund of it is
// refused (the vendor's tag names acme's op), and Stripe holds no refund.
func TestTypedPaymentReferenceIsNoRefundLicence(t *testing.T) {
	t.Parallel()
	o := newOwnedStripe(t, server.Roles{API: true, Worker: true, Periodic: true})
	ctx := context.Background()
	approver, err := tenant.NewStore(o.pool).NewTokenWithRole(ctx, "globex", tenant.RoleApprover)
	require.NoError(t, err)
	pay := `{"tool": "stripe.payment_intent", "args": {"amount": 2000, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true}}`
	status, _, acmePay := o.call(t, http.MethodPost, "/v1/ops?wait=20s", o.acme, "pay-a", pay)
	require.Equal(t, http.StatusAccepted, status, acmePay)
	pi := acmePay["vendor_ref"].(string)
	status, _, out := o.call(t, http.MethodPost, "/v1/ops?wait=20s", o.globex, "pay-g", pay)
	require.Equal(t, http.StatusAccepted, status, out)

	toReview(t, o.pool, "globex", "pay-g")
	status, body := resolveAs(t, o.base, approver, "pay-g", pi)
	require.Equal(t, http.StatusOK, status, body)
	status, _, out = o.refund(t, o.globex, "refund-g", "payment_intent", pi)
	requireNotOwned(t, status, out, "payment_intent", pi)
	time.Sleep(300 * time.Millisecond)
	require.Empty(t, o.fake.Refunds(), "no refund of acme's payment reached Stripe")
}
