package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/oncebox/protocol"
)

// maxResponseBytes bounds a response body the client reads.
const maxResponseBytes = 8 << 20

// maxRetryAfter caps how long a Retry-After answer makes the client wait.
const maxRetryAfter = time.Minute

// defaultTimeout is Config.Timeout's default.
const defaultTimeout = 30 * time.Second

// Config configures a Client.
type Config struct {
	// BaseURL is the API's root, such as "https://oncebox.internal". Required.
	BaseURL string
	// Token is the tenant's API token ("obx_..."). Required.
	Token string
	// HTTPClient sends the requests. Its own Timeout, if set, bounds every request,
	// waits included: leave it 0 and let Timeout bound the requests. Defaults to a
	// client without a timeout of its own.
	HTTPClient *http.Client
	// Timeout bounds one attempt of a call beyond the wait it asks the server for: an
	// attempt of a call with a wait w (Opts.Wait, or Get's wait) may take w + Timeout,
	// one without a wait Timeout. A negative value sets no bound. Defaults to 30
	// seconds.
	Timeout time.Duration
	// MaxRetries is how many times a request is resent, with the same idempotency key,
	// after a transport error, a 429 or a 5xx. A negative value disables retries.
	// Defaults to 3.
	MaxRetries int
	// Backoff is the pause before the first retry; it doubles before each next one.
	// A Retry-After answer takes precedence. Defaults to 200 milliseconds.
	Backoff time.Duration
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.HTTPClient == nil {
		out.HTTPClient = &http.Client{}
	}
	if out.Timeout == 0 {
		out.Timeout = defaultTimeout
	}
	switch {
	case out.MaxRetries == 0:
		out.MaxRetries = 3
	case out.MaxRetries < 0:
		out.MaxRetries = 0
	}
	if out.Backoff == 0 {
		out.Backoff = 200 * time.Millisecond
	}
	return out
}

func (c *Config) validate() (*url.URL, error) {
	u, err := url.Parse(strings.TrimRight(c.BaseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: BaseURL %q must be an absolute http or https URL, such as \"https://oncebox.internal\"", c.BaseURL)
	}
	if c.Token == "" {
		return nil, errors.New("client: Config.Token is required (create one with `oncebox tenant create`)")
	}
	if c.Backoff < 0 {
		return nil, fmt.Errorf("client: Backoff %s is negative; leave it 0 for the 200 ms default", c.Backoff)
	}
	return u, nil
}

// Client calls oncebox's HTTP API. It is safe for concurrent use.
type Client struct {
	cfg  Config
	base *url.URL
}

// New builds a Client from cfg.
func New(cfg Config) (*Client, error) {
	c := cfg.withDefaults()
	base, err := c.validate()
	if err != nil {
		return nil, err
	}
	return &Client{cfg: c, base: base}, nil
}

// Response is the answer to an enqueue.
type Response struct {
	// Op is the recorded op.
	Op *protocol.Op
	// Replayed is true when the key already held this op (Idempotent-Replayed: true):
	// nothing new was recorded.
	Replayed bool
	// StatusCode is 202 for a new op and 200 for a replay.
	StatusCode int
}

// Opts are per-call options of an enqueue.
type Opts struct {
	// Wait asks the server to hold the answer until the op is settled or Wait has
	// passed. Defaults to answering at once.
	Wait time.Duration
	// ConversationID and ToolCallID tie the op to the agent's conversation. Optional.
	ConversationID string
	ToolCallID     string
}

// Enqueue records a call of tool with args (a value marshaled to a JSON object, or a
// json.RawMessage) under key. Resending the same key and args is a replay; the same
// key with other args is a *Problem matching ErrConflict.
func (c *Client) Enqueue(ctx context.Context, key, tool string, args any, opts *Opts) (*Response, error) {
	k, err := checkKey(key)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &Opts{}
	}
	var raw json.RawMessage
	switch a := args.(type) {
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		if raw, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("client: marshal args of %s: %w", tool, err)
		}
	}
	body, err := json.Marshal(struct {
		Tool           string          `json:"tool"`
		Args           json.RawMessage `json:"args"`
		ConversationID string          `json:"conversation_id,omitempty"`
		ToolCallID     string          `json:"tool_call_id,omitempty"`
	}{tool, raw, opts.ConversationID, opts.ToolCallID})
	if err != nil {
		return nil, fmt.Errorf("client: marshal request: %w", err)
	}
	res, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/ops", query: waitQuery(opts.Wait), wait: opts.Wait, body: body, key: k})
	if err != nil {
		return nil, err
	}
	op, err := decodeOp(res.body)
	if err != nil {
		return nil, err
	}
	return &Response{Op: op, Replayed: res.header.Get("Idempotent-Replayed") == "true", StatusCode: res.status}, nil
}

// CreatePaymentIntent records a stripe.payment_intent call under key.
func (c *Client) CreatePaymentIntent(ctx context.Context, key string, args protocol.PaymentIntentArgs, opts *Opts) (*Response, error) {
	return c.Enqueue(ctx, key, protocol.ToolPaymentIntent, args, opts)
}

// CreateRefund records a stripe.refund call under key.
func (c *Client) CreateRefund(ctx context.Context, key string, args protocol.RefundArgs, opts *Opts) (*Response, error) {
	return c.Enqueue(ctx, key, protocol.ToolRefund, args, opts)
}

// SendMail records a sendgrid.mail call under key.
func (c *Client) SendMail(ctx context.Context, key string, args protocol.MailArgs, opts *Opts) (*Response, error) {
	return c.Enqueue(ctx, key, protocol.ToolMail, args, opts)
}

// PostWebhook records a webhook.post call under key.
func (c *Client) PostWebhook(ctx context.Context, key string, args protocol.WebhookArgs, opts *Opts) (*Response, error) {
	return c.Enqueue(ctx, key, protocol.ToolWebhookPost, args, opts)
}

// Get returns the op stored under key, after waiting up to wait for it to settle when
// wait is positive. Another tenant's key is a *Problem matching ErrNotFound.
func (c *Client) Get(ctx context.Context, key string, wait time.Duration) (*protocol.Op, error) {
	k, err := checkKey(key)
	if err != nil {
		return nil, err
	}
	res, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/ops/" + url.PathEscape(k), query: waitQuery(wait), wait: wait})
	if err != nil {
		return nil, err
	}
	return decodeOp(res.body)
}

// Approve approves the op awaiting approval under key; it is then dispatched. It needs a
// client made with an approver or admin token (an agent token gets a *Problem with
// status 403). An op in another state is a *Problem matching ErrConflict.
func (c *Client) Approve(ctx context.Context, key, reason string) (*protocol.Op, error) {
	return c.decide(ctx, key, "approve", reason)
}

// Reject rejects the op awaiting approval under key; it is never dispatched. It needs a
// client made with an approver or admin token. An op in another state is a *Problem
// matching ErrConflict.
func (c *Client) Reject(ctx context.Context, key, reason string) (*protocol.Op, error) {
	return c.decide(ctx, key, "reject", reason)
}

func (c *Client) decide(ctx context.Context, key, action, reason string) (*protocol.Op, error) {
	k, err := checkKey(key)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(struct {
		Reason string `json:"reason,omitempty"`
	}{reason})
	if err != nil {
		return nil, fmt.Errorf("client: marshal request: %w", err)
	}
	res, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/ops/" + url.PathEscape(k) + "/" + action, body: body})
	if err != nil {
		// A retried decision whose first answer was lost finds the op already
		// decided: read it, and report success when it went the way asked.
		if res != nil && res.retried && errors.Is(err, ErrConflict) {
			if op, gerr := c.Get(ctx, k, 0); gerr == nil && decidedAs(op.Status, action) {
				return op, nil
			}
		}
		return nil, err
	}
	return decodeOp(res.body)
}

// decidedAs reports whether an op in status went the way action asked.
func decidedAs(status, action string) bool {
	if action == "reject" {
		return status == string(protocol.StatusRejected)
	}
	return status != string(protocol.StatusAwaitingApproval) && status != string(protocol.StatusRejected)
}

// checkKey normalizes a key the way the server does, and refuses a bad one locally
// with the problem the server would answer.
func checkKey(key string) (string, error) {
	k, err := protocol.NormalizeKey(key)
	if err == nil {
		return k, nil
	}
	p := &Problem{Problem: *protocol.NewProblem(http.StatusBadRequest, protocol.ProblemInvalidKey, err.Error()), cause: err}
	var ke *protocol.KeyError
	if errors.As(err, &ke) {
		p.Rule = ke.Rule
		p.Detail = "The idempotency key " + ke.Detail + "."
	}
	return "", p
}

func waitQuery(wait time.Duration) url.Values {
	if wait <= 0 {
		return nil
	}
	return url.Values{"wait": {wait.String()}}
}

func decodeOp(body []byte) (*protocol.Op, error) {
	var op protocol.Op
	if err := json.Unmarshal(body, &op); err != nil {
		return nil, fmt.Errorf("client: decode op: %w", err)
	}
	if string(op.Result) == "null" {
		op.Result = nil
	}
	if string(op.Error) == "null" {
		op.Error = nil
	}
	return &op, nil
}

// request is one API call.
type request struct {
	method string
	path   string
	query  url.Values
	// wait is how long the server may hold the answer (the ?wait= asked for).
	wait time.Duration
	body []byte
	// key is sent as the Idempotency-Key header when set.
	key string
}

// response is an API answer read in full.
type response struct {
	status  int
	header  http.Header
	body    []byte
	retried bool
}

// do sends req, resending it after transport errors, 429 and 5xx up to MaxRetries
// times. A 4xx or 5xx answer is returned as a *Problem together with the response.
func (c *Client) do(ctx context.Context, req request) (*response, error) {
	target := strings.TrimRight(c.base.String(), "/") + req.path
	if len(req.query) > 0 {
		target += "?" + req.query.Encode()
	}

	for attempt := 0; ; attempt++ {
		res, err := c.send(ctx, target, req)
		last := attempt >= c.cfg.MaxRetries
		if err != nil {
			if ctx.Err() != nil || last || !retryable(err) {
				return nil, fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
			}
			if err := c.sleep(ctx, c.backoff(attempt)); err != nil {
				return nil, fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
			}
			continue
		}
		res.retried = attempt > 0
		if res.status < 400 {
			return res, nil
		}
		// A budget's 429 lasts until its window ends: it is answered, not retried.
		budget := res.status == http.StatusTooManyRequests && problemOf(res).Type == protocol.ProblemBudgetExceeded
		if (res.status == http.StatusTooManyRequests || res.status >= 500) && !last && !budget {
			pause := c.backoff(attempt)
			if d, ok := retryAfter(res.header.Get("Retry-After")); ok {
				pause = d
			}
			if err := c.sleep(ctx, pause); err != nil {
				return nil, fmt.Errorf("client: %s %s: %w", req.method, req.path, err)
			}
			continue
		}
		return res, problemOf(res)
	}
}

// attemptTimeout returns how long one attempt of req may take: Timeout beyond the
// wait the server may hold the answer for, or 0 for no bound.
func (c *Client) attemptTimeout(req request) time.Duration {
	if c.cfg.Timeout < 0 {
		return 0
	}
	return max(req.wait, 0) + c.cfg.Timeout
}

// send makes one attempt and reads the whole answer within attemptTimeout.
func (c *Client) send(ctx context.Context, target string, req request) (*response, error) {
	if d := c.attemptTimeout(req); d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, target, body)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	hr.Header.Set("Accept", "application/json, application/problem+json")
	hr.Header.Set("User-Agent", "oncebox-go-client/1")
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if req.key != "" {
		hr.Header.Set("Idempotency-Key", req.key)
	}
	resp, err := c.cfg.HTTPClient.Do(hr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, fmt.Errorf("read response: %w", err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// retryable reports whether a transport error may be retried: anything but a
// certificate the client refuses, which a retry would not change.
func retryable(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalidCert      x509.CertificateInvalidError
		hostname         x509.HostnameError
		verification     *tls.CertificateVerificationError
	)
	return !errors.As(err, &unknownAuthority) && !errors.As(err, &invalidCert) &&
		!errors.As(err, &hostname) && !errors.As(err, &verification)
}

func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.Backoff << min(attempt, 16)
	return min(d, maxRetryAfter)
}

func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
		d = time.Duration(max(n, 0)) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = max(time.Until(t), 0)
	} else {
		return 0, false
	}
	return min(d, maxRetryAfter), true
}

// problemOf decodes an error answer into a *Problem.
func problemOf(res *response) *Problem {
	p := &Problem{}
	mt, _, _ := mime.ParseMediaType(res.header.Get("Content-Type"))
	if mt == "application/problem+json" || mt == "application/json" {
		_ = json.Unmarshal(res.body, p)
	}
	p.Status = res.status
	if p.Title == "" {
		p.Title = http.StatusText(res.status)
	}
	if p.Type == "" {
		p.Type = "about:blank"
		if p.Detail == "" {
			p.Detail = strings.TrimSpace(string(res.body[:min(len(res.body), 512)]))
		}
	}
	return p
}
