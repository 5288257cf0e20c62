package stripe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	stripego "github.com/stripe/stripe-go/v79"
	"github.com/stripe/stripe-go/v79/client"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// Name is the vendor's name, as tools.VendorStripe.
const Name = tools.VendorStripe

// Vendor is the Stripe adapter. It satisfies vendorapi.Vendor and is safe for
// concurrent use.
type Vendor struct {
	cfg      Config
	sc       *client.API
	backends *stripego.Backends
	// keyed holds a client per tenant's own key (conn).
	keyed  sync.Map
	logger *slog.Logger
}

var _ vendorapi.Vendor = (*Vendor)(nil)

// New returns a Vendor talking to Stripe (or cfg.BaseURL) through its own
// stripe-go backend; stripe-go's global backends and key are never used.
func New(cfg Config) (*Vendor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	hc := *cfg.HTTPClient
	hc.Transport = observingTransport{base: cfg.HTTPClient.Transport}
	b := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
		URL:               stripego.String(cfg.BaseURL),
		HTTPClient:        &hc,
		MaxNetworkRetries: stripego.Int64(cfg.MaxNetworkRetries),
		// stripe-go logs response bodies at debug level and errors at error
		// level; this adapter logs what matters itself, without payloads.
		LeveledLogger:   &stripego.LeveledLogger{Level: stripego.LevelNull},
		EnableTelemetry: stripego.Bool(false),
	})
	backends := &stripego.Backends{API: b, Connect: b, Uploads: b}
	sc := client.New(cfg.APIKey, backends)
	return &Vendor{cfg: cfg, sc: sc, backends: backends, logger: cfg.Logger}, nil
}

// Name returns "stripe".
func (v *Vendor) Name() string { return Name }

// Idempotency reports Stripe's native idempotency keys, remembered for 24 hours.
func (v *Vendor) Idempotency() vendorapi.Idempotency {
	return vendorapi.Idempotency{Native: true, Window: 24 * time.Hour}
}

// Dispatch creates the op's PaymentIntent (stripe.payment_intent) or Refund
// (stripe.refund) with params.VendorKey as the Idempotency-Key and the op id
// in metadata[oncebox_op]. Its errors are *vendorapi.DispatchError.
func (v *Vendor) Dispatch(ctx context.Context, params vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	log := v.logger.With(append(tracing.SpanLogAttrs(ctx), slog.String("op_id", params.OpID), slog.String("tool", params.Tool),
		slog.Int("attempt", params.Attempt), slog.String("vendor_account", params.Account.Ref))...)
	if params.VendorKey == "" {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Bug: true, Code: "missing_vendor_key",
			Message: "bug in oncebox: no vendor key to send as Idempotency-Key"}
	}
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	ctx, st := observe(ctx)

	var (
		res *vendorapi.DispatchResult
		err error
	)
	switch params.Tool {
	case protocol.ToolPaymentIntent:
		res, err = v.createPaymentIntent(ctx, params)
	case protocol.ToolRefund:
		res, err = v.createRefund(ctx, params)
	default:
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "unknown_tool",
			Message: fmt.Sprintf("the stripe vendor does not dispatch tool %q", params.Tool)}
	}
	if err == nil {
		log.Debug("stripe dispatch succeeded", slog.String("vendor_ref", res.VendorRef))
		return res, nil
	}
	var de *vendorapi.DispatchError
	if errors.As(err, &de) {
		return nil, de // Raised before any request (invalid args).
	}
	de = v.conn(params.Account).scrub(classify(err, st.wrote.Load(), int(st.status.Load()), time.Now()))
	log.Debug("stripe dispatch failed", slog.String("outcome", de.Outcome.String()), slog.String("code", de.Code),
		slog.Int("http_status", de.HTTPStatus), slog.Bool("replayed", de.Replayed))
	return nil, de
}

func (v *Vendor) createPaymentIntent(ctx context.Context, p vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	a, err := tools.DecodePaymentIntent(p.Args)
	if err != nil {
		return nil, invalidArgs(err)
	}
	params := paymentIntentParams(a, p.OpID)
	params.Context = ctx
	params.SetIdempotencyKey(p.VendorKey)
	c := v.conn(p.Account)
	c.on(params)
	pi, err := c.api.PaymentIntents.New(params)
	if err != nil {
		return nil, err
	}
	return &vendorapi.DispatchResult{VendorRef: pi.ID, Result: mustJSON(paymentIntentSummary(pi))}, nil
}

// paymentIntentParams builds the create parameters of a PaymentIntent. The
// same args and op id always give the same parameters, as Stripe's
// idempotency requires.
func paymentIntentParams(a protocol.PaymentIntentArgs, opID string) *stripego.PaymentIntentParams {
	params := &stripego.PaymentIntentParams{
		Amount:   stripego.Int64(a.Amount),
		Currency: stripego.String(a.Currency),
		Metadata: tagged(a.Metadata, opID),
	}
	if a.Customer != "" {
		params.Customer = stripego.String(a.Customer)
	}
	if a.PaymentMethod != "" {
		params.PaymentMethod = stripego.String(a.PaymentMethod)
	}
	if a.Description != "" {
		params.Description = stripego.String(a.Description)
	}
	if a.Confirm {
		params.Confirm = stripego.Bool(true)
		// Confirming server-side with automatic payment methods needs a
		// return_url unless redirects are ruled out; an agent cannot follow
		// a redirect anyway.
		params.AutomaticPaymentMethods = &stripego.PaymentIntentAutomaticPaymentMethodsParams{
			Enabled:        stripego.Bool(true),
			AllowRedirects: stripego.String(string(stripego.PaymentIntentAutomaticPaymentMethodsAllowRedirectsNever)),
		}
	}
	return params
}

func (v *Vendor) createRefund(ctx context.Context, p vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	a, err := tools.DecodeRefund(p.Args)
	if err != nil {
		return nil, invalidArgs(err)
	}
	params := refundParams(a, p.OpID)
	params.Context = ctx
	params.SetIdempotencyKey(p.VendorKey)
	c := v.conn(p.Account)
	c.on(params)
	re, err := c.api.Refunds.New(params)
	if err != nil {
		return nil, err
	}
	return &vendorapi.DispatchResult{VendorRef: re.ID, Result: mustJSON(refundSummary(re))}, nil
}

// refundParams builds the create parameters of a Refund.
func refundParams(a protocol.RefundArgs, opID string) *stripego.RefundParams {
	params := &stripego.RefundParams{Metadata: tagged(a.Metadata, opID)}
	if a.PaymentIntent != "" {
		params.PaymentIntent = stripego.String(a.PaymentIntent)
	}
	if a.Charge != "" {
		params.Charge = stripego.String(a.Charge)
	}
	if a.Amount > 0 {
		params.Amount = stripego.Int64(a.Amount)
	}
	if a.Reason != "" {
		params.Reason = stripego.String(a.Reason)
	}
	return params
}

// tagged returns the caller's metadata plus the op tag.
func tagged(md map[string]string, opID string) map[string]string {
	out := make(map[string]string, len(md)+1)
	maps.Copy(out, md)
	out[vendorapi.TagKey] = opID
	return out
}

// invalidArgs is the permanent error for args that no longer decode (they were
// validated at enqueue, so this means the tool's rules changed since).
func invalidArgs(err error) *vendorapi.DispatchError {
	return &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_args",
		Message: "the op's arguments are invalid: " + err.Error(), Err: err}
}

// scrub removes the API keys from a DispatchError's texts, in case anything
// ever echoed them.
func (c conn) scrub(de *vendorapi.DispatchError) *vendorapi.DispatchError {
	de.Message = c.hide(de.Message)
	if len(de.Body) > 0 && c.shows(string(de.Body)) {
		de.Body = json.RawMessage(c.hide(string(de.Body)))
	}
	if de.Err != nil && c.shows(de.Err.Error()) {
		de.Err = &redactedError{err: de.Err, c: c}
	}
	return de
}

// redactedError hides the secrets of a conn from an error's text.
type redactedError struct {
	err error
	c   conn
}

func (e *redactedError) Error() string { return e.c.hide(e.err.Error()) }
func (e *redactedError) Unwrap() error { return e.err }

// callState is what the transport learnt about one call: whether a request was
// written whole on some connection, and the status of the last answer.
type callState struct {
	wrote  atomic.Bool
	status atomic.Int32
}

type callStateKey struct{}

// observe returns a context whose requests report into a new callState.
func observe(ctx context.Context) (context.Context, *callState) {
	st := &callState{}
	ctx = context.WithValue(ctx, callStateKey{}, st)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				st.wrote.Store(true)
			}
		},
	}), st
}

// observingTransport records each answer's status into the request's
// callState, so that an answer stripe-go cannot decode is still known to have
// come.
type observingTransport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if resp != nil {
		if st, ok := req.Context().Value(callStateKey{}).(*callState); ok {
			st.status.Store(int32(resp.StatusCode))
		}
	}
	return resp, err
}
