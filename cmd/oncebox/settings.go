package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// setting is one configuration knob: a flag, its environment variable, its default.
type setting struct {
	flag, env, def, help string
	set                  func(c *server.Config, v string) error
	secret               bool
}

func durSetting(flagName, env string, def time.Duration, help string, dst func(*server.Config) *time.Duration) setting {
	return setting{flag: flagName, env: env, def: def.String(), help: help, set: func(c *server.Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return err
		}
		*dst(c) = d
		return nil
	}}
}

func intSetting(flagName, env string, def int64, help string, dst func(*server.Config, int64)) setting {
	return setting{flag: flagName, env: env, def: strconv.FormatInt(def, 10), help: help, set: func(c *server.Config, v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return err
		}
		dst(c, n)
		return nil
	}}
}

func strSetting(flagName, env, def, help string, secret bool, dst func(*server.Config) *string) setting {
	return setting{flag: flagName, env: env, def: def, help: help, secret: secret, set: func(c *server.Config, v string) error {
		*dst(c) = v
		return nil
	}}
}

func boolSetting(flagName, env string, def bool, help string, dst func(*server.Config) *bool) setting {
	return setting{flag: flagName, env: env, def: strconv.FormatBool(def), help: help, set: func(c *server.Config, v string) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return err
		}
		*dst(c) = b
		return nil
	}}
}

func queueSettings(vendor string) []setting {
	d := server.Defaults().Queues[vendor]
	return []setting{
		intSetting(vendor+"-workers", "ONCEBOX_"+strings.ToUpper(vendor)+"_WORKERS", int64(d.MaxWorkers),
			"dispatch workers for "+vendor+" ops in this process", func(c *server.Config, n int64) {
				q := c.Queues[vendor]
				q.MaxWorkers = int(n)
				c.Queues[vendor] = q
			}),
		// Applied by parseConfig, which writes the map entry back.
		durSetting(vendor+"-job-timeout", "ONCEBOX_"+strings.ToUpper(vendor)+"_JOB_TIMEOUT", d.JobTimeout,
			"how long one "+vendor+" dispatch may take, vendor call included", nil),
	}
}

// settings lists every flag and environment variable of `oncebox serve` and `oncebox dev`.
// It is a table, one row per setting (flag, environment variable, default, help, and
// where it goes in server.Config), and is long because the settings are many; a
// setting that needs a parser of its own names it (setRoles and the like, below).
func settings() []setting {
	d := server.Defaults()
	s := []setting{
		strSetting("database-url", "DATABASE_URL", "", "Postgres connection URL (oncebox dev finds or starts one when unset)", true, func(c *server.Config) *string { return &c.DatabaseURL }),
		strSetting("addr", "ONCEBOX_ADDR", d.Addr, "address of the HTTP API, MCP, /metrics and River UI", false, func(c *server.Config) *string { return &c.Addr }),
		strSetting("health-addr", "ONCEBOX_HEALTH_ADDR", "", "a second address serving only the probes GET /livez and GET /readyz (the API address serves them too), for processes without the api role; empty: none", false, func(c *server.Config) *string { return &c.HealthAddr }),
		{flag: "roles", env: "ONCEBOX_ROLES", def: "api,worker,periodic", help: "what this process runs: any of api, worker, periodic", set: setRoles},
		intSetting("max-attempts", "ONCEBOX_MAX_ATTEMPTS", int64(d.MaxAttempts), "retryable failures an op may see before it goes to needs_review", func(c *server.Config, n int64) { c.MaxAttempts = int(n) }),
		boolSetting("batched-completion", "ONCEBOX_BATCHED_COMPLETION", d.BatchedCompletion, "record a vendor's answer in one statement and let River's batched completer finish the job (faster; off: JobCompleteTx in the result's transaction)", func(c *server.Config) *bool { return &c.BatchedCompletion }),
		boolSetting("claim-commit", "ONCEBOX_CLAIM_COMMIT", false, "commit a claim (the op as dispatching) before every vendor call, as before clean runs (off: a clean run's claim is River's fetch of its job, one commit less per op)", func(c *server.Config) *bool { return &c.ClaimCommit }),
		intSetting("group-commit-ops", "ONCEBOX_GROUP_COMMIT_OPS", int64(d.GroupCommitOps), "most enqueues (HTTP, MCP) committed together in one transaction, each answered only after that commit (0 or 1: each in a transaction of its own)", func(c *server.Config, n int64) { c.GroupCommitOps = int(n) }),
		intSetting("group-committers", "ONCEBOX_GROUP_COMMITTERS", int64(d.GroupCommitters), "how many group-commit transactions may be open at once, each on a pooled connection", func(c *server.Config, n int64) { c.GroupCommitters = int(n) }),
		durSetting("admission-read-timeout", "ONCEBOX_ADMISSION_READ_TIMEOUT", d.AdmissionReadTimeout, "how long a new op's admission may wait on one vendor read (whose an object is, a full refund's price), made before the enqueue's transaction; past it the vendor could not be asked", func(c *server.Config) *time.Duration { return &c.AdmissionReadTimeout }),
		durSetting("retry-max-backoff", "ONCEBOX_RETRY_MAX_BACKOFF", d.RetryMaxBackoff, "longest wait between two attempts after a retryable vendor error (1s, 2s, 4s, … up to this)", func(c *server.Config) *time.Duration { return &c.RetryMaxBackoff }),
		durSetting("rescue-after", "ONCEBOX_RESCUE_AFTER", d.RescueStuckJobsAfter, "River rescues a job whose worker vanished after this long (River's default is 1h)", func(c *server.Config) *time.Duration { return &c.RescueStuckJobsAfter }),
		durSetting("fetch-cooldown", "ONCEBOX_FETCH_COOLDOWN", d.FetchCooldown, "River's minimum pause between fetches of a queue (River's default 100ms caps a queue near 1,000 jobs/s)", func(c *server.Config) *time.Duration { return &c.FetchCooldown }),
		durSetting("fetch-poll-interval", "ONCEBOX_FETCH_POLL_INTERVAL", d.FetchPollInterval, "how often River polls for jobs when no notification arrives", func(c *server.Config) *time.Duration { return &c.FetchPollInterval }),
		durSetting("startup-wait", "ONCEBOX_STARTUP_WAIT", d.StartupWait, "how long a starting process waits for Postgres to answer", func(c *server.Config) *time.Duration { return &c.StartupWait }),
		durSetting("shutdown-grace", "ONCEBOX_SHUTDOWN_GRACE", d.ShutdownGrace, "on SIGTERM, how long running dispatches may finish before they are cancelled (recorded as pending for a same-key resend, or unknown)", func(c *server.Config) *time.Duration { return &c.ShutdownGrace }),
	}
	for _, v := range []string{"stripe", "sendgrid", "webhook"} {
		s = append(s, queueSettings(v)...)
	}
	s = append(s,
		strSetting("stripe-api-key", "STRIPE_API_KEY", "", "Stripe secret key; Stripe tools are enabled only when set", true, func(c *server.Config) *string { return &c.StripeAPIKey }),
		strSetting("stripe-api-base", "STRIPE_API_BASE", d.StripeAPIBase, "Stripe API base URL (a fake or stripe-mock in tests)", false, func(c *server.Config) *string { return &c.StripeAPIBase }),
		durSetting("stripe-timeout", "ONCEBOX_STRIPE_TIMEOUT", d.StripeTimeout, "timeout of one Stripe request", func(c *server.Config) *time.Duration { return &c.StripeTimeout }),
		durSetting("stripe-search-lag", "ONCEBOX_STRIPE_SEARCH_LAG", d.StripeSearchLag, "how far Stripe search may lag behind (lookups also scan unlagged lists)", func(c *server.Config) *time.Duration { return &c.StripeSearchLag }),
		strSetting("sendgrid-api-key", "SENDGRID_API_KEY", "", "SendGrid API key; the mail tool is enabled only when set", true, func(c *server.Config) *string { return &c.SendGridAPIKey }),
		strSetting("sendgrid-api-base", "SENDGRID_API_BASE", d.SendGridAPIBase, "SendGrid API base URL", false, func(c *server.Config) *string { return &c.SendGridAPIBase }),
		durSetting("sendgrid-timeout", "ONCEBOX_SENDGRID_TIMEOUT", d.SendGridTimeout, "timeout of one SendGrid request", func(c *server.Config) *time.Duration { return &c.SendGridTimeout }),
		durSetting("sendgrid-lookup-lag", "ONCEBOX_SENDGRID_LOOKUP_LAG", d.SendGridLookupLag, "how long the Email Activity API may miss a sent message; an unknown send is resent only after this (at least --sendgrid-job-timeout)", func(c *server.Config) *time.Duration { return &c.SendGridLookupLag }),
		intSetting("sendgrid-activity-rate", "ONCEBOX_SENDGRID_ACTIVITY_RATE", int64(d.SendGridActivityRate), "Email Activity API requests per minute, shared by the process", func(c *server.Config, n int64) { c.SendGridActivityRate = int(n) }),
		strSetting("stripe-webhook-secret", "STRIPE_WEBHOOK_SECRET", "", "signing secret (whsec_…) of the Stripe webhook endpoint POST /v1/vendor-events/stripe; when set, stored Stripe events resolve unknown ops before Stripe is searched", true, func(c *server.Config) *string { return &c.StripeWebhookSecret }),
		strSetting("sendgrid-event-public-key", "SENDGRID_EVENT_PUBLIC_KEY", "", "verification key (base64 ECDSA) of SendGrid's signed Event Webhook POST /v1/vendor-events/sendgrid; when set, stored events resolve unknown mail ops without the Email Activity API", false, func(c *server.Config) *string { return &c.SendGridEventPublicKey }),
		durSetting("sendgrid-event-tolerance", "ONCEBOX_SENDGRID_EVENT_TOLERANCE", d.SendGridEventTolerance, "how far a SendGrid event's signed timestamp may be from now (Stripe's is stripe-go's 5m)", func(c *server.Config) *time.Duration { return &c.SendGridEventTolerance }),
		durSetting("vendor-event-lag", "ONCEBOX_VENDOR_EVENT_LAG", d.VendorEventLag, "how long after a send its vendor events may still arrive: until then an op whose vendor cannot be asked is checked again rather than sent to review", func(c *server.Config) *time.Duration { return &c.VendorEventLag }),
		durSetting("vendor-event-retention", "ONCEBOX_VENDOR_EVENT_RETENTION", d.VendorEventRetention, "how long received vendor events are kept", func(c *server.Config) *time.Duration { return &c.VendorEventRetention }),
		intSetting("vendor-event-max-body-bytes", "ONCEBOX_VENDOR_EVENT_MAX_BODY_BYTES", d.VendorEventMaxBodyBytes, "largest vendor event request accepted", func(c *server.Config, n int64) { c.VendorEventMaxBodyBytes = n }),
		setting{flag: "webhook-targets", env: "ONCEBOX_WEBHOOK_TARGETS", def: "", secret: true,
			help: `allow-listed webhook targets as JSON: {"crm":{"base_url":"https://...","secret_header":"X-Secret","secret":"..."}}`,
			set:  setWebhookTargets},
		durSetting("webhook-timeout", "ONCEBOX_WEBHOOK_TIMEOUT", d.WebhookTimeout, "timeout of one webhook request", func(c *server.Config) *time.Duration { return &c.WebhookTimeout }),
		boolSetting("webhook-native-keys", "ONCEBOX_WEBHOOK_NATIVE_KEYS", false, "the webhook targets honour Idempotency-Key for 24h (resend instead of reconcile after a crash)", func(c *server.Config) *bool { return &c.WebhookNativeKeys }),
		strSetting("webhook-lookup-path", "ONCEBOX_WEBHOOK_LOOKUP_PATH", "", "path on each target answering GET ?oncebox_op=<id> (empty: unknown webhook outcomes go to review)", false, func(c *server.Config) *string { return &c.WebhookLookupPath }),
		durSetting("webhook-lookup-lag", "ONCEBOX_WEBHOOK_LOOKUP_LAG", d.WebhookLookupLag, "how long a delivery may stay invisible to the lookup path, counting how long a receiver may still act on a request after oncebox gave up on it (a slow receiver behind a cut network never hears the abort); an unknown webhook is resent only after this (without --webhook-native-keys at least --webhook-job-timeout)", func(c *server.Config) *time.Duration { return &c.WebhookLookupLag }),
		strSetting("tools-file", "ONCEBOX_TOOLS_FILE", "", "tool catalog (YAML or JSON): your own read, write and unsafe tools over HTTP targets and MCP upstreams (docs/catalog.md); a broken catalog refuses to start; SIGHUP reloads it (a broken one is refused, the catalog in force stays)", false, func(c *server.Config) *string { return &c.ToolsFile }),
		strSetting("tenant-catalogs", "ONCEBOX_TENANT_CATALOGS", "", "folder of tenants' own catalogs: <tenant>.yaml is that tenant's, in --tools-file's format, offered to it alone (docs/catalog.md); checked at start and reloaded on SIGHUP with --tools-file", false, func(c *server.Config) *string { return &c.TenantCatalogs }),
		setting{flag: "tenant-upstream-commands", env: "ONCEBOX_TENANT_UPSTREAM_COMMANDS", def: "",
			help: "programs a tenant's own catalog may run as a stdio upstream (command:), as absolute paths: /usr/local/bin/crm-mcp,/opt/mcp/bin/tickets; empty: none, a tenant's file naming a command is refused before anything starts (docs/catalog.md)",
			set:  setTenantUpstreamCommands},
		setting{flag: "tenant-egress-allow", env: "ONCEBOX_TENANT_EGRESS_ALLOW", def: "",
			help: "address ranges a tenant's own targets and upstreams may reach although they are loopback, link-local, private, unspecified or multicast: 10.1.0.0/16,127.0.0.1/32; empty: none (docs/catalog.md); the installation's --tools-file is not confined",
			set:  setTenantEgressAllow},
		intSetting("refund-approval-above", "ONCEBOX_REFUND_APPROVAL_ABOVE", 0, "refunds above this amount (minor units), or without an amount, wait for approval; 0 = never (shorthand for a stripe.refund rule of --approval-policy); seeds the installation's stored rule at start when none is stored (oncebox policy)", func(c *server.Config, n int64) { c.RefundApprovalAbove = n }),
		setting{flag: "approval-policy", env: "ONCEBOX_APPROVAL_POLICY", def: "",
			help: `default approval policy per tool as JSON: {"stripe.refund":{"mode":"above","above":{"*":10000,"usd":50000},"approvers":2},"sendgrid.mail":{"mode":"always"}} (modes never, always, above); seeds the installation's stored rules at start, each only when none is stored for its tool: a stored rule stays in force, and start logs a warning when it differs (change it with oncebox policy); tenants override it with oncebox tenant policy`,
			set: func(c *server.Config, v string) error {
				p, err := governance.ParseApprovalPolicy(v)
				c.ApprovalPolicy = p
				return err
			}},
		setting{flag: "budgets", env: "ONCEBOX_BUDGETS", def: "",
			help: `budgets as a JSON list, counted per tenant (scope tenant), API token or conversation (and then capped per token across its conversations at "conversations", default 10, times the limits) in fixed windows: [{"name":"refunds-daily","tool":"stripe.refund","window":"24h","amount":{"*":50000}},{"name":"mail-hourly","tool":"sendgrid.mail","window":"1h","count":20,"scope":"conversation","on_exceed":"refuse"}] (on_exceed approval, the default, or refuse: 429); seeds the installation's stored budgets at start, each only when none of its name is stored (oncebox policy budget); a tenant's own budgets (oncebox tenant budget) replace them by name and add to them`,
			set: func(c *server.Config, v string) error {
				b, err := governance.ParseBudgets(v)
				c.Budgets = b
				return err
			}},
		strSetting("notify-url", "ONCEBOX_NOTIFY_URL", "", "URL that receives a signed JSON POST (HMAC-SHA256, header Oncebox-Signature) whenever an op starts waiting for approval; delivered at least once through the outbox, deduplicate by op_id", true, func(c *server.Config) *string { return &c.NotifyURL }),
		strSetting("notify-secret", "ONCEBOX_NOTIFY_SECRET", "", "shared secret signing approval notifications (required with --notify-url)", true, func(c *server.Config) *string { return &c.NotifySecret }),
		strSetting("notify-link-base", "ONCEBOX_NOTIFY_LINK_BASE", "", "base URL of the op links in approval notifications, such as https://oncebox.example.com", false, func(c *server.Config) *string { return &c.NotifyLinkBase }),
		durSetting("notify-timeout", "ONCEBOX_NOTIFY_TIMEOUT", d.NotifyTimeout, "timeout of one approval notification POST (an unanswered one is retried)", func(c *server.Config) *time.Duration { return &c.NotifyTimeout }),
		durSetting("approval-expiry", "ONCEBOX_APPROVAL_EXPIRY", d.ApprovalExpiry, "how long an op waits for a decision before it is rejected with the reason \"approval expired\"", func(c *server.Config) *time.Duration { return &c.ApprovalExpiry }),
		durSetting("ttl", "ONCEBOX_TTL", d.TTL, "how long ops are kept once settled (--tool-ttl overrides it per tool); at least the vendor's key window (24h for Stripe and native-key webhooks)", func(c *server.Config) *time.Duration { return &c.TTL }),
		setting{flag: "tool-ttl", env: "ONCEBOX_TOOL_TTL", def: "",
			help: "per tool, how long its ops are kept, overriding --ttl: tool=duration,... (e.g. stripe.refund=720h)",
			set:  setToolTTL},
		durSetting("tombstone-ttl", "ONCEBOX_TOMBSTONE_TTL", d.TombstoneTTL, "how long a purged op's key is remembered to detect key-expiry collisions", func(c *server.Config) *time.Duration { return &c.TombstoneTTL }),
		durSetting("purge-interval", "ONCEBOX_PURGE_INTERVAL", d.PurgeInterval, "how often expired ops are purged", func(c *server.Config) *time.Duration { return &c.PurgeInterval }),
		durSetting("audit-retention", "ONCEBOX_AUDIT_RETENTION", d.AuditRetention, "how long the audit log is kept (dropped by whole months; the TTL purge never deletes it)", func(c *server.Config) *time.Duration { return &c.AuditRetention }),
		boolSetting("audit-otel-logs", "ONCEBOX_AUDIT_OTEL_LOGS", false, "stream the sealed audit log as OpenTelemetry log records to a SIEM (periodic role; at least once, dedupe by tenant and seq) through the exporter OTEL_LOGS_EXPORTER and OTEL_EXPORTER_OTLP_LOGS_ENDPOINT configure; off, tracing never ships it", func(c *server.Config) *bool { return &c.AuditOTelLogs }),
		durSetting("audit-otel-logs-interval", "ONCEBOX_AUDIT_OTEL_LOGS_INTERVAL", d.AuditOTelLogsInterval, "how often --audit-otel-logs sends the entries sealed since", func(c *server.Config) *time.Duration { return &c.AuditOTelLogsInterval }),
		strSetting("audit-signing-key", "ONCEBOX_AUDIT_SIGNING_KEY", "", "base64 of a 32-byte ed25519 seed (openssl rand -base64 32) that signs the audit log's checkpoints; without it checkpoints are unsigned", true, func(c *server.Config) *string { return &c.AuditSigningKey }),
		intSetting("purge-batch", "ONCEBOX_PURGE_BATCH", int64(d.PurgeBatch), "ops looked at (deleted, or kept for later) per purge statement", func(c *server.Config, n int64) { c.PurgeBatch = int(n) }),
		boolSetting("redact-mail", "ONCEBOX_REDACT_MAIL", d.RedactMail, "store mail addresses and bodies only as hashes (the full message stays encrypted with --seal-key until sent); needs --seal-key", func(c *server.Config) *bool { return &c.RedactMail }),
		durSetting("reconcile-interval", "ONCEBOX_RECONCILE_INTERVAL", d.ReconcileInterval, "how often the reconciler sweeps unknown and stuck ops", func(c *server.Config) *time.Duration { return &c.ReconcileInterval }),
		durSetting("reconcile-sweep-timeout", "ONCEBOX_RECONCILE_SWEEP_TIMEOUT", d.ReconcileSweepTimeout, "bound on one sweep; ops a dead sweep had taken come back after this (keep below --rescue-after)", func(c *server.Config) *time.Duration { return &c.ReconcileSweepTimeout }),
		durSetting("reconcile-retry-after", "ONCEBOX_RECONCILE_RETRY_AFTER", d.ReconcileRetryAfter, "after a failed vendor lookup (rate limit, network), look again after this", func(c *server.Config) *time.Duration { return &c.ReconcileRetryAfter }),
		intSetting("reconcile-batch", "ONCEBOX_RECONCILE_BATCH", int64(d.ReconcileBatch), "ops one sweep looks at", func(c *server.Config, n int64) { c.ReconcileBatch = int(n) }),
		intSetting("reconcile-concurrency", "ONCEBOX_RECONCILE_CONCURRENCY", int64(d.ReconcileConcurrency), "vendor lookups one sweep runs at once (vendor rate limits still apply)", func(c *server.Config, n int64) { c.ReconcileConcurrency = int(n) }),
		durSetting("reconcile-stuck-margin", "ONCEBOX_RECONCILE_STUCK_MARGIN", d.ReconcileStuckMargin, "a dispatching op with no running job is taken by the sweeper this long after its vendor's job timeout; a pending op with no live dispatch job, this long after its last change", func(c *server.Config) *time.Duration { return &c.ReconcileStuckMargin }),
		setting{flag: "resend-on-none", env: "ONCEBOX_RESEND_ON_NONE", def: "stripe=true,sendgrid=true,webhook=true",
			help: "per vendor: when the reconciler finds no object after the lookup lag, resend (true) or ask a person (false)",
			set:  setResendOnNone},
		intSetting("max-body-bytes", "ONCEBOX_MAX_BODY_BYTES", d.MaxBodyBytes, "largest POST /v1/ops body accepted", func(c *server.Config, n int64) { c.MaxBodyBytes = n }),
		durSetting("max-wait", "ONCEBOX_MAX_WAIT", d.MaxWait, "cap on ?wait= of the HTTP API", func(c *server.Config) *time.Duration { return &c.MaxWait }),
		durSetting("mcp-wait", "ONCEBOX_MCP_WAIT", d.MCPWait, "how long an MCP tool call waits for the vendor's answer (keep below --shutdown-grace)", func(c *server.Config) *time.Duration { return &c.MCPWait }),
		durSetting("http-read-timeout", "ONCEBOX_HTTP_READ_TIMEOUT", d.HTTPReadTimeout, "how long the HTTP server may take to read a whole request, body included", func(c *server.Config) *time.Duration { return &c.HTTPReadTimeout }),
		durSetting("http-write-timeout", "ONCEBOX_HTTP_WRITE_TIMEOUT", d.HTTPWriteTimeout, "how long a request may take from its headers to the end of its answer (longer than --max-wait and --mcp-wait; MCP event streams are exempt)", func(c *server.Config) *time.Duration { return &c.HTTPWriteTimeout }),
		durSetting("http-idle-timeout", "ONCEBOX_HTTP_IDLE_TIMEOUT", d.HTTPIdleTimeout, "how long a kept-alive HTTP connection may wait for its next request", func(c *server.Config) *time.Duration { return &c.HTTPIdleTimeout }),
		setting{flag: "mcp-dedupe-window", env: "ONCEBOX_MCP_DEDUPE_WINDOW", def: "stripe.payment_intent=24h,stripe.refund=24h,sendgrid.mail=24h,webhook.post=24h",
			help: "per tool: identical MCP calls that name no conversation (no _meta, header or query conversation id) are one op for this long, across sessions and processes; 0 turns it off; tools not named keep their default; at most the tool's TTL",
			set:  setMCPDedupeWindows},
		intSetting("api-db-conns", "ONCEBOX_API_DB_CONNS", int64(d.APIDBConns), "Postgres connections of the API's own pool (requests, long polls, MCP, /metrics, River UI), apart from the workers' pool of at least 20", func(c *server.Config, n int64) { c.APIDBConns = int(n) }),
		strSetting("cells", "ONCEBOX_CELLS", "", "the installation's cells other than the home cell (DATABASE_URL), as name=postgres-URL pairs separated by commas, each registered first with oncebox cell add; empty: one cell (docs/scaling.md)", true, func(c *server.Config) *string { return &c.Cells }),
		durSetting("cell-directory-refresh", "ONCEBOX_CELL_DIRECTORY_REFRESH", d.CellDirectoryRefresh, "with --cells: how often the directory of which cell holds which tenant is read again (keep below tenant move's --drain)", func(c *server.Config) *time.Duration { return &c.CellDirectoryRefresh }),
		durSetting("cell-startup-wait", "ONCEBOX_CELL_STARTUP_WAIT", d.CellStartupWait, "with --cells: how long a starting process waits for a cell other than home; past it the cell starts in the background and its tenants get 503 cell-unavailable meanwhile", func(c *server.Config) *time.Duration { return &c.CellStartupWait }),
		intSetting("max-audit-exports", "ONCEBOX_MAX_AUDIT_EXPORTS", int64(d.MaxAuditExports), "audit exports (GET /v1/audit and the console's downloads, together) one process streams at once, each on an API database connection; past it: 429 with Retry-After (keep below --api-db-conns)", func(c *server.Config, n int64) { c.MaxAuditExports = int(n) }),
		intSetting("max-waits-per-tenant", "ONCEBOX_MAX_WAITS_PER_TENANT", int64(d.MaxWaitsPerTenant), "waits one tenant may hold open at once in one process, ?wait= requests and MCP tool calls together; past it: ?wait= gets 429 with Retry-After, an MCP call answers at once with its op as it stands", func(c *server.Config, n int64) { c.MaxWaitsPerTenant = int(n) }),
		strSetting("public-url", "ONCEBOX_PUBLIC_URL", "", "the URL people and agents reach this server at (https://oncebox.example.com); when https, console cookies are Secure and answers carry HSTS, for a proxy that ends TLS in front", false, func(c *server.Config) *string { return &c.PublicURL }),
		strSetting("oauth-issuer", "ONCEBOX_OAUTH_ISSUER", "", "issuer URL of an OAuth 2.1 authorization server whose JWT access tokens /mcp and the API accept besides oncebox's tokens (checked against its published keys); served in /.well-known/oauth-protected-resource", false, func(c *server.Config) *string { return &c.OAuthIssuer }),
		strSetting("oauth-audience", "ONCEBOX_OAUTH_AUDIENCE", "", "this server's resource URL, which access tokens must name in aud (RFC 8707); defaults to --public-url", false, func(c *server.Config) *string { return &c.OAuthAudience }),
		strSetting("oauth-tenant-claim", "ONCEBOX_OAUTH_TENANT_CLAIM", "oncebox_tenant", "the access token claim naming the oncebox tenant it acts for", false, func(c *server.Config) *string { return &c.OAuthTenantClaim }),
		boolSetting("trust-forwarded-proto", "ONCEBOX_TRUST_FORWARDED_PROTO", d.TrustForwardedProto, "take X-Forwarded-Proto: https for HTTPS (Secure cookies, HSTS); only when every request comes through a proxy that sets it", func(c *server.Config) *bool { return &c.TrustForwardedProto }),
		durSetting("console-session-ttl", "ONCEBOX_CONSOLE_SESSION_TTL", d.ConsoleSessionTTL, "how long a sign-in to the web console (/console/) lasts", func(c *server.Config) *time.Duration { return &c.ConsoleSessionTTL }),
		setting{flag: "mcp-allowed-origins", env: "ONCEBOX_MCP_ALLOWED_ORIGINS", def: "",
			help: "browser origins (https://agents.example.com,...) that may call /mcp besides --public-url's and loopback; a request with any other Origin header is refused with 403 (requests without Origin, as agents send, are not concerned)",
			set:  setMCPAllowedOrigins},
		durSetting("mcp-session-idle-timeout", "ONCEBOX_MCP_SESSION_IDLE_TIMEOUT", d.MCPSessionIdleTimeout, "an MCP session over HTTP that sees no request for this long is closed", func(c *server.Config) *time.Duration { return &c.MCPSessionIdleTimeout }),
		intSetting("mcp-max-sessions-per-tenant", "ONCEBOX_MCP_MAX_SESSIONS_PER_TENANT", int64(d.MCPMaxSessionsPerTenant), "MCP sessions over HTTP one tenant may hold open in one process; one more initialize gets the JSON-RPC error -32011", func(c *server.Config, n int64) { c.MCPMaxSessionsPerTenant = int(n) }),
		durSetting("unavailable-retry-after", "ONCEBOX_UNAVAILABLE_RETRY_AFTER", d.UnavailableRetryAfter, "Retry-After of the 503 store-unavailable answered while Postgres cannot be reached", func(c *server.Config) *time.Duration { return &c.UnavailableRetryAfter }),
		durSetting("metrics-refresh", "ONCEBOX_METRICS_REFRESH", d.MetricsRefresh, "how old the database gauges of /metrics (oncebox_ops, oncebox_river_queue_depth) may get before a scrape reads them again, in the background", func(c *server.Config) *time.Duration { return &c.MetricsRefresh }),
		durSetting("auth-cache-ttl", "ONCEBOX_AUTH_CACHE_TTL", d.AuthCacheTTL, "how long a process may remember a valid API token, only while it hears Postgres announce token changes (a revocation anywhere ends it at once; this bounds a lost announcement); 0 = ask Postgres on every request", func(c *server.Config) *time.Duration { return &c.AuthCacheTTL }),
		durSetting("listen-heartbeat", "ONCEBOX_LISTEN_HEARTBEAT", d.ListenHeartbeat, "how often the listening connection (token changes, long polls) sends a round trip that must come back within as long; one that does not counts the connection as lost: the token cache empties and stops until it listens again; 0 = off", func(c *server.Config) *time.Duration { return &c.ListenHeartbeat }),
		durSetting("pg-dead-session-timeout", "ONCEBOX_PG_DEAD_SESSION_TIMEOUT", d.DeadSessionTimeout, "how long a Postgres session of this process may outlive its network or sit idle inside a transaction before Postgres ends it (idle_in_transaction_session_timeout, TCP keepalives, tcp_user_timeout; settings in DATABASE_URL win); 0 = Postgres's and the system's own", func(c *server.Config) *time.Duration { return &c.DeadSessionTimeout }),
		strSetting("seal-key", "ONCEBOX_SEAL_KEY", "", "base64 of 32 random bytes (openssl rand -base64 32), the same on every process: redacted tools' full args are stored only encrypted with it until the op is terminal; required with the mail tool and --redact-mail", true, func(c *server.Config) *string { return &c.SealKey }),
		strSetting("admin-token", "ONCEBOX_ADMIN_TOKEN", "", "a token that opens River UI (/riverui/) besides operator-role API tokens; when set, /metrics needs it or an operator-role token", true, func(c *server.Config) *string { return &c.AdminToken }),
	)
	return s
}

// setMCPAllowedOrigins parses --mcp-allowed-origins: comma-separated http(s) origins.
func setMCPAllowedOrigins(c *server.Config, v string) error {
	c.MCPAllowedOrigins = nil
	for _, o := range strings.Split(v, ",") {
		if o = strings.TrimSpace(o); o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("--mcp-allowed-origins: %q is not an origin; want scheme://host[:port], e.g. https://agents.example.com", o)
		}
		c.MCPAllowedOrigins = append(c.MCPAllowedOrigins, o)
	}
	return nil
}

// setTenantUpstreamCommands parses --tenant-upstream-commands: path,...
func setTenantUpstreamCommands(c *server.Config, v string) error {
	c.TenantUpstreamCommands = nil
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			c.TenantUpstreamCommands = append(c.TenantUpstreamCommands, part)
		}
	}
	return nil
}

// setTenantEgressAllow parses --tenant-egress-allow: ranges (10.0.0.0/8) or single
// addresses (127.0.0.1), comma-separated.
func setTenantEgressAllow(c *server.Config, v string) error {
	c.TenantEgressAllow = nil
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		p, err := netip.ParsePrefix(part)
		if err != nil {
			a, aerr := netip.ParseAddr(part)
			if aerr != nil {
				return fmt.Errorf("%q is not an address range such as 10.1.0.0/16 or an address such as 127.0.0.1", part)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		c.TenantEgressAllow = append(c.TenantEgressAllow, p.Masked())
	}
	return nil
}

// setRoles parses --roles: any of api, worker, periodic.
func setRoles(c *server.Config, v string) error {
	c.Roles = server.Roles{}
	for _, r := range strings.Split(v, ",") {
		switch strings.TrimSpace(r) {
		case "api":
			c.Roles.API = true
		case "worker":
			c.Roles.Worker = true
		case "periodic":
			c.Roles.Periodic = true
		case "":
		default:
			return fmt.Errorf("unknown role %q (want api, worker, periodic)", r)
		}
	}
	return nil
}

// setWebhookTargets parses --webhook-targets: the targets as JSON.
func setWebhookTargets(c *server.Config, v string) error {
	if v == "" {
		return nil
	}
	var raw map[string]struct {
		BaseURL      string `json:"base_url"`
		SecretHeader string `json:"secret_header"`
		Secret       string `json:"secret"`
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return fmt.Errorf(`want {"name":{"base_url":..,"secret_header":..,"secret":..}}: %w`, err)
	}
	c.WebhookTargets = map[string]webhook.Target{}
	for name, t := range raw {
		c.WebhookTargets[name] = webhook.Target{BaseURL: t.BaseURL, SecretHeader: t.SecretHeader, Secret: t.Secret}
	}
	return nil
}

// setToolTTL parses --tool-ttl: tool=duration,...
func setToolTTL(c *server.Config, v string) error {
	c.ToolTTL = map[string]time.Duration{}
	if strings.TrimSpace(v) == "" {
		return nil
	}
	for _, part := range strings.Split(v, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("want tool=duration, got %q", part)
		}
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return fmt.Errorf("tool %q: want a positive duration such as 720h, got %q", name, val)
		}
		c.ToolTTL[name] = d
	}
	return nil
}

// setResendOnNone parses --resend-on-none: vendor=true|false,...
func setResendOnNone(c *server.Config, v string) error {
	c.ResendOnNone = map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("want vendor=true|false, got %q", part)
		}
		b, err := strconv.ParseBool(val)
		if err != nil {
			return err
		}
		c.ResendOnNone[name] = b
	}
	return nil
}

// setMCPDedupeWindows parses --mcp-dedupe-window: tool=duration,... over the defaults.
func setMCPDedupeWindows(c *server.Config, v string) error {
	c.MCPDedupeWindows = mcpserver.DefaultDedupeWindows()
	for _, part := range strings.Split(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		name, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("want tool=duration, got %q", part)
		}
		d, err := time.ParseDuration(val)
		if err != nil || d < 0 {
			return fmt.Errorf("tool %q: want a duration such as 24h, or 0 to turn it off, got %q", name, val)
		}
		c.MCPDedupeWindows[name] = d
	}
	return nil
}

// parseConfig applies defaults, then environment variables, then flags (anywhere in
// args), and returns the settings and the log flags.
func parseConfig(fs *flag.FlagSet, args []string) (server.Config, *logFlags, error) {
	return parseConfigFor(fs, args, nil)
}

// parseConfigFor is parseConfig for a subcommand that uses only some settings: only
// those show reports true for are flags on fs (nil: all of them); the others still
// take their environment variables, so that the process is configured as its
// neighbours are, but --help does not list them.
func parseConfigFor(fs *flag.FlagSet, args []string, show func(name string) bool) (server.Config, *logFlags, error) {
	cfg := server.Defaults()
	all := settings()
	values := map[string]*string{}
	for _, s := range all {
		v := s.def
		if env, ok := os.LookupEnv(s.env); ok && env != "" {
			v = env
		}
		if show != nil && !show(s.flag) {
			values[s.flag] = &v
			continue
		}
		if s.secret {
			values[s.flag] = secretVar(fs, s.flag, s.env, s.def, s.help+" (env "+s.env+")")
			continue
		}
		values[s.flag] = fs.String(s.flag, v, s.help+" (env "+s.env+")")
	}
	level := serverLogLevel
	if show != nil {
		level = cliLogLevel // a command that uses some settings only: not serve or dev
	}
	log := addLogFlags(fs, level)
	if err := parseInterspersed(fs, args); err != nil {
		return cfg, nil, err
	}
	for _, s := range all {
		v := *values[s.flag]
		if v == "" && s.def == "" {
			continue
		}
		if strings.HasSuffix(s.flag, "-job-timeout") {
			vendor := strings.TrimSuffix(s.flag, "-job-timeout")
			d, err := time.ParseDuration(v)
			if err != nil {
				return cfg, nil, fmt.Errorf("--%s (%s): %w", s.flag, s.env, err)
			}
			q := cfg.Queues[vendor]
			q.JobTimeout = d
			cfg.Queues[vendor] = q
			continue
		}
		if err := s.set(&cfg, v); err != nil {
			return cfg, nil, fmt.Errorf("--%s (%s): %w", s.flag, s.env, err)
		}
	}
	return cfg, log, nil
}

// printSettings writes the settings as a Markdown table (the one in docs/configuration.md).
func printSettings(w io.Writer) {
	all := settings()
	fmt.Fprintln(w, "| flag | environment | default | what it does |")
	fmt.Fprintln(w, "| --- | --- | --- | --- |")
	for _, s := range all {
		def := s.def
		if def == "" {
			def = "(none)"
		}
		fmt.Fprintf(w, "| `--%s` | `%s` | `%s` | %s |\n", s.flag, s.env, def, strings.ReplaceAll(s.help, "|", "\\|"))
	}
	fmt.Fprintln(w, "| `--log-format` | `ONCEBOX_LOG_FORMAT` | `text` | log format: text or json |")
	fmt.Fprintln(w, "| `--log-level` | `ONCEBOX_LOG_LEVEL` | `info` | log level: debug, info, warn, error; serve and dev default to `info`, every other command to `warn` |")
}

// secretFlag is a flag whose default may come from a secret environment variable: its
// value is the variable's (else def), but what --help and a mistyped flag print as
// its default is "(from VAR)", never the value.
type secretFlag struct {
	value   *string
	env     string
	fromEnv bool
}

// secretVar registers a secretFlag on fs and returns where its value is.
func secretVar(fs *flag.FlagSet, name, env, def, usage string) *string {
	v := def
	f := &secretFlag{value: &v, env: env}
	if e := os.Getenv(env); e != "" {
		v, f.fromEnv = e, true
	}
	fs.Var(f, name, usage)
	return &v
}

// String is what usage prints as the default: never the value.
func (f *secretFlag) String() string {
	switch {
	case f == nil || f.value == nil || *f.value == "":
		return ""
	case f.fromEnv:
		return "(from " + f.env + ")"
	}
	return "(set)"
}

// Set takes the flag's value.
func (f *secretFlag) Set(v string) error {
	*f.value, f.fromEnv = v, false
	return nil
}
