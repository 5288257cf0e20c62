package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/doors/console"
	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/internal/groupcommit"
	"github.com/oncebox/oncebox/internal/pglisten"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/vendorapi"
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

// Config is everything `oncebox serve` can be told. Each field is one flag and one
// environment variable of cmd/oncebox (`oncebox config` lists them); Defaults returns
// the zero-configuration values.
type Config struct {
	// DatabaseURL is the Postgres URL (DATABASE_URL). Required.
	DatabaseURL string
	// Addr is the address of the HTTP API, MCP, /metrics and River UI. Defaults to
	// 127.0.0.1:8080.
	Addr string
	// Listener, when set, is where the API is served, bound by the caller: Addr is then
	// not listened on (`oncebox dev` holds its port before it touches the database, so
	// that a second dev on the same port changes nothing). Run closes it when it stops,
	// as it does its own. Not a flag. Optional.
	Listener net.Listener
	// HealthAddr, when set, is a second address serving only the probes GET /livez and
	// GET /readyz (the API address serves them too), so that a process without the API
	// role has probes. Defaults to "" (none).
	HealthAddr string
	// Roles says what this process runs. Defaults to all three.
	Roles Roles
	// TracerProvider traces enqueues, dispatches and status changes (cmd/oncebox sets
	// it from the OTEL_* environment variables: internal/tracing). Nil: tracing is off.
	TracerProvider trace.TracerProvider
	// ReadOnly builds a server for a command that reads ops and asks vendors but
	// records and sends nothing (oncebox lookup, review list, reconcile report): it is
	// not warned that no vendor is configured, and needs no seal key for the tools that
	// redact. Not a flag. Defaults to false.
	ReadOnly bool

	// MaxAttempts is how many retryable failures an op may see before needs_review.
	// Defaults to dispatch.DefaultMaxAttempts.
	MaxAttempts int
	// BatchedCompletion lets River's completer finish dispatch jobs (see
	// outbox.Config.BatchedCompletion). Defaults to true.
	BatchedCompletion bool
	// ClaimCommit commits a claim before every vendor call (see
	// outbox.Config.ClaimCommit). Defaults to false: a clean run's claim is River's fetch.
	ClaimCommit bool
	// GroupCommitOps bounds the enqueues (HTTP, MCP) committed together in one
	// transaction (outbox.GroupCommit.MaxOps); 0 or 1 commits each on its own. Defaults
	// to 32.
	GroupCommitOps int
	// GroupCommitters is how many group transactions may be open at once
	// (outbox.GroupCommit.Committers). Defaults to 4.
	GroupCommitters int
	// AdmissionReadTimeout bounds each vendor read a new op's admission makes, before
	// its transaction (outbox.Config.AdmissionReadTimeout). Defaults to 5 seconds.
	AdmissionReadTimeout time.Duration
	// RetryMaxBackoff caps the wait between attempts after a retryable error. Defaults
	// to 5 minutes.
	RetryMaxBackoff time.Duration
	// RescueStuckJobsAfter is River's horizon for rescuing a job whose worker vanished.
	// Defaults to 2 minutes.
	RescueStuckJobsAfter time.Duration
	// FetchCooldown and FetchPollInterval tune River's fetching. Default to 5 ms and
	// 500 ms.
	FetchCooldown     time.Duration
	FetchPollInterval time.Duration
	// ShutdownGrace is how long running dispatches may finish after SIGTERM. Defaults
	// to 30 seconds.
	ShutdownGrace time.Duration
	// Queues configures each vendor's queue (workers, job timeout). Defaults to 50
	// workers and 30 seconds per vendor.
	Queues map[string]dispatch.QueueConfig

	// StripeAPIKey enables the Stripe tools. StripeAPIBase defaults to Stripe's API,
	// StripeTimeout to 20 seconds, StripeSearchLag to 1 minute.
	StripeAPIKey    string
	StripeAPIBase   string
	StripeTimeout   time.Duration
	StripeSearchLag time.Duration

	// SendGridAPIKey enables the mail tool. SendGridAPIBase defaults to SendGrid's API,
	// SendGridTimeout to 10 seconds, SendGridLookupLag to 10 minutes and
	// SendGridActivityRate to 6 requests a minute.
	SendGridAPIKey       string
	SendGridAPIBase      string
	SendGridTimeout      time.Duration
	SendGridLookupLag    time.Duration
	SendGridActivityRate int

	// StripeWebhookSecret is the signing secret (whsec_…) of the Stripe webhook endpoint
	// POST /v1/vendor-events/stripe; empty leaves that endpoint off and Stripe lookups
	// without events.
	StripeWebhookSecret string
	// SendGridEventPublicKey is the Event Webhook's verification key (base64 ECDSA);
	// empty leaves POST /v1/vendor-events/sendgrid off and mail lookups without events.
	SendGridEventPublicKey string
	// SendGridEventTolerance is how far an Event Webhook timestamp may be from now.
	// Defaults to 5 minutes.
	SendGridEventTolerance time.Duration
	// VendorEventLag is how long after a send its events may still be on their way:
	// an op whose vendor cannot be asked is checked again until then, instead of going
	// to needs_review. Defaults to 10 minutes.
	VendorEventLag time.Duration
	// VendorEventRetention is how long vendor events are kept. Defaults to 30 days.
	VendorEventRetention time.Duration
	// VendorEventMaxBodyBytes bounds one vendor event request. Defaults to 4 MiB.
	VendorEventMaxBodyBytes int64

	// WebhookTargets is the allow-list of the webhook tool; empty disables it.
	// WebhookTimeout defaults to 10 seconds; WebhookNativeKeys to false; an empty
	// WebhookLookupPath sends unknown webhook outcomes to needs_review.
	// WebhookLookupLag, how long a delivery may stay invisible to the lookup path,
	// defaults to 30 seconds (the webhook job timeout): an empty answer is trusted
	// only that long after the last send. Without native keys it must be at least
	// the webhook job timeout (see validate).
	WebhookTargets    map[string]webhook.Target
	WebhookTimeout    time.Duration
	WebhookNativeKeys bool
	WebhookLookupPath string
	WebhookLookupLag  time.Duration

	// Vendors are vendor adapters of the embedding program's own (not flags): a Go
	// program that reuses this package registers them here, with their tools in
	// Tools. See examples/custom-vendor.
	Vendors []vendorapi.Vendor
	// Tools are the tools of Vendors, with what MCP and GET /v1/tools show of them.
	Tools []CustomTool

	// ToolsFile is the tool catalog (package catalog), YAML or JSON: the operator's own
	// read, write and unsafe tools over HTTP targets. Empty: none.
	ToolsFile string
	// TenantCatalogs is a folder of tenants' own catalogs: <name>.yaml is the catalog
	// of the tenant called name, loaded, checked and reloaded with ToolsFile, and
	// offered only to that tenant (see catalog.Merge). Empty: none.
	TenantCatalogs string
	// TenantUpstreamCommands are the programs, as absolute paths, a tenant's own
	// catalog may run as a stdio upstream (command:), with whatever args its file
	// gives. Defaults to none: a tenant's file that names a command is refused before
	// anything is started.
	TenantUpstreamCommands []string
	// TenantEgressAllow are the address ranges a tenant's own targets and upstreams
	// may connect to although the egress policy refuses them (loopback, link-local,
	// private, unspecified and multicast ranges; vendorhttp.RefusedRanges). Defaults to
	// none. The installation's catalog (ToolsFile) is not confined.
	TenantEgressAllow []netip.Prefix

	// RefundApprovalAbove makes larger refunds wait for approval; 0 means never. It is
	// shorthand for an ApprovalPolicy rule of stripe.refund, mode above, {"*": N}; a
	// stripe.refund rule in ApprovalPolicy wins.
	RefundApprovalAbove int64
	// ApprovalPolicy is the process-wide default approval policy per tool; a tenant's
	// own rules override it tool by tool.
	ApprovalPolicy governance.ApprovalPolicy
	// ApprovalExpiry is how long an op waits for a decision before it is rejected with
	// the reason "approval expired". Defaults to 72 hours.
	ApprovalExpiry time.Duration
	// Budgets bound what agents do without a person, per tenant (or token, or
	// conversation) and window.
	Budgets []governance.Budget
	// NotifyURL, when set, receives a signed JSON POST whenever an op starts waiting
	// for approval; NotifySecret signs it (required with NotifyURL); NotifyLinkBase
	// prefixes the op's link.
	NotifyURL, NotifySecret, NotifyLinkBase string
	// NotifyTimeout bounds one notification POST. Defaults to 10 seconds.
	NotifyTimeout time.Duration
	// TTL is how long ops are kept. Defaults to 72 hours.
	TTL time.Duration
	// ToolTTL overrides TTL per tool name, such as "stripe.refund". Optional.
	ToolTTL map[string]time.Duration
	// TombstoneTTL is how long a purged op's key is remembered. Defaults to 30 days.
	TombstoneTTL time.Duration
	// PurgeInterval and PurgeBatch drive the TTL purge. Default to 1 minute and 1,000.
	PurgeInterval time.Duration
	PurgeBatch    int
	// RedactMail redacts mail addresses and bodies in stored args. Defaults to true.
	RedactMail bool

	// ReconcileInterval is how often the sweeper runs. Defaults to 30 seconds.
	ReconcileInterval time.Duration
	// ReconcileSweepTimeout bounds one sweep. Defaults to 90 seconds.
	ReconcileSweepTimeout time.Duration
	// ReconcileRetryAfter is the pause after a failed vendor lookup. Defaults to 1
	// minute.
	ReconcileRetryAfter time.Duration
	// ReconcileBatch bounds the ops one sweep looks at. Defaults to 100.
	ReconcileBatch int
	// ReconcileConcurrency is how many lookups one sweep runs at once. Defaults to 4.
	ReconcileConcurrency int
	// ReconcileStuckMargin is how long past its vendor's job timeout a dispatching op
	// with no running job waits before the sweeper takes it. Defaults to 30 seconds.
	ReconcileStuckMargin time.Duration
	// ResendOnNone says, per vendor, whether an op the vendor holds nothing for is
	// resent. Defaults to true for every vendor.
	ResendOnNone map[string]bool
	// StartupWait is how long New waits for Postgres to answer before giving up.
	// Defaults to 1 minute.
	StartupWait time.Duration

	// MaxBodyBytes bounds POST /v1/ops bodies. Defaults to api.DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxWait caps ?wait= on the HTTP API. Defaults to 60 seconds.
	MaxWait time.Duration
	// MCPWait is how long an MCP tool call waits for the vendor's answer. Defaults to
	// 10 seconds.
	MCPWait time.Duration
	// HTTPReadTimeout bounds reading a whole request, body included. Defaults to 30
	// seconds.
	HTTPReadTimeout time.Duration
	// HTTPWriteTimeout bounds a request from the end of its headers to the end of the
	// answer; it must be longer than MaxWait and MCPWait so that a long poll answers.
	// MCP's standalone event streams are exempt. Defaults to 90 seconds.
	HTTPWriteTimeout time.Duration
	// HTTPIdleTimeout is how long a kept-alive connection may wait for its next
	// request. Defaults to 2 minutes.
	HTTPIdleTimeout time.Duration
	// MCPDedupeWindows is, per tool, how long identical MCP calls that name no
	// conversation are one op across sessions and processes; 0 turns it off. Defaults
	// to mcpserver.DefaultDedupeWindows.
	MCPDedupeWindows map[string]time.Duration
	// APIDBConns is the size of the API role's own Postgres pool (requests, token
	// checks, long polls, MCP, /metrics, River UI), apart from the workers' pool, so
	// that no load on the API takes connections from dispatch. Defaults to 10.
	APIDBConns int
	// MaxWaitsPerTenant caps the ?wait= requests one tenant may hold open in one
	// process; past it they are answered 429 with Retry-After. Defaults to 100.
	MaxWaitsPerTenant int
	// Cells are the installation's cells other than the home cell (DATABASE_URL), as
	// name=postgres-URL pairs separated by commas (--cells, docs/scaling.md): each is
	// registered first with `oncebox cell add`. Empty, the default: one cell, today's
	// installation. NewCells serves them; New refuses them.
	Cells string
	// CellDirectoryRefresh is how often a process with cells reads the directory again
	// (which cell holds which tenant). Defaults to 1s.
	CellDirectoryRefresh time.Duration
	// CellStartupWait is how long a process with cells waits, at its start, for a cell
	// other than the home cell to answer; past it that cell is started in the background
	// (tried again for as long each time) and its tenants are answered 503
	// cell-unavailable meanwhile, while every other cell serves. Defaults to 5s.
	CellStartupWait time.Duration
	// embedded is set for a cell's Server inside Cells: the router in front serves its
	// handler and its probes.
	embedded bool
	// MaxAuditExports caps the audit exports (GET /v1/audit and the console's
	// downloads, together) one process streams at once, each on a connection of the
	// API's pool; past it they are answered 429 with
	// Retry-After. Keep it below APIDBConns. Defaults to 2.
	MaxAuditExports int
	// MCPAllowedOrigins are browser origins allowed to call /mcp besides PublicURL's and
	// loopback ones; any other Origin header is refused with 403 (mcpserver's
	// Config.AllowedOrigins). Defaults to none.
	MCPAllowedOrigins []string
	// MCPSessionIdleTimeout closes an MCP session over HTTP that has seen no request for
	// this long. Defaults to 5 minutes.
	MCPSessionIdleTimeout time.Duration
	// MCPMaxSessionsPerTenant caps the MCP sessions one tenant may hold open in one
	// process. Defaults to 100.
	MCPMaxSessionsPerTenant int
	// OAuthIssuer is the issuer of an external OAuth 2.1 authorization server whose
	// access tokens (JWTs, checked against its published keys) /mcp and the HTTP API
	// accept besides oncebox's own tokens (--oauth-issuer). Defaults to none: only
	// oncebox's tokens.
	OAuthIssuer string
	// OAuthAudience is this server's resource identifier, which access tokens must name
	// in aud (RFC 8707) and the protected resource metadata names (--oauth-audience).
	// Defaults to PublicURL.
	OAuthAudience string
	// OAuthTenantClaim is the access token claim naming the oncebox tenant
	// (--oauth-tenant-claim). Defaults to "oncebox_tenant".
	OAuthTenantClaim string
	// PublicURL is the URL people and agents reach this server at (--public-url), e.g.
	// https://oncebox.example.com. When it is https, the console's cookies are Secure
	// and every answer carries Strict-Transport-Security, even though oncebox itself
	// serves plain HTTP behind the proxy that ends TLS. Defaults to none.
	PublicURL string
	// TrustForwardedProto takes X-Forwarded-Proto: https for a request made over
	// HTTPS (Secure cookies, HSTS). Off by default: only a proxy in front of every
	// request, setting the header itself, makes it true.
	TrustForwardedProto bool
	// ConsoleSessionTTL is how long a sign-in to the web console (/console/) lasts.
	// Defaults to console.DefaultSessionTTL (12 hours).
	ConsoleSessionTTL time.Duration
	// UnavailableRetryAfter is the Retry-After of the 503 answered while Postgres
	// cannot be reached. Defaults to 5 seconds.
	UnavailableRetryAfter time.Duration
	// MetricsRefresh is how old the database gauges of /metrics (ops by status, queue
	// depth) may get before a scrape reads them again in the background; a scrape
	// itself never waits for Postgres. Defaults to 15 seconds.
	MetricsRefresh time.Duration
	// AdminToken opens River UI and, when set, guards /metrics (which is open without
	// it). API tokens with the operator role open both as well (a tenant's admin token does not).
	AdminToken string
	// AuthCacheTTL is how long a successful token check may be remembered, saving a
	// query per API request. A check is remembered only while the process listens for
	// token changes (tenant.Store.Watch): a token revoked or changed anywhere stops
	// working when Postgres's notification arrives, and this bounds a lost one. Defaults
	// to 5 seconds; 0 asks Postgres on every request.
	AuthCacheTTL time.Duration
	// ListenHeartbeat is how often the listening connection (internal/pglisten) sends a
	// round trip, which must come back within as long: a connection that stalls without
	// failing then counts as lost within about twice this, so the token cache empties
	// and stops caching, and long polls poll, until it listens again. Defaults to
	// pglisten.DefaultHeartbeat (1 second); 0 turns heartbeats off.
	ListenHeartbeat time.Duration
	// DeadSessionTimeout bounds how long a session of this process may outlive its
	// network: Postgres ends it after this long idle inside a transaction
	// (idle_in_transaction_session_timeout) or once its peer stops answering (TCP
	// keepalives, tcp_user_timeout), and this process drops such a connection likewise,
	// so a cut never holds a row lock or the liveness lock for hours. Settings the
	// DATABASE_URL names are kept. Defaults to DefaultDeadSessionTimeout (60 seconds); 0
	// leaves Postgres's and the system's settings.
	DeadSessionTimeout time.Duration
	// AuditSigningKey is the base64 of the 32-byte ed25519 seed that signs the audit
	// log's checkpoints (docs/audit.md). Optional: without it checkpoints are unsigned.
	AuditSigningKey string
	// AuditRetention is how long audit entries are kept, dropped by whole months.
	// Defaults to 400 days.
	AuditRetention time.Duration
	// AuditOTelLogs streams the sealed audit log as OpenTelemetry log records to a SIEM
	// from the periodic role (docs/audit.md, "Streaming to a SIEM"), through the log
	// exporter the OTEL_* environment variables configure: cmd/oncebox then sets
	// AuditLogExporter. Defaults to false, so that tracing does not ship the audit log
	// unasked.
	AuditOTelLogs bool
	// AuditOTelLogsInterval is how often the stream sends the entries sealed since.
	// Defaults to 5 seconds.
	AuditOTelLogsInterval time.Duration
	// AuditLogExporter, with the periodic role, receives the audit log's records
	// (audit.Streamer); the server owns it and shuts it down when it stops. Not a flag:
	// cmd/oncebox builds it from OTEL_* when AuditOTelLogs is on. Nil: not streamed.
	AuditLogExporter sdklog.Exporter
	// AuditLogResource describes this process in those records. Not a flag. Defaults to
	// the OpenTelemetry SDK's default resource.
	AuditLogResource *resource.Resource

	// SealKey is the base64 of 32 bytes that encrypt the full arguments of redacted
	// tools until their op is terminal (see outbox.Config.SealKey). Optional.
	SealKey string
}

// CustomTool is a tool of a vendor of the embedding program's own (Config.Vendors).
type CustomTool struct {
	// Tool is the outbox tool; its Vendor names one of Config.Vendors.
	Tool vendorapi.Tool
	// Description tells an agent what the tool does (MCP, GET /v1/tools).
	Description string
	// InputSchema is the JSON Schema of the arguments, its root of type object.
	InputSchema json.RawMessage
}

// Defaults returns the zero-configuration defaults.
func Defaults() Config {
	return Config{
		Addr:                 "127.0.0.1:8080",
		Roles:                Roles{API: true, Worker: true, Periodic: true},
		MaxAttempts:          dispatch.DefaultMaxAttempts,
		BatchedCompletion:    true,
		GroupCommitOps:       groupcommit.ServeMaxOps,
		GroupCommitters:      groupcommit.DefaultCommitters,
		AdmissionReadTimeout: outbox.DefaultAdmissionReadTimeout,
		AuthCacheTTL:         tenant.DefaultCacheTTL,
		ListenHeartbeat:      pglisten.DefaultHeartbeat,
		DeadSessionTimeout:   DefaultDeadSessionTimeout,
		ApprovalExpiry:       outbox.DefaultApprovalExpiry,
		NotifyTimeout:        10 * time.Second,
		RetryMaxBackoff:      5 * time.Minute,
		RescueStuckJobsAfter: dispatch.DefaultRescueStuckJobsAfter,
		FetchCooldown:        5 * time.Millisecond,
		FetchPollInterval:    500 * time.Millisecond,
		ShutdownGrace:        30 * time.Second,
		Queues: map[string]dispatch.QueueConfig{
			"stripe":   {MaxWorkers: dispatch.DefaultMaxWorkers, JobTimeout: dispatch.DefaultJobTimeout},
			"sendgrid": {MaxWorkers: dispatch.DefaultMaxWorkers, JobTimeout: dispatch.DefaultJobTimeout},
			"webhook":  {MaxWorkers: dispatch.DefaultMaxWorkers, JobTimeout: dispatch.DefaultJobTimeout},
		},
		StripeAPIBase:           "https://api.stripe.com",
		StripeTimeout:           20 * time.Second,
		StripeSearchLag:         time.Minute,
		SendGridAPIBase:         "https://api.sendgrid.com",
		SendGridTimeout:         10 * time.Second,
		SendGridLookupLag:       10 * time.Minute,
		SendGridActivityRate:    6,
		SendGridEventTolerance:  5 * time.Minute,
		VendorEventLag:          10 * time.Minute,
		VendorEventRetention:    30 * 24 * time.Hour,
		VendorEventMaxBodyBytes: 4 << 20,
		WebhookTimeout:          10 * time.Second,
		WebhookLookupLag:        30 * time.Second,
		TTL:                     vendorapi.DefaultTTL,
		TombstoneTTL:            30 * 24 * time.Hour,
		PurgeInterval:           time.Minute,
		PurgeBatch:              1000,
		AuditRetention:          400 * 24 * time.Hour,
		AuditOTelLogsInterval:   5 * time.Second,
		RedactMail:              true,
		ReconcileInterval:       30 * time.Second,
		ReconcileSweepTimeout:   90 * time.Second,
		ReconcileRetryAfter:     time.Minute,
		ReconcileBatch:          100,
		ReconcileConcurrency:    4,
		ReconcileStuckMargin:    30 * time.Second,
		StartupWait:             time.Minute,
		MaxBodyBytes:            api.DefaultMaxBodyBytes,
		MaxWait:                 60 * time.Second,
		MCPWait:                 mcpserver.DefaultWait,
		HTTPReadTimeout:         30 * time.Second,
		HTTPWriteTimeout:        90 * time.Second,
		HTTPIdleTimeout:         2 * time.Minute,
		MCPDedupeWindows:        mcpserver.DefaultDedupeWindows(),
		MetricsRefresh:          15 * time.Second,
		UnavailableRetryAfter:   5 * time.Second,
		MCPSessionIdleTimeout:   5 * time.Minute,
		MCPMaxSessionsPerTenant: 100,
		ConsoleSessionTTL:       console.DefaultSessionTTL,
		APIDBConns:              10,
		MaxWaitsPerTenant:       100,
		MaxAuditExports:         2,
		CellDirectoryRefresh:    time.Second,
		CellStartupWait:         5 * time.Second,
	}
}

// validate checks the settings one after the other and returns the first that is wrong,
// saying how to fix it.
func (c *Config) validate() error {
	if c.DatabaseURL == "" {
		return errors.New("no database: set DATABASE_URL (or run `oncebox dev`, which finds or starts a Postgres)")
	}
	if c.Cells != "" && !c.embedded {
		return errors.New("--cells: this process serves several cells: build it with NewCells")
	}
	if !c.Roles.API && !c.Roles.Worker && !c.Roles.Periodic {
		return errors.New("no role to run: --roles must name at least one of api, worker, periodic")
	}
	if c.StripeTimeout <= 0 || c.SendGridTimeout <= 0 || c.WebhookTimeout <= 0 {
		return errors.New("vendor timeouts must be positive")
	}
	if err := c.validateToolTTL(); err != nil {
		return err
	}
	if c.VendorEventLag < 0 || c.SendGridEventTolerance < 0 {
		return errors.New("--vendor-event-lag and --sendgrid-event-tolerance must not be negative")
	}
	if err := c.validateDedupeWindows(); err != nil {
		return err
	}
	if c.StripeSearchLag < 0 || c.SendGridLookupLag < 0 || c.WebhookLookupLag < 0 {
		return errors.New("vendor lookup lags must not be negative")
	}
	for name, q := range c.Queues {
		if q.JobTimeout > 0 && q.JobTimeout >= c.RescueStuckJobsAfter {
			return fmt.Errorf("queue %q: job timeout %s must be shorter than --rescue-after %s", name, q.JobTimeout, c.RescueStuckJobsAfter)
		}
	}
	if c.Roles.API && c.MCPWait >= c.ShutdownGrace {
		// An MCP tool call in flight at SIGTERM must be able to answer within the grace.
		return fmt.Errorf("--mcp-wait %s must be shorter than --shutdown-grace %s", c.MCPWait, c.ShutdownGrace)
	}
	if c.MCPSessionIdleTimeout <= 0 || c.MCPMaxSessionsPerTenant < 1 {
		return errors.New("--mcp-session-idle-timeout must be positive and --mcp-max-sessions-per-tenant at least 1")
	}
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("--public-url %q: want an absolute http or https URL, e.g. https://oncebox.example.com", c.PublicURL)
		}
	}
	if c.OAuthIssuer != "" && c.oauthAudience() == "" {
		return errors.New("--oauth-issuer needs --oauth-audience (or --public-url): the resource URL access tokens must be issued for, e.g. https://oncebox.example.com")
	}
	if c.ConsoleSessionTTL < time.Minute {
		return errors.New("--console-session-ttl must be at least 1m")
	}
	if c.UnavailableRetryAfter < time.Second {
		return errors.New("--unavailable-retry-after must be at least 1s")
	}
	if c.AuditOTelLogs && c.AuditOTelLogsInterval <= 0 {
		return errors.New("--audit-otel-logs-interval must be positive, such as 5s")
	}
	if c.MetricsRefresh <= 0 {
		return errors.New("--metrics-refresh must be positive")
	}
	for _, cmd := range c.TenantUpstreamCommands {
		if !filepath.IsAbs(cmd) || filepath.Clean(cmd) != cmd {
			return fmt.Errorf("--tenant-upstream-commands: %q is not a clean absolute path, such as /usr/local/bin/crm-mcp (a tenant's command: must name it exactly)", cmd)
		}
	}
	if c.Roles.API {
		if err := c.validateHTTP(); err != nil {
			return err
		}
	}
	if c.Roles.Periodic && c.ReconcileSweepTimeout >= c.RescueStuckJobsAfter {
		// River would rescue a sweep still running, and two sweeps would overlap.
		return fmt.Errorf("--reconcile-sweep-timeout %s must be shorter than --rescue-after %s", c.ReconcileSweepTimeout, c.RescueStuckJobsAfter)
	}
	return c.validateLookupLags()
}

// validateToolTTL checks --tool-ttl: known tools, positive durations.
func (c *Config) validateToolTTL() error {
	for name, d := range c.ToolTTL {
		if !slices.Contains([]string{protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolMail, protocol.ToolWebhookPost}, name) {
			return fmt.Errorf("--tool-ttl: unknown tool %q (the tools are %s, %s, %s and %s)", name,
				protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolMail, protocol.ToolWebhookPost)
		}
		if d <= 0 {
			return fmt.Errorf("--tool-ttl: %s must be positive", name)
		}
	}
	return nil
}

// validateDedupeWindows checks --mcp-dedupe-window: known tools, each window between 0
// and the tool's TTL.
func (c *Config) validateDedupeWindows() error {
	for name, d := range c.MCPDedupeWindows {
		if !slices.Contains([]string{protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolMail, protocol.ToolWebhookPost}, name) {
			return fmt.Errorf("--mcp-dedupe-window: unknown tool %q (the tools are %s, %s, %s and %s)", name,
				protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolMail, protocol.ToolWebhookPost)
		}
		ttl := c.TTL
		if t, ok := c.ToolTTL[name]; ok {
			ttl = t
		}
		if d < 0 || (d > ttl && d != mcpserver.DefaultDedupeWindow) { // the default is capped by the TTL
			// An op purged while its window is open would let the same call run again.
			return fmt.Errorf("--mcp-dedupe-window: %s must be between 0 and the tool's TTL %s, not %s", name, ttl, d)
		}
	}
	return nil
}

// validateHTTP checks the settings of the API role's HTTP server.
func (c *Config) validateHTTP() error {
	if c.APIDBConns < 1 || c.MaxWaitsPerTenant < 1 {
		return errors.New("--api-db-conns and --max-waits-per-tenant must be at least 1")
	}
	if c.MaxAuditExports < 1 || c.MaxAuditExports >= c.APIDBConns {
		return fmt.Errorf("--max-audit-exports must be at least 1 and below --api-db-conns (%d), so that exports leave the API connections for calls; not %d",
			c.APIDBConns, c.MaxAuditExports)
	}
	if c.GroupCommitOps < 0 || c.GroupCommitOps > 1000 || c.GroupCommitters < 1 || c.GroupCommitters > 100 {
		return fmt.Errorf("--group-commit-ops must be 0 to 1000 (not %d) and --group-committers 1 to 100 (not %d)", c.GroupCommitOps, c.GroupCommitters)
	}
	if c.HTTPReadTimeout <= 0 || c.HTTPWriteTimeout <= 0 || c.HTTPIdleTimeout <= 0 {
		return errors.New("--http-read-timeout, --http-write-timeout and --http-idle-timeout must be positive")
	}
	if longest := max(c.MaxWait, c.MCPWait); c.HTTPWriteTimeout <= longest {
		// A long poll would be cut off before it could answer.
		return fmt.Errorf("--http-write-timeout %s must be longer than --max-wait and --mcp-wait (%s)", c.HTTPWriteTimeout, longest)
	}
	return nil
}

// validateLookupLags checks that each vendor's lookup lag and request timeout fit its
// job timeout.
func (c *Config) validateLookupLags() error {
	// A request to a vendor that does not deduplicate keys may still be on its way to
	// (or inside) a slow receiver until its job times out; the reconciler trusts an
	// empty lookup only a lookup lag after the attempt ended, so that lag must cover
	// a job timeout, or an op still being carried out would be sent again.
	for _, l := range []struct {
		vendor, flag string
		enabled      bool
		lag          time.Duration
	}{
		{"sendgrid", "--sendgrid-lookup-lag", c.SendGridAPIKey != "", c.SendGridLookupLag},
		{"webhook", "--webhook-lookup-lag", len(c.WebhookTargets) > 0 && !c.WebhookNativeKeys, c.WebhookLookupLag},
	} {
		if jt := c.jobTimeout(l.vendor); l.enabled && l.lag < jt {
			return fmt.Errorf("%s %s must be at least the %s job timeout %s (--%s-job-timeout): %s does not deduplicate requests, "+
				"and a request may still reach the receiver until its job times out, so an empty lookup any earlier could send it twice",
				l.flag, l.lag, l.vendor, jt, l.vendor, l.vendor)
		}
	}
	if c.SendGridTimeout >= c.Queues["sendgrid"].JobTimeout && c.Queues["sendgrid"].JobTimeout > 0 {
		return fmt.Errorf("--sendgrid-timeout %s must be shorter than the sendgrid job timeout %s", c.SendGridTimeout, c.Queues["sendgrid"].JobTimeout)
	}
	return nil
}

// jobTimeout is a vendor's dispatch job timeout as the outbox will use it.
func (c *Config) jobTimeout(vendor string) time.Duration {
	if d := c.Queues[vendor].JobTimeout; d > 0 {
		return d
	}
	return dispatch.DefaultJobTimeout
}

// mcpOrigins are the browser origins /mcp serves besides loopback: PublicURL's and
// MCPAllowedOrigins.
func (c Config) mcpOrigins() []string {
	if c.PublicURL == "" {
		return c.MCPAllowedOrigins
	}
	return append([]string{c.PublicURL}, c.MCPAllowedOrigins...)
}

// consoleURL is the console's public URL, from PublicURL ("" without it).
func (c *Config) consoleURL() string {
	if c.PublicURL == "" {
		return ""
	}
	return strings.TrimSuffix(c.PublicURL, "/") + "/console/"
}

// oauthAudience is OAuthAudience, else PublicURL.
func (c *Config) oauthAudience() string {
	if c.OAuthAudience != "" {
		return c.OAuthAudience
	}
	return c.PublicURL
}

// PublicHTTPS reports whether PublicURL is an https URL.
func (c Config) PublicHTTPS() bool {
	return strings.HasPrefix(strings.ToLower(c.PublicURL), "https://")
}
