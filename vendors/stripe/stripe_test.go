package stripe_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakestripe"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/testkit/testlog"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	_, err := stripe.New(stripe.Config{})
	require.ErrorContains(t, err, "APIKey")
	_, err = stripe.New(stripe.Config{APIKey: testKey, BaseURL: "ftp://x"})
	require.ErrorContains(t, err, "BaseURL")
	_, err = stripe.New(stripe.Config{APIKey: testKey, MaxNetworkRetries: -1})
	require.ErrorContains(t, err, "MaxNetworkRetries")
	v, err := stripe.New(stripe.Config{APIKey: testKey})
	require.NoError(t, err)
	require.Equal(t, "stripe", v.Name())
	require.Equal(t, vendorapi.Idempotency{Native: true, Window: 24 * time.Hour}, v.Idempotency())
}

func TestDispatchPaymentIntentSendsKeyTagAndParams(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	args := piArgs(1234, "pm_card_visa")
	args["customer"] = "cus_123"
	args["description"] = "order A-1"
	res, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-pi-1", "k1", args)
	require.NoError(t, err)

	posts := h.rec.posts("/v1/payment_intents")
	require.Len(t, posts, 1)
	p := posts[0]
	require.Equal(t, vendorapi.VendorKey(1, "k1", protocol.ToolPaymentIntent, 0), p.Header.Get("Idempotency-Key"))
	require.Equal(t, "Bearer "+testKey, p.Header.Get("Authorization"))
	require.Equal(t, map[string][]string{
		"amount":                             {"1234"},
		"currency":                           {"usd"},
		"customer":                           {"cus_123"},
		"description":                        {"order A-1"},
		"payment_method":                     {"pm_card_visa"},
		"confirm":                            {"true"},
		"automatic_payment_methods[enabled]": {"true"},
		"automatic_payment_methods[allow_redirects]": {"never"},
		"metadata[oncebox_op]":                       {"op-pi-1"},
		"metadata[order]":                            {"A-1"},
	}, map[string][]string(p.Form))

	pis, _ := h.fake.ByTag(vendorapi.TagKey, "op-pi-1")
	require.Len(t, pis, 1)
	require.Equal(t, pis[0].ID, res.VendorRef)

	var sum map[string]any
	require.NoError(t, json.Unmarshal(res.Result, &sum))
	require.Equal(t, pis[0].ID, sum["id"])
	require.Equal(t, "payment_intent", sum["object"])
	require.EqualValues(t, 1234, sum["amount"])
	require.Equal(t, "usd", sum["currency"])
	require.Equal(t, "succeeded", sum["status"])
	require.Equal(t, pis[0].LatestCharge, sum["latest_charge"])
	requireNoSecret(t, string(res.Result), h.logs.String())
}

func TestDispatchPaymentIntentWithoutConfirmSendsNoConfirmParams(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	res, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-pi-2", "k2", map[string]any{"amount": 500, "currency": "eur"})
	require.NoError(t, err)
	posts := h.rec.posts("/v1/payment_intents")
	require.Len(t, posts, 1)
	require.Equal(t, map[string][]string{
		"amount": {"500"}, "currency": {"eur"}, "metadata[oncebox_op]": {"op-pi-2"},
	}, map[string][]string(posts[0].Form))
	require.Contains(t, string(res.Result), `"status":"requires_payment_method"`)
	require.Contains(t, string(res.Result), `"latest_charge":null`)
}

func TestDispatchRefund(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_seeded", Amount: 1000})
	res, err := h.dispatch(t, protocol.ToolRefund, "op-re-1", "r1",
		map[string]any{"payment_intent": "pi_seeded", "amount": 300, "reason": "requested_by_customer"})
	require.NoError(t, err)

	posts := h.rec.posts("/v1/refunds")
	require.Len(t, posts, 1)
	require.Equal(t, vendorapi.VendorKey(1, "r1", protocol.ToolRefund, 0), posts[0].Header.Get("Idempotency-Key"))
	require.Equal(t, map[string][]string{
		"payment_intent": {"pi_seeded"}, "amount": {"300"}, "reason": {"requested_by_customer"},
		"metadata[oncebox_op]": {"op-re-1"},
	}, map[string][]string(posts[0].Form))

	_, refunds := h.fake.ByTag(vendorapi.TagKey, "op-re-1")
	require.Len(t, refunds, 1)
	require.Equal(t, refunds[0].ID, res.VendorRef)
	var sum map[string]any
	require.NoError(t, json.Unmarshal(res.Result, &sum))
	require.Equal(t, "refund", sum["object"])
	require.EqualValues(t, 300, sum["amount"])
	require.Equal(t, "pi_seeded", sum["payment_intent"])

	// A refund by charge sends charge, and no amount when none is given.
	_, err = h.dispatch(t, protocol.ToolRefund, "op-re-2", "r2", map[string]any{"charge": h.fake.PaymentIntents()[0].LatestCharge})
	require.NoError(t, err)
	posts = h.rec.posts("/v1/refunds")
	require.Len(t, posts, 2)
	require.Equal(t, []string{h.fake.PaymentIntents()[0].LatestCharge}, posts[1].Form["charge"])
	require.NotContains(t, posts[1].Form, "amount")
}

func TestDispatchSameKeyIsReplayed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	first, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-1", "k", piArgs(100, "pm_card_visa"))
	require.NoError(t, err)
	second, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-1", "k", piArgs(100, "pm_card_visa"))
	require.NoError(t, err)
	require.Equal(t, first.VendorRef, second.VendorRef)
	require.Equal(t, 1, h.fake.CreatedCount())
}

func TestDispatchDecline(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-d", "k", piArgs(100, "pm_card_chargeDeclined"))
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomePermanent, de.Outcome)
	require.Equal(t, "generic_decline", de.Code)
	require.Equal(t, http.StatusPaymentRequired, de.HTTPStatus)
	require.False(t, de.Bug)
	var body struct {
		Error struct {
			Type          string         `json:"type"`
			Code          string         `json:"code"`
			DeclineCode   string         `json:"decline_code"`
			PaymentIntent map[string]any `json:"payment_intent"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(de.Body, &body))
	require.Equal(t, "card_error", body.Error.Type)
	require.Equal(t, "card_declined", body.Error.Code)
	require.Equal(t, "generic_decline", body.Error.DeclineCode)
	require.Equal(t, "requires_payment_method", body.Error.PaymentIntent["status"])
	requireNoSecret(t, string(de.Body), de.Error(), de.Message, de.Err.Error(), h.logs.String())

	// Stripe keeps the stored decline: the same key replays it.
	_, err = h.dispatch(t, protocol.ToolPaymentIntent, "op-d", "k", piArgs(100, "pm_card_chargeDeclined"))
	de = requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomePermanent, de.Outcome)
	require.True(t, de.Replayed)
	require.Equal(t, 1, h.fake.CreatedCount())
}

func TestDispatchInvalidRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.fake.AddPaymentIntent(fakestripe.PaymentIntent{ID: "pi_small", Amount: 100})
	_, err := h.dispatch(t, protocol.ToolRefund, "op-r", "k", map[string]any{"payment_intent": "pi_small", "amount": 500})
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomePermanent, de.Outcome)
	require.Equal(t, http.StatusBadRequest, de.HTTPStatus)
	require.False(t, de.Bug)
	require.Contains(t, string(de.Body), "invalid_request_error")
}

func TestDispatchIdempotencyErrorIsABug(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op-i", "k", piArgs(100, "pm_card_visa"))
	require.NoError(t, err)
	_, err = h.dispatch(t, protocol.ToolPaymentIntent, "op-i", "k", piArgs(999, "pm_card_visa"))
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomePermanent, de.Outcome)
	require.True(t, de.Bug)
	require.Equal(t, "idempotency_error", de.Code)
	require.Contains(t, de.Message, "bug in oncebox")
	require.Equal(t, 1, h.fake.CreatedCount())
}

func TestDispatchRetryableAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault fakestripe.Fault
		code  string
		after time.Duration
	}{
		{"429 with Retry-After", fakestripe.Fault{Kind: fakestripe.Fault429, RetryAfter: 3 * time.Second}, "rate_limit", 3 * time.Second},
		{"409 key in use", fakestripe.Fault{Kind: fakestripe.Fault409}, "idempotency_key_in_use", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{})
			h.fake.InjectFault(tc.fault)
			_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op", "k", piArgs(100, "pm_card_visa"))
			de := requireDispatchError(t, err)
			require.Equal(t, vendorapi.OutcomeRetryable, de.Outcome)
			require.Equal(t, tc.code, de.Code)
			require.Equal(t, tc.after, de.RetryAfter)
			require.Equal(t, 0, h.fake.CreatedCount())
			// Nothing was stored: the same key now creates the object.
			_, err = h.dispatch(t, protocol.ToolPaymentIntent, "op", "k", piArgs(100, "pm_card_visa"))
			require.NoError(t, err)
			require.Equal(t, 1, h.fake.CreatedCount())
		})
	}
}

func TestDispatchStored500IsUnknownThenReplayed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultStored500})
	_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op", "k", piArgs(100, "pm_card_visa"))
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomeUnknown, de.Outcome)
	require.Equal(t, http.StatusInternalServerError, de.HTTPStatus)
	require.False(t, de.Replayed)

	_, err = h.dispatch(t, protocol.ToolPaymentIntent, "op", "k", piArgs(100, "pm_card_visa"))
	de = requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomeUnknown, de.Outcome)
	require.True(t, de.Replayed, "the second 500 is Stripe's stored answer")
	require.Equal(t, 0, h.fake.CreatedCount())
}

// stubServer answers every request with status and body.
func stubServer(t *testing.T, status int, body func(r *http.Request) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body(r)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestDispatchAuthenticationIsRetryableAndScrubbed: a 401 (a bad key, for an operator to
// fix) is retried; a 403 (a key that may not act there) fails the op, for the same
// request is refused again. Neither shows the key.
func TestDispatchAuthenticationIsRetryableAndScrubbed(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		// The stub echoes the key, to prove it is scrubbed.
		base := stubServer(t, status, func(r *http.Request) string {
			b, _ := json.Marshal(map[string]any{"error": map[string]string{
				"type": "invalid_request_error", "message": "Invalid API Key provided: " + r.Header.Get("Authorization")}})
			return string(b)
		})
		logs := &testlog.Buffer{}
		v, err := stripe.New(stripe.Config{APIKey: testKey, BaseURL: base, Logger: newLogger(logs)})
		require.NoError(t, err)
		_, err = v.Dispatch(context.Background(), vendorapi.DispatchParams{OpID: "op", Tool: protocol.ToolPaymentIntent,
			Args: json.RawMessage(`{"amount":100,"currency":"usd"}`), VendorKey: "ob_x", Attempt: 1})
		de := requireDispatchError(t, err)
		if status == http.StatusForbidden {
			require.Equal(t, vendorapi.OutcomePermanent, de.Outcome)
			require.Equal(t, "permission_denied", de.Code)
		} else {
			require.Equal(t, vendorapi.OutcomeRetryable, de.Outcome)
			require.Equal(t, "authentication", de.Code)
		}
		require.Equal(t, status, de.HTTPStatus)
		requireNoSecret(t, de.Error(), de.Message, string(de.Body), de.Err.Error(), logs.String())
	}
}

func TestDispatchUndecodableAnswerIsUnknown(t *testing.T) {
	t.Parallel()
	base := stubServer(t, http.StatusBadGateway, func(*http.Request) string { return "<html>bad gateway</html>" })
	v, err := stripe.New(stripe.Config{APIKey: testKey, BaseURL: base})
	require.NoError(t, err)
	_, err = v.Dispatch(context.Background(), vendorapi.DispatchParams{OpID: "op", Tool: protocol.ToolPaymentIntent,
		Args: json.RawMessage(`{"amount":100,"currency":"usd"}`), VendorKey: "ob_x", Attempt: 1})
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomeUnknown, de.Outcome)
	require.Equal(t, "unreadable_response", de.Code)
	require.Equal(t, http.StatusBadGateway, de.HTTPStatus)
}

func TestDispatchConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // Nothing listens there any more.
	v, err := stripe.New(stripe.Config{APIKey: testKey, BaseURL: "http://" + addr})
	require.NoError(t, err)
	_, err = v.Dispatch(context.Background(), vendorapi.DispatchParams{OpID: "op", Tool: protocol.ToolPaymentIntent,
		Args: json.RawMessage(`{"amount":100,"currency":"usd"}`), VendorKey: "ob_x", Attempt: 1})
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomeRetryable, de.Outcome)
	require.Equal(t, "not_sent", de.Code)
	requireNoSecret(t, de.Error(), de.Err.Error())
}

func TestDispatchDroppedConnectionAfterWriteIsUnknown(t *testing.T) {
	t.Parallel()
	// Each request on its own connection: net/http cannot resend, and the
	// adapter sees a request that was written and got no answer.
	for _, kind := range []fakestripe.FaultKind{fakestripe.FaultDropBeforeCreate, fakestripe.FaultDropAfterCreate} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{})
			h.fake.InjectFault(fakestripe.Fault{Kind: kind})
			_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op", "k", piArgs(100, "pm_card_visa"))
			de := requireDispatchError(t, err)
			require.Equal(t, vendorapi.OutcomeUnknown, de.Outcome)
			require.Equal(t, "connection_lost", de.Code)
			require.Equal(t, 1, h.fake.Requests())
			want := 0
			if kind == fakestripe.FaultDropAfterCreate {
				want = 1
			}
			require.Equal(t, want, h.fake.CreatedCount())
		})
	}
}

func TestDispatchDroppedKeptAliveConnectionIsResentSafely(t *testing.T) {
	t.Parallel()
	for _, kind := range []fakestripe.FaultKind{fakestripe.FaultDropBeforeCreate, fakestripe.FaultDropAfterCreate} {
		t.Run(kind.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, harnessOpts{keepAlive: true})
			// Open a connection that the POST will reuse.
			_, err := h.v.ListObjects(context.Background(), time.Now().Add(-time.Hour), time.Now())
			require.NoError(t, err)
			h.fake.InjectFault(fakestripe.Fault{Kind: kind})
			res, err := h.dispatch(t, protocol.ToolPaymentIntent, "op", "k", piArgs(100, "pm_card_visa"))
			require.NoError(t, err, "net/http resends a POST with an Idempotency-Key on a dead reused connection")
			require.Equal(t, 2, h.fake.Requests())
			require.Equal(t, 1, h.fake.CreatedCount())
			require.Equal(t, h.fake.PaymentIntents()[0].ID, res.VendorRef)
		})
	}
}

func TestDispatchTimeoutIsUnknown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{adjust: func(c *stripe.Config) { c.Timeout = 300 * time.Millisecond }})
	h.fake.InjectFault(fakestripe.Fault{Kind: fakestripe.FaultHang})
	_, err := h.dispatch(t, protocol.ToolPaymentIntent, "op", "k", piArgs(100, "pm_card_visa"))
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomeUnknown, de.Outcome)
	require.Equal(t, "timeout", de.Code)
	require.Equal(t, 1, h.fake.CreatedCount())
}

func TestDispatchUnknownTool(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	_, err := h.dispatch(t, "sendgrid.mail", "op", "k", map[string]any{})
	de := requireDispatchError(t, err)
	require.Equal(t, vendorapi.OutcomePermanent, de.Outcome)
	require.Equal(t, 0, h.fake.Requests())
}

func TestSecretNeverLogged(t *testing.T) {
	t.Parallel()
	h := newHarness(t, harnessOpts{})
	for _, f := range []fakestripe.FaultKind{fakestripe.Fault429, fakestripe.FaultStored500} {
		h.fake.InjectFault(fakestripe.Fault{Kind: f})
	}
	for i, pm := range []string{"pm_card_visa", "pm_card_visa", "pm_card_visa", "pm_card_chargeDeclined"} {
		key := "k" + strings.Repeat("x", i)
		res, err := h.dispatch(t, protocol.ToolPaymentIntent, "op", key, piArgs(100, pm))
		if err != nil {
			de := requireDispatchError(t, err)
			requireNoSecret(t, de.Error(), de.Message, string(de.Body), de.Err.Error())
		} else {
			requireNoSecret(t, string(res.Result))
		}
	}
	_, err := h.v.Lookup(context.Background(), vendorapi.LookupParams{OpID: "op", Tool: protocol.ToolPaymentIntent, Since: time.Now()})
	require.NoError(t, err)
	require.NotEmpty(t, h.logs.String())
	requireNoSecret(t, h.logs.String())
}
