// Package sms is an example of a vendor adapter written outside oncebox's own
// packages: it implements vendorapi.Vendor for an SMS API (see package fakesms) and
// declares its tool, sms.send, as an vendorapi.Tool. It uses only oncebox's stable
// extension API: outbox (Vendor, Tool, DispatchError, ValidationError) and, in its
// tests, vendortest.
package sms

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oncebox/oncebox/vendorapi"
)

// ToolSend is the tool's name.
const ToolSend = "sms.send"

// InputSchema is sms.send's argument schema, for MCP and GET /v1/tools.
const InputSchema = `{"type":"object","properties":{
	"to":{"type":"string","pattern":"^\\+[1-9][0-9]{6,14}$","description":"E.164 phone number, such as +15550100."},
	"body":{"type":"string","minLength":1,"maxLength":1600}},
	"required":["to","body"],"additionalProperties":false}`

// Args are sms.send's arguments.
type Args struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

// Vendor sends SMS through the API at BaseURL. It satisfies vendorapi.Vendor.
type Vendor struct {
	BaseURL string
	Client  *http.Client
}

var _ vendorapi.Vendor = (*Vendor)(nil)

// New returns a Vendor for the API at baseURL with a request timeout.
func New(baseURL string, timeout time.Duration) *Vendor {
	return &Vendor{BaseURL: strings.TrimRight(baseURL, "/"), Client: &http.Client{Timeout: timeout,
		Transport: &http.Transport{DisableKeepAlives: true}}}
}

// Tool returns sms.send, dispatched by this vendor.
func (v *Vendor) Tool() vendorapi.Tool {
	return vendorapi.Tool{Name: ToolSend, Vendor: v.Name(), Validate: Validate}
}

// Validate checks sms.send's arguments, naming the field it refuses.
func Validate(raw json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var a Args
	if err := dec.Decode(&a); err != nil {
		return &vendorapi.ValidationError{Field: "args", Message: "must be {\"to\": ..., \"body\": ...}: " + err.Error()}
	}
	if len(a.To) < 8 || a.To[0] != '+' || strings.Trim(a.To[1:], "0123456789") != "" {
		return &vendorapi.ValidationError{Field: "args.to", Message: "must be an E.164 number such as +15550100"}
	}
	if a.Body == "" || len(a.Body) > 1600 {
		return &vendorapi.ValidationError{Field: "args.body", Message: "must be 1 to 1600 characters"}
	}
	return nil
}

// Name returns "sms".
func (v *Vendor) Name() string { return "sms" }

// Idempotency: the API deduplicates Idempotency-Key for 24 hours.
func (v *Vendor) Idempotency() vendorapi.Idempotency {
	return vendorapi.Idempotency{Native: true, Window: 24 * time.Hour}
}

// LookupLag: the list is immediate.
func (v *Vendor) LookupLag() time.Duration { return 0 }

// Dispatch sends one SMS, with the op's vendor key and tag.
func (v *Vendor) Dispatch(ctx context.Context, p vendorapi.DispatchParams) (*vendorapi.DispatchResult, error) {
	if err := Validate(p.Args); err != nil {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "invalid_args", Message: err.Error()}
	}
	var written atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(i httptrace.WroteRequestInfo) { written.Store(i.Err == nil) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, v.BaseURL+"/messages", bytes.NewReader(p.Args))
	if err != nil {
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "bad_request", Message: err.Error()}
	}
	req.GetBody = nil // a resend is oncebox's decision, not the transport's
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", p.VendorKey)
	req.Header.Set("Oncebox-Op", p.OpID)
	resp, err := v.Client.Do(req)
	if err != nil {
		return nil, vendorapi.ClassifyTransport("the SMS API", err, written.Load())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusOK:
		var m struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &m)
		return &vendorapi.DispatchResult{VendorRef: m.ID, Result: body}, nil
	case resp.StatusCode == http.StatusTooManyRequests:
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomeRetryable, Code: "rate_limited", HTTPStatus: resp.StatusCode,
			RetryAfter: time.Second, Message: "the SMS API is rate limiting"}
	case resp.StatusCode >= 500:
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomeUnknown, Code: "http_5xx", HTTPStatus: resp.StatusCode,
			Message: fmt.Sprintf("the SMS API answered %d", resp.StatusCode)}
	default:
		return nil, &vendorapi.DispatchError{Outcome: vendorapi.OutcomePermanent, Code: "refused", HTTPStatus: resp.StatusCode,
			Message: fmt.Sprintf("the SMS API refused the message (%d): %s", resp.StatusCode, body)}
	}
}

// Lookup lists the messages tagged with the op.
func (v *Vendor) Lookup(ctx context.Context, p vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.BaseURL+"/messages?oncebox_op="+url.QueryEscape(p.OpID), nil)
	if err != nil {
		return nil, err
	}
	resp, err := v.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sms lookup: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("sms lookup: HTTP %d", resp.StatusCode)
	}
	var page struct {
		Messages []struct {
			ID      string    `json:"id"`
			Created time.Time `json:"created"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		return nil, fmt.Errorf("sms lookup: %w", err)
	}
	res := &vendorapi.LookupResult{}
	for _, m := range page.Messages {
		summary, _ := json.Marshal(m)
		res.Objects = append(res.Objects, vendorapi.VendorObject{ID: m.ID, OpID: p.OpID, Created: m.Created, Summary: summary})
	}
	return res, nil
}
