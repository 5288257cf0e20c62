package sendgrid_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakesendgrid"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/sendgrid"
)

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]sendgrid.Config{
		"no key":           {},
		"blank key":        {APIKey: "  "},
		"key with newline": {APIKey: "SG.a\nX-Evil: 1"},
		"relative base":    {APIKey: "SG.a", BaseURL: "api.sendgrid.com"},
		"base with query":  {APIKey: "SG.a", BaseURL: "https://api.sendgrid.com?x=1"},
		"negative timeout": {APIKey: "SG.a", Timeout: -time.Second},
		"negative lag":     {APIKey: "SG.a", LookupLag: -time.Second},
	} {
		_, err := sendgrid.New(cfg)
		require.Error(t, err, name)
		require.NotContains(t, err.Error(), "SG.a", name)
	}

	v, err := sendgrid.New(sendgrid.Config{APIKey: "SG.a"})
	require.NoError(t, err)
	require.Equal(t, "sendgrid", v.Name())
	require.Equal(t, vendorapi.Idempotency{Native: false}, v.Idempotency())
	require.Equal(t, 10*time.Minute, v.LookupLag())
}

func TestDispatchSendsOneTaggedEmail(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	args := json.RawMessage(`{
		"from": {"email": "shop@example.com", "name": "Shop"},
		"to": [{"email": "ann@example.com", "name": "Ann"}, {"email": "bob@example.com"}],
		"subject": "Your receipt",
		"text": "Thank you.",
		"html": "<p>Thank you.</p>",
		"categories": ["receipt", "agent"]
	}`)

	res, err := v.Dispatch(t.Context(), dispatchParams("op_1", args))
	require.NoError(t, err)

	require.Equal(t, 1, w.fake.SendCount())
	msg := w.fake.Messages()[0]
	require.Equal(t, msg.XMessageID, res.VendorRef)
	require.JSONEq(t, `{"message_id":"`+msg.XMessageID+`","status":202}`, string(res.Result))
	require.Equal(t, "shop@example.com", msg.From)
	require.Equal(t, []string{"ann@example.com", "bob@example.com"}, msg.To)
	require.Equal(t, map[string]string{vendorapi.TagKey: "op_1"}, msg.CustomArgs)
	for _, h := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		require.NotContains(t, msg.Headers, h, "an idempotency header would let net/http resend the POST")
	}

	body := w.lastSend(t)
	require.Equal(t, map[string]any{"email": "shop@example.com", "name": "Shop"}, body["from"])
	require.Equal(t, "Your receipt", body["subject"])
	require.Equal(t, []any{
		map[string]any{"type": "text/plain", "value": "Thank you."},
		map[string]any{"type": "text/html", "value": "<p>Thank you.</p>"},
	}, body["content"])
	require.Equal(t, []any{"receipt", "agent"}, body["categories"])
	require.Equal(t, map[string]any{vendorapi.TagKey: "op_1"}, body["custom_args"])
	require.NotContains(t, body, "template_id")
	require.Equal(t, []any{map[string]any{
		"to": []any{
			map[string]any{"email": "ann@example.com", "name": "Ann"},
			map[string]any{"email": "bob@example.com"},
		},
		"custom_args": map[string]any{vendorapi.TagKey: "op_1"},
	}}, body["personalizations"], "one personalization with every recipient")
}

func TestDispatchSendsTemplate(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	args := json.RawMessage(`{
		"from": {"email": "shop@example.com"},
		"to": [{"email": "ann@example.com"}],
		"template_id": "d-0123456789abcdef",
		"dynamic_template_data": {"name": "Ann", "total": 12.50, "items": [1, 2]}
	}`)

	_, err := v.Dispatch(t.Context(), dispatchParams("op_t", args))
	require.NoError(t, err)

	require.Equal(t, "d-0123456789abcdef", w.fake.Messages()[0].TemplateID)
	body := w.lastSend(t)
	require.Equal(t, "d-0123456789abcdef", body["template_id"])
	require.NotContains(t, body, "content")
	require.NotContains(t, body, "subject")
	p := body["personalizations"].([]any)[0].(map[string]any)
	require.Equal(t, map[string]any{"name": "Ann", "total": json.Number("12.50"), "items": []any{json.Number("1"), json.Number("2")}},
		p["dynamic_template_data"], "numbers are sent as written")
	require.Equal(t, map[string]any{vendorapi.TagKey: "op_t"}, p["custom_args"])
}

func TestDispatchInvalidArgsIsPermanentAndSendsNothing(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	_, err := v.Dispatch(t.Context(), dispatchParams("op_x", json.RawMessage(`{"to": []}`)))
	requireOutcome(t, err, vendorapi.OutcomePermanent, "invalid_args")
	require.Zero(t, w.posts())
}

// TestDispatchFaults runs every fault of the fake through Dispatch.
func TestDispatchFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault   fakesendgrid.Fault
		outcome vendorapi.Outcome
		code    string
		stored  int
	}{
		// The email went out but the answer was lost: never retryable.
		{fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop}, vendorapi.OutcomeUnknown, "connection_lost", 1},
		{fakesendgrid.Fault{Kind: fakesendgrid.FaultHang}, vendorapi.OutcomeUnknown, "timeout", 1},
		{fakesendgrid.Fault{Kind: fakesendgrid.Fault500Stored}, vendorapi.OutcomeUnknown, "server_error", 1},
		// Nothing was stored, but the client cannot tell these from the above.
		{fakesendgrid.Fault{Kind: fakesendgrid.Fault500NotStored}, vendorapi.OutcomeUnknown, "server_error", 0},
		{fakesendgrid.Fault{Kind: fakesendgrid.FaultDropBeforeAccept}, vendorapi.OutcomeUnknown, "connection_lost", 0},
		{fakesendgrid.Fault{Kind: fakesendgrid.Fault429, RateLimitReset: 3 * time.Second}, vendorapi.OutcomeRetryable, "rate_limited", 0},
	}
	for _, tt := range tests {
		t.Run(tt.fault.Kind.String(), func(t *testing.T) {
			t.Parallel()
			cfg := unlimited()
			cfg.HangFor = 5 * time.Second
			w := startWire(t, cfg)
			v := newVendor(t, w, func(c *sendgrid.Config) { c.Timeout = 300 * time.Millisecond })
			w.fake.InjectFault(tt.fault)

			_, err := v.Dispatch(t.Context(), dispatchParams("op_f", simpleArgs("ann@example.com")))
			de := requireOutcome(t, err, tt.outcome, tt.code)
			require.Equal(t, tt.stored, w.fake.SendCount())
			require.Equal(t, 1, w.posts(), "one request per Dispatch")
			if tt.fault.Kind == fakesendgrid.Fault429 {
				require.Equal(t, http.StatusTooManyRequests, de.HTTPStatus)
				require.GreaterOrEqual(t, de.RetryAfter, time.Second)
				require.LessOrEqual(t, de.RetryAfter, 4*time.Second)
			}
		})
	}
}

func TestDispatchRefusalsArePermanent(t *testing.T) {
	t.Parallel()
	body := `{"errors":[{"message":"The from address does not match a verified Sender Identity.","field":"from","help":null}]}`
	for status, code := range map[int]string{400: "bad_request", 401: "unauthorized", 403: "forbidden", 413: "payload_too_large"} {
		w := startWire(t, unlimited())
		v := newVendor(t, w, nil)
		w.refuseNext(status, body)
		_, err := v.Dispatch(t.Context(), dispatchParams("op_r", simpleArgs("ann@example.com")))
		de := requireOutcome(t, err, vendorapi.OutcomePermanent, code)
		require.Equal(t, status, de.HTTPStatus)
		require.JSONEq(t, body, string(de.Body))
		require.Equal(t, 1, w.posts())
	}
}

func TestDispatchConnectionRefusedIsRetryable(t *testing.T) {
	t.Parallel()
	v, err := sendgrid.New(sendgrid.Config{APIKey: testKey, BaseURL: "http://" + closedAddr(t)})
	require.NoError(t, err)
	_, err = v.Dispatch(t.Context(), dispatchParams("op_c", simpleArgs("ann@example.com")))
	requireOutcome(t, err, vendorapi.OutcomeRetryable, "not_sent")
}

func TestDispatchCancelledBeforeSendingIsRetryable(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := v.Dispatch(ctx, dispatchParams("op_c", simpleArgs("ann@example.com")))
	requireOutcome(t, err, vendorapi.OutcomeRetryable, "not_sent")
	require.Zero(t, w.posts())
}

// TestDispatchDoesNotResendOnDroppedKeptAliveConnection proves the adapter does not
// fall into net/http's replay of "idempotent" requests: the send whose kept-alive
// connection dies after SendGrid took the email is one email and an error, not a
// silent second email on a fresh connection.
func TestDispatchDoesNotResendOnDroppedKeptAliveConnection(t *testing.T) {
	t.Parallel()
	w := startWire(t, unlimited())
	v := newVendor(t, w, func(c *sendgrid.Config) { c.HTTPClient = w.srv.Client() }) // Keep-alives on.

	_, err := v.Dispatch(t.Context(), dispatchParams("op_1", simpleArgs("ann@example.com"))) // Opens the connection.
	require.NoError(t, err)
	require.EqualValues(t, 1, w.conns.Load())

	w.fake.InjectFault(fakesendgrid.Fault{Kind: fakesendgrid.FaultAcceptThenDrop})
	_, err = v.Dispatch(t.Context(), dispatchParams("op_2", simpleArgs("ann@example.com")))
	requireOutcome(t, err, vendorapi.OutcomeUnknown, "connection_lost")

	require.Equal(t, 2, w.fake.SendCount(), "one email per Dispatch")
	require.Equal(t, 2, w.posts(), "no replay reached the server")
	require.EqualValues(t, 1, w.conns.Load(), "the second send reused the kept-alive connection and opened no other")
	require.Len(t, w.fake.ByCustomArg(vendorapi.TagKey, "op_2"), 1)
}

// TestSecretNeverLeaks runs successes and every kind of failure, including
// servers that echo the Authorization header, and looks for the key everywhere.
func TestSecretNeverLeaks(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	w := startWire(t, unlimited())
	v := newVendor(t, w, func(c *sendgrid.Config) { c.Logger = logger; c.Timeout = 300 * time.Millisecond })
	echo := startEcho(t)
	vEcho := newVendor(t, echo, func(c *sendgrid.Config) { c.Logger = logger })

	var seen []string
	note := func(res *vendorapi.DispatchResult, err error) {
		if res != nil {
			seen = append(seen, res.VendorRef, string(res.Result))
		}
		if err != nil {
			seen = append(seen, err.Error())
			de := vendorapi.Classify(err)
			seen = append(seen, de.Message, string(de.Body))
			if de.Err != nil {
				seen = append(seen, de.Err.Error())
			}
		}
	}
	ctx := t.Context()
	args := simpleArgs("ann@example.com")
	note(v.Dispatch(ctx, dispatchParams("op_ok", args)))
	for _, f := range []fakesendgrid.FaultKind{fakesendgrid.FaultAcceptThenDrop, fakesendgrid.Fault429, fakesendgrid.Fault500Stored, fakesendgrid.FaultHang} {
		w.fake.InjectFault(fakesendgrid.Fault{Kind: f})
		note(v.Dispatch(ctx, dispatchParams("op_"+f.String(), args)))
	}
	w.refuseNext(400, `{"errors":[{"message":"bad"}]}`)
	note(v.Dispatch(ctx, dispatchParams("op_400", args)))
	note(vEcho.Dispatch(ctx, dispatchParams("op_echo", args)))

	lookup := func(v *sendgrid.Vendor) {
		res, err := v.Lookup(ctx, vendorapi.LookupParams{OpID: "op_ok"})
		if res != nil {
			for _, o := range res.Objects {
				seen = append(seen, o.ID, o.OpID, string(o.Summary))
			}
		}
		if err != nil {
			seen = append(seen, err.Error())
		}
	}
	lookup(v)
	lookup(vEcho)
	w.fake.SetActivityForbidden(true)
	lookup(v)
	_, err := v.ListMessages(ctx, time.Now().Add(-time.Hour), time.Now())
	require.Error(t, err)
	seen = append(seen, err.Error())

	require.Greater(t, len(seen), 10)
	for _, s := range seen {
		require.NotContains(t, s, testKey)
		require.NotContains(t, s, "k3yMaterial")
	}
	require.Contains(t, logs.String(), "op_ok", "the logger was used")
	require.NotContains(t, logs.String(), "k3yMaterial")
}

// startEcho starts a server that answers every request 500 with the request's
// Authorization header in its body, like a misbehaving proxy.
func startEcho(t *testing.T) *wire {
	t.Helper()
	return startWireWith(t, unlimited(), http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.WriteHeader(http.StatusInternalServerError)
		_, _ = rw.Write([]byte(`{"errors":[{"message":"` + strings.ReplaceAll(r.Header.Get("Authorization"), `"`, ``) + `"}]}`))
	}))
}
