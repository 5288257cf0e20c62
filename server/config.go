package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// Roles says which parts of oncebox a process runs.
type Roles struct {
	// API serves the HTTP API, MCP, metrics and River UI.
	API bool
	// Worker dispatches ops to vendors.
	Worker bool
	// Periodic runs the reconcile sweep and the TTL purge (River elects one leader
	// among the processes that run them).
	Periodic bool
}

// Config is everything `oncebox serve` can be told. cmd/oncebox documents every field's
// flag and environment variable.
type Config struct {
	DatabaseURL string
	Addr        string
	Roles       Roles

	MaxAttempts          int
	BatchedCompletion    bool
	RetryMaxBackoff      time.Duration
	RescueStuckJobsAfter time.Duration
	FetchCooldown        time.Duration
	FetchPollInterval    time.Duration
	ShutdownGrace        time.Duration
	// Queues configures each vendor's queue (workers, job timeout).
	Queues map[string]outbox.QueueConfig

	StripeAPIKey    string
	StripeAPIBase   string
	StripeTimeout   time.Duration
	StripeSearchLag time.Duration

	SendGridAPIKey       string
	SendGridAPIBase      string
	SendGridTimeout      time.Duration
	SendGridLookupLag    time.Duration
	SendGridActivityRate int

	WebhookTargets    map[string]webhook.Target
	WebhookTimeout    time.Duration
	WebhookNativeKeys bool
	WebhookLookupPath string

	RefundApprovalAbove int64
	TTL                 time.Duration
	TombstoneTTL        time.Duration
	PurgeInterval       time.Duration
	PurgeBatch          int
	RedactMail          bool

	ReconcileInterval     time.Duration
	ReconcileSweepTimeout time.Duration
	ReconcileRetryAfter   time.Duration
	ResendOnNone          map[string]bool
	// StartupWait is how long New waits for Postgres to answer before giving up.
	StartupWait time.Duration

	MaxBodyBytes int64
	MaxWait      time.Duration
	MCPWait      time.Duration
	AdminToken   string
	// AuthCacheTTL is how long a successful token check is remembered (0: never).
	AuthCacheTTL time.Duration
	// SealKey is the base64 of 32 bytes that encrypt the full arguments of redacted
	// tools until their op is terminal (see outbox.Config.SealKey).
	SealKey string
}

// Defaults returns the zero-configuration defaults.
func Defaults() Config {
	return Config{
		Addr:                 "127.0.0.1:8080",
		Roles:                Roles{API: true, Worker: true, Periodic: true},
		MaxAttempts:          10,
		RetryMaxBackoff:      5 * time.Minute,
		RescueStuckJobsAfter: 2 * time.Minute,
		FetchCooldown:        5 * time.Millisecond,
		FetchPollInterval:    500 * time.Millisecond,
		ShutdownGrace:        30 * time.Second,
		Queues: map[string]outbox.QueueConfig{
			"stripe":   {MaxWorkers: 50, JobTimeout: 30 * time.Second},
			"sendgrid": {MaxWorkers: 50, JobTimeout: 30 * time.Second},
			"webhook":  {MaxWorkers: 50, JobTimeout: 30 * time.Second},
		},
		StripeAPIBase:         "https://api.stripe.com",
		StripeTimeout:         20 * time.Second,
		StripeSearchLag:       time.Minute,
		SendGridAPIBase:       "https://api.sendgrid.com",
		SendGridTimeout:       10 * time.Second,
		SendGridLookupLag:     10 * time.Minute,
		SendGridActivityRate:  6,
		WebhookTimeout:        10 * time.Second,
		TTL:                   outbox.DefaultTTL,
		TombstoneTTL:          30 * 24 * time.Hour,
		PurgeInterval:         time.Minute,
		PurgeBatch:            1000,
		RedactMail:            true,
		ReconcileInterval:     30 * time.Second,
		ReconcileSweepTimeout: 90 * time.Second,
		ReconcileRetryAfter:   time.Minute,
		StartupWait:           time.Minute,
		MaxBodyBytes:          64 << 10,
		MaxWait:               60 * time.Second,
		MCPWait:               10 * time.Second,
	}
}

func (c *Config) validate() error {
	if c.DatabaseURL == "" {
		return errors.New("no database: set DATABASE_URL (or run `oncebox dev`, which finds or starts a Postgres)")
	}
	if !c.Roles.API && !c.Roles.Worker && !c.Roles.Periodic {
		return errors.New("no role to run: --roles must name at least one of api, worker, periodic")
	}
	if c.StripeTimeout <= 0 || c.SendGridTimeout <= 0 || c.WebhookTimeout <= 0 {
		return errors.New("vendor timeouts must be positive")
	}
	for name, q := range c.Queues {
		if q.JobTimeout > 0 && q.JobTimeout >= c.RescueStuckJobsAfter {
			return fmt.Errorf("queue %q: job timeout %s must be shorter than --rescue-after %s", name, q.JobTimeout, c.RescueStuckJobsAfter)
		}
	}
	if c.SendGridTimeout >= c.Queues["sendgrid"].JobTimeout && c.Queues["sendgrid"].JobTimeout > 0 {
		return fmt.Errorf("--sendgrid-timeout %s must be shorter than the sendgrid job timeout %s", c.SendGridTimeout, c.Queues["sendgrid"].JobTimeout)
	}
	return nil
}
