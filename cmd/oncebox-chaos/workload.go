package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// item is one op of the workload: a key, its payload, how many copies are
// sent at once, and whether a conflicting payload follows.
type item struct {
	key      string
	tool     string
	args     map[string]any
	copies   int
	conflict bool
	// plan is what the verdict may expect of the op.
	plan Plan
	// tenant is the index of the tenant it is sent as (harness.tenantOf), account
	// that tenant's Stripe account, where its refund's charge is picked.
	tenant  int
	account string
}

// plan draws the workload: n keys of mixed tools, an eighth of them mails through
// the fake MCP upstreams (half over HTTP, half over stdio), 3% calls of the HTTP
// upstream's gated tool when the run has it (gated), each approved, rejected or left
// waiting; without it those keys are webhooks; 3% calls of the composite tool when the
// run has it (composite: a charge, a mail, a webhook, composite.go; 30% of them with a
// webhook the receiver refuses for good, so the charge is refunded), else webhooks. Refund items get their payment intent when they are sent (a
// charge made earlier in the run). In oncebox's default webhook mode (webhookDefault),
// most webhooks that are not for the blind target go to the plain receiver, which does
// not deduplicate.
func plan(rng *rand.Rand, n int, runID string, webhookDefault, gated, composite, crm bool) []item {
	items := make([]item, n)
	for i := range items {
		it := item{key: fmt.Sprintf("chaos-%s-%05d", runID, i), copies: 1}
		switch u := rng.Float64(); {
		case u < 0.35:
			it.tool = protocol.ToolPaymentIntent
			pm := "pm_card_visa"
			if rng.Float64() < 0.06 {
				pm, it.plan.Declined = "pm_card_chargeDeclined", true
			}
			it.args = map[string]any{"amount": 1000 + rng.IntN(9000), "currency": "usd", "payment_method": pm,
				"confirm": true, "description": "chaos " + it.key, "metadata": map[string]string{"chaos": "original"}}
		case u < 0.46:
			it.tool = protocol.ToolRefund
		case u < 0.68:
			it.tool = protocol.ToolMail
			it.args = map[string]any{
				"from":    map[string]string{"email": "chaos@example.com"},
				"to":      []map[string]string{{"email": fmt.Sprintf("user%d@example.com", i)}},
				"subject": "chaos " + it.key, "text": "hello from the chaos run",
			}
		case u < 0.805:
			it.tool = toolMCP
			if rng.Float64() < 0.5 {
				it.tool = toolMCPStdio
			}
			it.args = map[string]any{"to": fmt.Sprintf("user%d@example.com", i), "subject": "chaos " + it.key}
		case u < 0.835 && gated:
			it.tool = toolGated
			it.args = map[string]any{"mailbox": fmt.Sprintf("user%d", i), "reason": "chaos " + it.key}
			it.plan.Decision = drawDecision(rng)
		case u >= 0.835 && u < 0.865 && composite:
			it.tool = toolComposite
			it.plan.Compensate = rng.Float64() < compensateShare
			it.args = compositeArgs(i, it.key, 1000+rng.IntN(9000), it.plan.Compensate)
		case u >= 0.865 && u < 0.915 && crm:
			// 2% note-then-wipe, 3% accounts opened (crm.go).
			crmItem(&it, i, u < 0.885)
		default:
			it.tool = protocol.ToolWebhookPost
			target := webhookTarget
			switch u := rng.Float64(); {
			case u < 0.3:
				target, it.plan.Blind = blindTarget, true
			case webhookDefault && u < 0.8:
				target = plainTarget
			}
			it.args = map[string]any{"target": target, "path": fmt.Sprintf("/hooks/%d", i),
				"body": map[string]any{"key": it.key, "n": i}}
		}
		if rng.Float64() < 0.20 {
			it.copies = 2 + rng.IntN(3)
		}
		it.conflict = rng.Float64() < 0.04
		items[i] = it
	}
	return items
}

// conflicting returns other args for the same tool, carrying the conflict
// marker, which oncebox must refuse with 422.
func conflicting(it item) map[string]any {
	c := make(map[string]any, len(it.args))
	for k, v := range it.args {
		c[k] = v
	}
	switch it.tool {
	case protocol.ToolPaymentIntent, protocol.ToolRefund:
		c["metadata"] = map[string]string{"chaos": conflictMarker}
	case protocol.ToolMail, toolMCP, toolMCPStdio, toolComposite:
		c["subject"] = conflictMarker + " " + it.key
	case toolNoteThenWipe:
		c["ref"] = conflictMarker + "-" + it.key
	case toolOpen:
		c["name"] = conflictMarker + " " + it.key
	case toolGated:
		c["reason"] = conflictMarker + " " + it.key
	case protocol.ToolWebhookPost:
		c["path"] = "/" + conflictMarker + "/" + it.key
	}
	return c
}

// refundPicker hands out charges of this run that were not refunded yet,
// straight from the fake Stripe's records of one account.
type refundPicker struct {
	f    *fakes
	mu   sync.Mutex
	used map[string]bool
}

// pick returns refund args for an unrefunded succeeded payment intent on account
// (a tenant's own: a refund of another tenant's charge would fail) tagged by an op
// of this run, not a composite op's charge (its compensation may refund it in full),
// or false when there is none yet; madeBy is the op the payment intent is tagged with.
func (p *refundPicker) pick(account string) (args map[string]any, madeBy string, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pi := range p.f.stripeAccount(account).PaymentIntents() {
		if pi.Status != "succeeded" || pi.Metadata[vendorapi.TagKey] == "" || p.used[pi.ID] || pi.Metadata["chaos"] == stepChargeMarker {
			continue
		}
		p.used[pi.ID] = true
		return map[string]any{"payment_intent": pi.ID, "amount": 100 + pi.Amount%400, "reason": "requested_by_customer",
			"metadata": map[string]string{"chaos": "original"}}, pi.Metadata[vendorapi.TagKey], true
	}
	return nil, "", false
}

// client sends ops to the serve processes, retrying transport errors and 5xx
// with the same key on another process.
type client struct {
	http *http.Client
	// tokens are the tenants' agent tokens; a key is sent with its tenant's (bind).
	tokens []string
	// approver is the token that decides the gated ops.
	approver string
	bases    []string
	next     atomic.Uint64
	giveUp   time.Duration

	requests atomic.Int64
	retries  atomic.Int64

	// history records every call, for the linearizability check.
	history *recorder

	mu       sync.Mutex
	payloads map[string][]byte
	tenantOf map[string]int
}

// sendResult is what the API finally answered for one request.
type sendResult struct {
	status int
	body   []byte
}

// post sends one POST /v1/ops starting at process start, retrying until it
// gets an answer that is not a transport error or a 5xx.
func (c *client) post(ctx context.Context, start int, key, tool string, args map[string]any) (sendResult, error) {
	body, err := json.Marshal(map[string]any{"tool": tool, "args": args})
	if err != nil {
		return sendResult{}, fmt.Errorf("encode op: %w", err)
	}
	return c.postBody(ctx, start, key, body)
}

// remember keeps the payload first sent under key, for the replays after
// settling.
func (c *client) remember(key, tool string, args map[string]any) {
	body, err := json.Marshal(map[string]any{"tool": tool, "args": args})
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.payloads == nil {
		c.payloads = map[string][]byte{}
	}
	if _, ok := c.payloads[key]; !ok {
		c.payloads[key] = body
	}
}

// bind makes every call of key carry tenant's token.
func (c *client) bind(key string, tenant int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tenantOf == nil {
		c.tenantOf = map[string]int{}
	}
	c.tenantOf[key] = tenant
}

// tenantIndex returns the index of the tenant key is bound to; false when it is bound
// to none.
func (c *client) tenantIndex(key string) (int, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := c.tenantOf[key]
	return i, ok
}

// token returns the agent token key is sent with.
func (c *client) token(key string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokens[c.tenantOf[key]]
}

// sentPayloads returns the payload first sent under each key.
func (c *client) sentPayloads() map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.payloads)
}

// postBody is post with the body encoded.
func (c *client) postBody(ctx context.Context, start int, key string, body []byte) (sendResult, error) {
	deadline := time.Now().Add(c.giveUp)
	backoff := 50 * time.Millisecond
	var lastErr error
	client := c.history.client()
	for attempt := 0; ; attempt++ {
		base := c.bases[(start+attempt)%len(c.bases)]
		res, err := c.postOnce(ctx, client, base, key, body)
		if err == nil && res.status < 500 {
			return res, nil
		}
		if err == nil {
			err = fmt.Errorf("HTTP %d: %s", res.status, res.body)
		}
		lastErr = err
		if ctx.Err() != nil {
			return sendResult{}, ctx.Err()
		}
		if time.Now().After(deadline) {
			return sendResult{}, fmt.Errorf("key %s: gave up after %s: %w", key, c.giveUp, lastErr)
		}
		c.retries.Add(1)
		select {
		case <-ctx.Done():
			return sendResult{}, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// postOnce sends one request and records it in the history: a request without
// an answer is recorded as such (its effect unknown).
func (c *client) postOnce(ctx context.Context, client int, base, key string, body []byte) (sendResult, error) {
	call := Call{Client: client, Key: key, Payload: string(body), Start: c.history.now()}
	res, err := c.postOnceUnrecorded(ctx, base, key, body)
	call.End = c.history.now()
	if err == nil {
		call.Answer = answerOf(res.status, res.body)
	}
	c.history.add(call)
	return res, err
}

func (c *client) postOnceUnrecorded(ctx context.Context, base, key string, body []byte) (sendResult, error) {
	c.requests.Add(1)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/ops", bytes.NewReader(body))
	if err != nil {
		return sendResult{}, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token(key))
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return sendResult{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return sendResult{}, err
	}
	return sendResult{status: resp.StatusCode, body: b}, nil
}

// outcome is what the harness learned about one key.
type outcome struct {
	key            string
	tool           string
	accepted       bool
	new, replays   int
	conflictStatus int
	err            error
	// sentAt is when the key was first sent (the history's clock).
	sentAt int64
	// For a gated key: the statuses answered before any decision that were not
	// awaiting_approval, and the decision the harness got answered (decisionApprove,
	// decisionReject), if any.
	ungated []string
	decided string
	// plan is what the harness planned for the key.
	plan Plan
	// refundOf is, for a refund, the op id its payment intent is tagged with (the op
	// that made it); notOwned holds the refund's 404 answers (the payment is not one of
	// the tenant's objects), which only an asynchronous failover that lost that op
	// explains. Every other unexpected answer is in err.
	refundOf string
	notOwned error
}

// run sends it: its copies at once to different processes, then, if asked,
// a conflicting payload once the key is stored.
func (c *client) run(ctx context.Context, it item, picker *refundPicker) outcome {
	out := outcome{key: it.key, tool: it.tool, plan: it.plan}
	if it.tool == protocol.ToolRefund {
		args, madeBy, ok := picker.pick(it.account)
		if !ok {
			// No charge to refund yet: charge instead.
			it.tool = protocol.ToolPaymentIntent
			it.args = map[string]any{"amount": 2500, "currency": "usd", "payment_method": "pm_card_visa", "confirm": true,
				"description": "chaos " + it.key, "metadata": map[string]string{"chaos": "original"}}
			out.tool = it.tool
		} else {
			it.args, out.refundOf = args, madeBy
		}
	}
	c.bind(it.key, it.tenant)
	start := int(c.next.Add(1))
	out.sentAt = c.history.now()
	c.remember(it.key, it.tool, it.args)
	results := make([]sendResult, it.copies)
	errs := make([]error, it.copies)
	var wg sync.WaitGroup
	for i := range it.copies {
		wg.Go(func() { results[i], errs[i] = c.post(ctx, start+i, it.key, it.tool, it.args) })
	}
	wg.Wait()
	for i, res := range results {
		if errs[i] != nil {
			out.err = errors.Join(out.err, errs[i])
			continue
		}
		switch res.status {
		case http.StatusAccepted:
			out.accepted = true
			out.new++
		case http.StatusOK:
			out.accepted = true
			out.replays++
		case http.StatusNotFound:
			if it.tool == protocol.ToolRefund {
				out.notOwned = errors.Join(out.notOwned, fmt.Errorf("key %s (%s): HTTP %d: %s", it.key, it.tool, res.status, res.body))
				continue
			}
			fallthrough
		default:
			out.err = errors.Join(out.err, fmt.Errorf("key %s (%s): HTTP %d: %s", it.key, it.tool, res.status, res.body))
		}
	}
	if it.conflict && out.accepted {
		res, err := c.post(ctx, start+it.copies, it.key, it.tool, conflicting(it))
		if err != nil {
			out.err = errors.Join(out.err, err)
		} else {
			out.conflictStatus = res.status
		}
	}
	if it.tool == toolGated {
		c.gate(ctx, start, it, results, &out)
	}
	return out
}
