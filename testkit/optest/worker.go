package optest

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakewebhook"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// WebhookTool is the generic HTTP tool as the dispatch tests use it: args
// {"target","path","body"}, target required.
func WebhookTool() vendorapi.Tool {
	return vendorapi.Tool{
		Name:   "webhook.post",
		Vendor: "webhook",
		Validate: func(args json.RawMessage) error {
			var a struct {
				Target string `json:"target"`
			}
			if err := json.Unmarshal(args, &a); err != nil || a.Target == "" {
				return &vendorapi.ValidationError{Field: "args.target", Message: "is required"}
			}
			return nil
		},
	}
}

// MoneyTool is a tool with an amount: args {"amount": minor units, "currency": code};
// an absent amount is "no amount" (like a full refund).
func MoneyTool() vendorapi.Tool {
	type args struct {
		Amount   int64  `json:"amount"`
		Currency string `json:"currency"`
	}
	return vendorapi.Tool{
		Name:   "test.money",
		Vendor: "money",
		Validate: func(raw json.RawMessage) error {
			var a args
			if err := json.Unmarshal(raw, &a); err != nil {
				return &vendorapi.ValidationError{Field: "args", Message: "must be a JSON object"}
			}
			return nil
		},
		Amount: func(raw json.RawMessage) (int64, string, bool) {
			var a args
			if err := json.Unmarshal(raw, &a); err != nil || a.Amount == 0 {
				return 0, "", false
			}
			return a.Amount, a.Currency, true
		},
	}
}

// WorkerOpts are the settings of NewWorkerOutbox's Outbox that a test changes.
type WorkerOpts struct {
	// Native makes the webhook vendor send Idempotency-Key (a receiver that honours it
	// deduplicates a resend).
	Native       bool
	RescueAfter  time.Duration
	JobTimeout   time.Duration
	RetryBackoff time.Duration
	MaxAttempts  int
	ClientID     string
	// Batched completes jobs through River's batched completer
	// (Config.BatchedCompletion, the default) instead of JobCompleteTx; the tests
	// state it (false: JobCompleteTx).
	Batched bool
	// ClaimCommit commits a claim before every vendor call (Config.ClaimCommit), for
	// the tests that pin the locking path's token fence.
	ClaimCommit bool
	// Mixed is Config.MixedVersions.
	Mixed func() bool
}

// NewWorkerOutbox builds an Outbox that dispatches webhook.post to targetURL's target
// "crm" (not started): jobs time out after 10 s and are rescued after a minute unless o
// says otherwise, and retried after 100 ms. A nil tb (a test's child process, which has
// none) panics on an error instead of failing a test.
func NewWorkerOutbox(tb testing.TB, pool *pgxpool.Pool, targetURL string, o WorkerOpts) *outbox.Outbox {
	check := func(err error) {
		if err != nil && tb == nil {
			panic(err)
		}
		if err != nil {
			tb.Helper()
			require.NoError(tb, err)
		}
	}
	v, err := webhook.New(webhook.Config{
		Targets:           map[string]webhook.Target{"crm": {BaseURL: targetURL, SecretHeader: "X-Secret", Secret: "s3cret"}},
		Timeout:           orDefault(o.JobTimeout, 5*time.Second),
		NativeIdempotency: o.Native,
		LookupPath:        "/_lookup",
	})
	check(err)
	reg, err := outbox.NewRegistry(WebhookTool())
	check(err)
	ob, err := outbox.New(outbox.Config{
		Pool:                 pool,
		Tools:                reg,
		Vendors:              []vendorapi.Vendor{v},
		Queues:               map[string]dispatch.QueueConfig{"webhook": {MaxWorkers: 10, JobTimeout: orDefault(o.JobTimeout, 10*time.Second)}},
		RescueStuckJobsAfter: orDefault(o.RescueAfter, time.Minute),
		RetryBackoff:         func(int) time.Duration { return orDefault(o.RetryBackoff, 100*time.Millisecond) },
		MaxAttempts:          o.MaxAttempts,
		ClientID:             o.ClientID,
		BatchedCompletion:    &o.Batched,
		ClaimCommit:          o.ClaimCommit,
		MixedVersions:        o.Mixed,
	})
	check(err)
	return ob
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// HonouringTarget serves a fake webhook receiver that deduplicates by Idempotency-Key,
// until the test ends.
func HonouringTarget(tb testing.TB) (*fakewebhook.Server, *httptest.Server) {
	tb.Helper()
	fake := fakewebhook.New(fakewebhook.Config{HonourKeys: true})
	srv := httptest.NewServer(fake)
	tb.Cleanup(srv.Close)
	return fake, srv
}

// PlainTarget serves a fake webhook receiver that does not deduplicate keys, until the
// test ends.
func PlainTarget(tb testing.TB) (*fakewebhook.Server, *httptest.Server) {
	tb.Helper()
	fake := fakewebhook.New(fakewebhook.Config{})
	srv := httptest.NewServer(fake)
	tb.Cleanup(srv.Close)
	return fake, srv
}

// WebhookArgs are webhook.post's arguments for a POST of {"n": n} to crm's /charge.
func WebhookArgs(n int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"target":"crm","path":"/charge","body":{"n":%d}}`, n))
}
