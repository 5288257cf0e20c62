package webhook

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/vendorapi"
)

// Vendor dispatches webhook tool calls to the allow-listed targets. It
// satisfies vendorapi.Vendor and is safe for concurrent use.
type Vendor struct {
	cfg Config
}

var _ vendorapi.Vendor = (*Vendor)(nil)

// New checks cfg, fills in its defaults and returns a Vendor.
func New(cfg Config) (*Vendor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Vendor{cfg: cfg.withDefaults()}, nil
}

// Name returns "webhook".
func (v *Vendor) Name() string { return "webhook" }

// Idempotency says whether the targets honour Idempotency-Key
// (Config.NativeIdempotency) and for how long.
func (v *Vendor) Idempotency() vendorapi.Idempotency {
	return vendorapi.Idempotency{Native: v.cfg.NativeIdempotency, Window: v.cfg.IdempotencyWindow}
}

// LookupLag returns Config.LookupLag.
func (v *Vendor) LookupLag() time.Duration { return v.cfg.LookupLag }

// HasTarget reports whether name is a configured target.
func (v *Vendor) HasTarget(name string) bool {
	_, ok := v.cfg.Targets[name]
	return ok
}

// Dispatch POSTs the op's body to its target and classifies the answer (see
// the package documentation). Every error it returns is a
// *vendorapi.DispatchError, free of the target's secret.
func (v *Vendor) Dispatch(ctx context.Context, p vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	a, err := decodeArgs(p.Args)
	if err != nil {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_args", Message: err.Error(), Err: err}
	}
	target, ok := v.cfg.Targets[a.Target]
	if !ok {
		return nil, &vendorapi.DispatchError{
			Outcome: vendorapi.OutcomePermanent,
			Code:    "unknown_target",
			Message: fmt.Sprintf("webhook target %q is not configured", a.Target),
		}
	}
	u, err := joinURL(target.BaseURL, a.Path, nil)
	if err != nil {
		err = hideURL(err, a.Method, a.Target, a.Path, target.BaseURL)
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_path", Message: err.Error(), Err: err}
	}

	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	var sent sendTrace
	req, err := http.NewRequestWithContext(sent.withTrace(ctx), a.Method, u, bytes.NewReader(a.requestBody()))
	if err != nil {
		err = hideURL(err, a.Method, a.Target, a.Path, target.BaseURL)
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_path", Message: "build request: " + err.Error(), Err: err}
	}
	setHeaders(ctx, req, a, p, target)

	start := time.Now()
	ans := v.send(ctx, req, &sent, a, p, target)
	res, de := classify(ans, v.cfg.MaxResultBytes)
	attrs := append(tracing.SpanLogAttrs(ctx),
		slog.String("op_id", p.OpID),
		slog.Int64("tenant", p.TenantID),
		slog.String("target", a.Target),
		slog.String("path", a.Path),
		slog.Int("attempt", p.Attempt),
		slog.Int("status", ans.status),
		slog.Duration("elapsed", ans.now.Sub(start)),
	)
	if de != nil {
		de = scrub(de, target.Secret)
		v.cfg.Logger.DebugContext(ctx, "webhook dispatch failed",
			append(attrs, slog.String("outcome", de.Outcome.String()), slog.String("code", de.Code), slog.String("error", de.Error()))...)
		return nil, de
	}
	v.cfg.Logger.DebugContext(ctx, "webhook dispatched", append(attrs, slog.String("vendor_ref", res.VendorRef))...)
	return res, nil
}

// sendTrace follows a request on its way: it may have reached the receiver once a
// connection was obtained, unless writing it failed.
type sendTrace struct {
	gotConn, writeFailed atomic.Bool
}

// withTrace returns ctx with a client trace that fills t.
func (t *sendTrace) withTrace(ctx context.Context) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { t.gotConn.Store(true) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				t.writeFailed.Store(true)
			}
		},
	})
}

// mayHaveArrived reports whether the request may have reached the receiver.
func (t *sendTrace) mayHaveArrived() bool {
	return t.gotConn.Load() && !t.writeFailed.Load()
}

// setHeaders sets the headers of the webhook request of the op p.
func setHeaders(ctx context.Context, req *http.Request, a args, p vendorapi.DispatchParams, target Target) {
	// Without GetBody net/http cannot resend the POST on its own after a
	// dropped kept-alive connection, which it would do for any request with
	// an Idempotency-Key header: a resend is oncebox's decision, not the
	// transport's.
	req.GetBody = nil
	if a.hasBody() {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "oncebox-webhook")
	// A read (package catalog's read tools) is sent without an op: no key, no tag.
	if p.VendorKey != "" {
		req.Header.Set("Idempotency-Key", p.VendorKey)
	}
	if p.OpID != "" {
		req.Header.Set("Oncebox-Op", p.OpID)
	}
	// The dispatch's trace context (traceparent, tracestate), when oncebox traces.
	tracing.Propagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	if target.SecretHeader != "" {
		req.Header.Set(target.SecretHeader, target.Secret)
	}
}

// send sends req and returns the receiver's answer, or its absence, free of the
// target's secret.
func (v *Vendor) send(ctx context.Context, req *http.Request, sent *sendTrace, a args, p vendorapi.DispatchParams, target Target) answer {
	ans := answer{}
	resp, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		// The transport's error names the whole URL, which may hold a credential.
		ans.err = hideURL(err, a.Method, a.Target, a.Path, target.BaseURL)
		ans.mayHaveArrived = sent.mayHaveArrived()
	} else {
		ans.status = resp.StatusCode
		ans.header = resp.Header
		body, complete, readErr := readBody(resp.Body, v.cfg.MaxResultBytes, target.Secret)
		_ = resp.Body.Close()
		if readErr != nil {
			// The status came back: it decides. The body is what arrived.
			v.cfg.Logger.DebugContext(ctx, "webhook answer body cut short",
				append(tracing.SpanLogAttrs(ctx), slog.String("op_id", p.OpID), slog.String("target", a.Target),
					slog.String("error", redactString(hideURL(readErr, "read answer", a.Target, a.Path, target.BaseURL).Error(), target.Secret)))...)
		}
		ans.body = redactBody(body, target.Secret, complete)
	}
	ans.now = time.Now()
	return ans
}
