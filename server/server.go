package server

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/dispatch"
	"github.com/oncebox/oncebox/doors/api"
	"github.com/oncebox/oncebox/doors/console"
	"github.com/oncebox/oncebox/doors/mcpserver"
	"github.com/oncebox/oncebox/doors/metrics"
	"github.com/oncebox/oncebox/doors/oauth"
	"github.com/oncebox/oncebox/doors/opwait"
	"github.com/oncebox/oncebox/doors/vendorevents"
	"github.com/oncebox/oncebox/finance"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/internal/fleet"
	"github.com/oncebox/oncebox/internal/logdedupe"
	"github.com/oncebox/oncebox/internal/pglisten"
	"github.com/oncebox/oncebox/internal/seal"
	"github.com/oncebox/oncebox/notify"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/purge"
	"github.com/oncebox/oncebox/reconcile"
	"github.com/oncebox/oncebox/tenant"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendoraccount"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/catalog"
	"github.com/oncebox/oncebox/vendors/sendgrid"
	"github.com/oncebox/oncebox/vendors/stripe"
	"github.com/oncebox/oncebox/vendors/webhook"
)

// Server is one oncebox process.
type Server struct {
	cfg    Config
	logger *slog.Logger
	pool   *pgxpool.Pool
	outbox *outbox.Outbox
	// auditExports bounds the audit exports and console downloads streaming at once, on
	// connections of apiPool (--max-audit-exports).
	auditExports *audit.Slots
	// apiPool and apiOutbox serve the API role's requests: a pool of their own, so
	// that however many requests come, dispatch keeps its connections.
	apiPool   *pgxpool.Pool
	apiOutbox *outbox.Outbox
	// gov and apiGov are the outbox's and the API outbox's gates, on their pools.
	gov, apiGov *governance.Governance
	waitHub     *opwait.Hub
	// notifications is the API role's one listening connection to Postgres: the long
	// polls' settled ops and, with --auth-cache-ttl, the token cache's token changes.
	notifications *pglisten.Listener
	// waitSlots caps each tenant's open waits, HTTP ?wait= and MCP tool calls together.
	waitSlots *opwait.Slots
	metrics   *metrics.Metrics
	tenants   *tenant.Store
	// oauth checks an external authorization server's access tokens (nil: none).
	oauth   *oauth.Verifier
	listers map[string]finance.Lister
	// adapters are the vendor adapters the outbox dispatches to, as vendors built them.
	adapters []vendorapi.Vendor
	// stripe prices refunds without an amount for the budgets (nil without Stripe).
	stripe  *stripe.Vendor
	events  *vendorevents.Store
	handler http.Handler
	api     *api.Server
	// streams ends (endStreams) when shutdown begins.
	streams    context.Context
	endStreams context.CancelFunc
	riverUI    *riverui.Handler
	listener   net.Listener
	health     *health
	healthL    net.Listener
	// catalog is the tool catalog in force, connected to its targets, nil without
	// --tools-file. ReloadCatalog swaps it.
	catalog *catalog.Live
	// registry is the tools both outboxes accept (when read-only: described, for
	// lookups; nothing is recorded); baseTools are those of them that are not the
	// catalog's (a reload keeps them).
	registry  *outbox.Registry
	baseTools []vendorapi.Tool
	// described is every tool this process knows: registry, or when read-only every
	// built-in tool and those it would record; the finance report reads a refund's
	// payment through it.
	described *outbox.Registry
	// mcp is the MCP server of /mcp, nil when it offers no tool.
	mcp *mcpserver.Server
	// fleet is this process's registration (internal/fleet): it says whether a process
	// of an older release is live, and stops the process on a schema it cannot run on.
	fleet *fleet.Member
	// reloading serializes ReloadCatalog.
	reloading sync.Mutex
	// catalogReady is set once catalog is: an upstream's announcement that its tools
	// changed, which may come while the catalog connects, is ignored before.
	catalogReady atomic.Bool
	// started is closed once Run has stored the flags' policy (SeedPolicy) and started
	// the outbox: the router of Cells sends a cell no call before, as a Server alone
	// serves none before.
	started chan struct{}
}

// New connects to Postgres and builds every part the configured roles need. It does not
// migrate; run `oncebox migrate` (or Migrate) first.
func New(ctx context.Context, cfg Config, logger *slog.Logger) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	// While Postgres is down every fetch, request and sweep fails the same way several
	// times a second: one line per kind of failure every 10 seconds is enough.
	logger = slog.New(logdedupe.New(logger.Handler(), 10*time.Second))
	poolCfg, err := pgxpool.ParseConfig(cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if poolCfg.MaxConns < 20 {
		poolCfg.MaxConns = 20
	}
	bindSessions(&poolCfg.ConnConfig.Config, cfg.DeadSessionTimeout)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	if err := waitForPostgres(ctx, pool, cfg.StartupWait, logger); err != nil {
		pool.Close()
		return nil, err
	}
	s := &Server{cfg: cfg, logger: logger, pool: pool, apiPool: pool, listers: map[string]finance.Lister{},
		auditExports: audit.NewSlots(cfg.MaxAuditExports), started: make(chan struct{})}
	if cfg.Roles.API {
		apiCfg := poolCfg.Copy()
		apiCfg.MaxConns = int32(cfg.APIDBConns)
		if s.apiPool, err = pgxpool.NewWithConfig(ctx, apiCfg); err != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to Postgres: %w", err)
		}
	}
	s.health = &health{pool: s.apiPool, logger: logger}
	s.tenants = tenant.NewCachingStore(s.apiPool, cfg.AuthCacheTTL)
	if err := s.acceptAccessTokens(); err != nil {
		s.Close()
		return nil, err
	}
	if cfg.Roles.API {
		s.waitHub = opwait.New()
		s.notifications = pglisten.New(s.apiPool.Config().ConnConfig.Copy(), logger)
		s.notifications.SetHeartbeat(cfg.ListenHeartbeat)
		s.notifications.Handle(opwait.Channel, s.waitHub, "long polls poll")
		if cfg.AuthCacheTTL > 0 {
			// The token cache holds checks only while this listens for token changes.
			s.notifications.Handle(tenant.AuthChannel, s.tenants, "API requests ask Postgres for every token")
		}
	}
	s.streams, s.endStreams = context.WithCancel(context.Background())
	if err := s.build(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// vendors builds the vendor adapters that are configured. A vendor without credentials
// is left out, and so are its tools.
func (s *Server) vendors() ([]vendorapi.Vendor, []string, error) {
	var (
		vs      []vendorapi.Vendor
		enabled []string
	)
	cfg := s.cfg
	if cfg.StripeAPIKey != "" {
		v, err := stripe.New(stripe.Config{APIKey: cfg.StripeAPIKey, BaseURL: cfg.StripeAPIBase, Timeout: cfg.StripeTimeout,
			SearchLag: cfg.StripeSearchLag, Logger: s.logger})
		if err != nil {
			return nil, nil, fmt.Errorf("stripe: %w", err)
		}
		s.listers[v.Name()] = v
		s.stripe = v
		enabled = append(enabled, v.Name())
		// Stored events are a lookup source whether or not the platform's endpoint is
		// configured: a tenant on its own key has an endpoint and secret of its own
		// (vendorevents.PathStripeTenant), set at any time with `oncebox tenant vendor`.
		vs = append(vs, vendorevents.WrapVendor(v, s.events, cfg.VendorEventLag))
	}
	if cfg.SendGridAPIKey != "" {
		v, err := sendgrid.New(sendgrid.Config{APIKey: cfg.SendGridAPIKey, BaseURL: cfg.SendGridAPIBase, Timeout: cfg.SendGridTimeout,
			LookupLag: cfg.SendGridLookupLag, ActivityRatePerMinute: cfg.SendGridActivityRate, Logger: s.logger})
		if err != nil {
			return nil, nil, fmt.Errorf("sendgrid: %w", err)
		}
		s.listers[v.Name()] = finance.ListerFunc(v.ListMessages)
		enabled = append(enabled, v.Name())
		if cfg.SendGridEventPublicKey != "" {
			vs = append(vs, vendorevents.WrapVendor(v, s.events, cfg.VendorEventLag))
		} else {
			vs = append(vs, v)
		}
	}
	if len(cfg.WebhookTargets) > 0 {
		v, err := webhook.New(webhook.Config{Targets: cfg.WebhookTargets, Timeout: cfg.WebhookTimeout,
			NativeIdempotency: cfg.WebhookNativeKeys, LookupPath: cfg.WebhookLookupPath, LookupLag: cfg.WebhookLookupLag, Logger: s.logger})
		if err != nil {
			return nil, nil, fmt.Errorf("webhook: %w", err)
		}
		vs = append(vs, v)
		enabled = append(enabled, v.Name())
	}
	for _, v := range cfg.Vendors {
		vs = append(vs, v)
		enabled = append(enabled, v.Name())
	}
	if s.catalog != nil {
		for _, v := range s.catalog.Vendors() {
			vs = append(vs, v)
			enabled = append(enabled, v.Name())
		}
	}
	s.adapters = vs
	return vs, enabled, nil
}

// catalogMCP returns the catalog's tools as MCP offers them, and the dedupe windows of
// every tool: --mcp-dedupe-window's, and each catalog tool's dedupe_window.
func (s *Server) catalogMCP() ([]mcpserver.ExtraTool, map[string]time.Duration) {
	var rt *catalog.Runtime
	if s.catalog != nil {
		rt = s.catalog.Current()
	}
	return s.catalogMCPOf(rt)
}

// catalogMCPOf is catalogMCP for the catalog rt (nil: none).
func (s *Server) catalogMCPOf(rt *catalog.Runtime) ([]mcpserver.ExtraTool, map[string]time.Duration) {
	windows := maps.Clone(s.cfg.MCPDedupeWindows)
	var extra []mcpserver.ExtraTool
	for _, t := range s.cfg.Tools {
		extra = append(extra, mcpserver.ExtraTool{Name: t.Tool.Name, Description: t.Description, InputSchema: t.InputSchema, Class: mcpserver.ClassWrite})
	}
	if rt == nil {
		return extra, windows
	}
	if windows == nil {
		windows = map[string]time.Duration{}
	}
	cat := rt.Catalog()
	for _, name := range cat.Names() {
		t := cat.Tools[name]
		et := mcpserver.ExtraTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Class: t.Class,
			Passthrough: t.Upstream != "", Tenant: t.TenantID}
		if t.Class == catalog.ClassRead {
			et.Read = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
				return rt.Read(ctx, name, args)
			}
		}
		if t.DedupeWindow != nil {
			windows[name] = *t.DedupeWindow
		}
		extra = append(extra, et)
	}
	return extra, windows
}

// StdioMCP returns the MCP server of `oncebox mcp` over stdio: the tools /mcp offers
// (built-in, catalog and upstream, with the same names, classes, annotations and
// dedupe windows), calls naming no conversation in _meta belonging to conversation
// when it is not "". It needs the API role; ErrNoTools (mcpserver's) when no tool is
// enabled.
func (s *Server) StdioMCP(conversation string) (*mcpserver.Server, error) {
	if s.apiOutbox == nil {
		return nil, errors.New("oncebox mcp needs the api role")
	}
	extra, windows := s.catalogMCP()
	return mcpserver.New(mcpserver.Config{Outbox: s.apiOutbox, Tenants: s.tenants, Logger: s.logger, Wait: s.cfg.MCPWait,
		OnStoreUnavailable: func() { s.metrics.StoreUnavailable("mcp") },
		Conversation:       conversation, DedupeWindows: windows, Tools: extra})
}

// logNoWindow logs the write and unsafe tools MCP offers whose calls naming no
// conversation are deduplicated only within their session (dedupe window 0).
func (s *Server) logNoWindow() {
	if names := s.mcp.NoWindow(); len(names) > 0 {
		s.logger.Warn("these write tools have no cross-session dedupe (dedupe window 0): identical MCP calls naming no conversation from two sessions are two ops",
			slog.Any("tools", names))
	}
}

// toolInfos lists, for GET /v1/tools, the built-in tools the outbox holds and every
// catalog tool.
func (s *Server) toolInfos() []api.ToolInfo {
	var out []api.ToolInfo
	for _, t := range mcpserver.BuiltinTools() {
		if _, ok := s.apiOutbox.Tools().Lookup(t.Name); ok {
			out = append(out, api.ToolInfo{Name: t.Name, Class: t.Class, Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	for _, t := range s.cfg.Tools {
		out = append(out, api.ToolInfo{Name: t.Tool.Name, Class: "write", Description: t.Description, InputSchema: t.InputSchema})
	}
	if s.catalog != nil {
		cat := s.catalog.Current().Catalog()
		for _, name := range cat.Names() {
			t := cat.Tools[name]
			out = append(out, api.ToolInfo{Name: t.Name, Class: t.Class, Description: t.Description, InputSchema: t.InputSchema,
				Tenant: t.TenantID})
		}
	}
	return out
}

// slots returns the per-tenant wait cap the HTTP API and MCP share
// (--max-waits-per-tenant).
func (s *Server) slots() *opwait.Slots {
	if s.waitSlots == nil {
		n := s.cfg.MaxWaitsPerTenant
		if n <= 0 {
			n = 100
		}
		s.waitSlots = opwait.NewSlots(n)
	}
	return s.waitSlots
}

// upstreamHealth reports the catalog's upstream MCP servers for /healthz, or is nil
// without any. Their last errors are shown only to an admin (isAdmin): /healthz needs
// no token, and an upstream's error text is the upstream's to write.
func (s *Server) upstreamHealth() func(*http.Request) any {
	if s.catalog == nil || len(s.catalog.Current().Catalog().Upstreams) == 0 {
		return nil
	}
	return func(r *http.Request) any {
		h := s.catalog.Health()
		if ok, _, _ := s.isAdmin(r); !ok {
			cat := s.catalog.Current().Catalog()
			for name, u := range h {
				if cat.TenantOf(name) != "" {
					delete(h, name) // a tenant's own upstream is no one else's to know of
					continue
				}
				u.LastError = ""
				h[name] = u
			}
		}
		return h
	}
}

// reads is the catalog's read tools for the API, or nil.
func (s *Server) reads() api.Reader {
	if s.catalog == nil {
		return nil
	}
	return s.catalog
}

// catalogRedactKey is the key of the catalog's redaction hashes: derived from the seal
// key, nil without one (then a tool that redacts refuses to start, see build).
func (s *Server) catalogRedactKey() []byte {
	sealKey, err := base64.StdEncoding.DecodeString(s.cfg.SealKey)
	if s.cfg.SealKey == "" || err != nil || len(sealKey) != seal.KeySize {
		return nil
	}
	return redactionKey(sealKey)
}

// toolsChanged is told that an upstream announced notifications/tools/list_changed:
// its tools are listed again in the background (relistUpstream), off the SDK's
// notification handler.
func (s *Server) toolsChanged(upstream string) {
	if !s.catalogReady.Load() {
		return // still connecting at start: the list being read is the current one
	}
	go func() {
		ctx, cancel := context.WithTimeout(s.streams, 2*s.cfg.WebhookTimeout)
		defer cancel()
		_ = s.relistUpstream(ctx, upstream) // logged
	}()
}

// catalogQueue is the queue of a catalog vendor: a target goes through the webhook
// adapter and takes the webhook queue's settings (--webhook-workers,
// --webhook-job-timeout), in a queue of its own; an upstream MCP server takes them
// too, but for the workers and job_timeout its catalog entry sets.
func (s *Server) catalogQueue(v vendorapi.Vendor) dispatch.QueueConfig {
	q := s.cfg.Queues[tools.VendorWebhook]
	if q.JobTimeout == 0 {
		q.JobTimeout = dispatch.DefaultJobTimeout
	}
	if uq, ok := v.(interface{ Queue() dispatch.QueueConfig }); ok {
		own := uq.Queue()
		if own.MaxWorkers > 0 {
			q.MaxWorkers = own.MaxWorkers
		}
		if own.JobTimeout > 0 {
			q.JobTimeout = own.JobTimeout
		}
	}
	return q
}

// loadCatalog reads --tools-file and --tenant-catalogs and connects them to their
// targets.
func (s *Server) loadCatalog(ctx context.Context) error {
	if s.cfg.ToolsFile == "" && s.cfg.TenantCatalogs == "" {
		return nil
	}
	rt, err := s.connectCatalog(ctx)
	if err != nil {
		return err
	}
	s.catalog = catalog.NewLive(rt)
	s.catalogReady.Store(true)
	return nil
}

// connectCatalog reads --tools-file, connects it to its targets and upstreams, and
// checks it against the settings. ctx bounds connecting to the upstreams.
func (s *Server) connectCatalog(ctx context.Context) (*catalog.Runtime, error) {
	cat, err := s.readCatalogs(ctx)
	if err != nil {
		return nil, err
	}
	var prev *catalog.Runtime
	if s.catalog != nil {
		prev = s.catalog.Current() // a reload: unchanged upstreams keep their sessions
	}
	rt, err := cat.Connect(catalog.Options{Timeout: s.cfg.WebhookTimeout, LookupLag: s.cfg.WebhookLookupLag, Logger: s.logger,
		Context: context.WithoutCancel(ctx), Observer: s.metrics, OnToolsChanged: s.toolsChanged, RedactKey: s.catalogRedactKey(),
		Previous: prev})
	if err != nil {
		return nil, err
	}
	// Catalog targets run under the webhook queue's job timeout (an upstream under its
	// own job_timeout, if set); one that does not deduplicate keys needs the lookup lag
	// to cover it (see Config.validate).
	for _, v := range rt.Vendors() {
		jt := s.catalogQueue(v).JobTimeout
		if _, upstream := v.(interface{ Queue() dispatch.QueueConfig }); upstream && jt <= s.cfg.WebhookTimeout {
			rt.Close()
			return nil, fmt.Errorf("%s: upstream %s: job_timeout %s must be longer than each call's --webhook-timeout %s",
				s.cfg.ToolsFile, strings.TrimPrefix(v.Name(), catalog.VendorPrefix), jt, s.cfg.WebhookTimeout)
		}
		if !v.Idempotency().Native && v.LookupLag() < jt {
			rt.Close()
			return nil, fmt.Errorf("--webhook-lookup-lag %s must be at least the webhook job timeout %s (--webhook-job-timeout): catalog target %s "+
				"does not deduplicate requests (native_keys: false), and a request may still reach it until its job times out, "+
				"so an empty lookup any earlier could send it twice", v.LookupLag(), jt, v.Name())
		}
	}
	return rt, nil
}

// redactionKey derives the key of redaction hashes from the seal key, so that a stored
// address cannot be recovered by hashing guesses.
func redactionKey(sealKey []byte) []byte {
	mac := hmac.New(sha256.New, sealKey)
	mac.Write([]byte("oncebox redaction hash key"))
	return mac.Sum(nil)
}

// build makes the server's parts, in order: metrics, vendor events, the catalog, the
// vendors and their tools, the reconciler, the process's fleet membership, the
// outbox, and, for the API role, the API's own outbox and the HTTP handler.
func (s *Server) build(ctx context.Context) error {
	cfg := s.cfg
	s.metrics = metrics.New(metrics.Config{Pool: s.apiPool, Logger: s.logger, RefreshInterval: cfg.MetricsRefresh})
	var err error
	s.events, err = vendorevents.New(vendorevents.Config{Pool: s.pool, Retention: cfg.VendorEventRetention,
		Observer: s.metrics, Logger: s.logger})
	if err != nil {
		return fmt.Errorf("vendor events: %w", err)
	}
	if err := s.loadCatalog(ctx); err != nil {
		return err
	}
	vendors, enabled, err := s.vendors()
	if err != nil {
		return err
	}
	sealKey, redactKey, err := cfg.sealKeys()
	if err != nil {
		return err
	}
	toolList, err := s.buildRegistry(enabled, redactKey)
	if err != nil {
		return err
	}
	if err := requireSealKey(toolList, sealKey); err != nil {
		return err
	}
	// The process registers before its River client exists, under the client's id, so
	// that the jobs it runs name it; Join refuses a schema this binary cannot run on.
	member, err := fleet.Join(ctx, fleet.Config{Pool: s.pool, ID: dispatch.NewClientID(), Logger: s.logger})
	if err != nil {
		return err
	}
	s.fleet = member
	if s.gov, err = s.governance(s.pool); err != nil {
		return err
	}
	ocfg, err := s.outboxConfig(vendors, sealKey)
	if err != nil {
		return err
	}
	if err := s.buildOutbox(ocfg); err != nil {
		return err
	}
	if cfg.Roles.API {
		// The API's own outbox: the same tools and settings on the API's pool, insert-only.
		apiCfg := ocfg
		apiCfg.Pool, apiCfg.Work = s.apiPool, new(bool)
		apiCfg.Purge, apiCfg.ExtraWorkers, apiCfg.PeriodicJobs = nil, nil, nil
		apiCfg.Reconcile.Periodic = false
		apiCfg.ClientID = "" // insert-only: an id of its own, not the registered one
		if s.apiGov, err = s.governance(s.apiPool); err != nil {
			return err
		}
		apiCfg.Gate = s.apiGov
		if s.apiOutbox, err = outbox.New(apiCfg); err != nil {
			return err
		}
		if err := s.buildHTTP(ctx); err != nil {
			return err
		}
	}
	return nil
}

// sealKeys decodes ONCEBOX_SEAL_KEY, and derives the key of redaction hashes from it;
// both are nil without a seal key.
func (cfg Config) sealKeys() (sealKey, redactKey []byte, err error) {
	if cfg.SealKey == "" {
		return nil, nil, nil
	}
	sealKey, err = base64.StdEncoding.DecodeString(cfg.SealKey)
	if err != nil || len(sealKey) != seal.KeySize {
		return nil, nil, fmt.Errorf("ONCEBOX_SEAL_KEY must be the base64 of %d random bytes (openssl rand -base64 32)", seal.KeySize)
	}
	return sealKey, redactionKey(sealKey), nil
}

// builtinTools returns the built-in tools of the enabled vendors.
func (s *Server) builtinTools(enabled []string, redactKey []byte) []vendorapi.Tool {
	cfg := s.cfg
	targets := make([]string, 0, len(cfg.WebhookTargets))
	for name := range cfg.WebhookTargets {
		targets = append(targets, name)
	}
	ttl := map[string]time.Duration{}
	for _, name := range []string{protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolMail, protocol.ToolWebhookPost} {
		ttl[name] = cfg.TTL
		if d, ok := cfg.ToolTTL[name]; ok {
			ttl[name] = d
		}
	}
	var toolList []vendorapi.Tool
	for _, t := range tools.Builtin(tools.Config{WebhookTargets: targets, TTL: ttl,
		NoMailRedaction: !cfg.RedactMail, RedactKey: redactKey}) {
		if t.Name == protocol.ToolRefund && s.stripe != nil {
			t.Price = s.stripe.PriceRefund
			t.Objects = s.refundObjects(t.Objects)
		}
		// A read-only command knows every built-in tool, configured or not, to show
		// the ops of each (their amounts, refunds and charges) without vendor keys.
		if cfg.ReadOnly || slices.Contains(enabled, t.Vendor) {
			toolList = append(toolList, t)
		}
	}
	return toolList
}

// refundObjects returns the refund tool's objects with Stripe asked which op each is
// tagged with (vendors/stripe's PaymentIntentTag and ChargeTag).
func (s *Server) refundObjects(objects []vendorapi.ObjectArg) []vendorapi.ObjectArg {
	out := slices.Clone(objects)
	for i := range out {
		switch out[i].Arg {
		case "payment_intent":
			out[i].Tag = s.stripe.PaymentIntentTag
		case "charge":
			out[i].Tag = s.stripe.ChargeTag
		}
	}
	return out
}

// buildRegistry makes the registry of the tools this process records (s.registry):
// the built-in tools of the enabled vendors, the configured tools (s.baseTools with
// the built-in ones) and the catalog's; none when read-only. It returns the tools.
func (s *Server) buildRegistry(enabled []string, redactKey []byte) ([]vendorapi.Tool, error) {
	cfg := s.cfg
	toolList := s.builtinTools(enabled, redactKey)
	for _, t := range cfg.Tools {
		toolList = append(toolList, t.Tool)
	}
	s.baseTools = slices.Clone(toolList)
	if s.catalog != nil {
		toolList = append(toolList, s.catalog.Current().Tools(cfg.TTL)...)
	}
	described, err := outbox.NewRegistry(toolList...)
	if err != nil {
		return nil, err
	}
	s.described = described
	if cfg.ReadOnly {
		// Nothing is recorded or sent: the outbox reads with the described tools (a
		// lookup shows amounts, refunds and charges), without their redaction (nothing
		// is stored, so no seal key is needed and nothing warns about one), and no
		// tool is returned to run; the vendors stay, for lookups and the finance report.
		read := make([]vendorapi.Tool, 0, len(toolList))
		for _, t := range toolList {
			t.Redact, t.RedactResult = nil, nil
			read = append(read, t)
		}
		if s.registry, err = outbox.NewRegistry(read...); err != nil {
			return nil, err
		}
		return nil, nil
	}
	if len(toolList) == 0 {
		s.logger.Warn("no vendor is configured, so no tool is enabled: set STRIPE_API_KEY, SENDGRID_API_KEY or ONCEBOX_WEBHOOK_TARGETS (or run `oncebox dev`)")
	}
	reg, err := outbox.NewRegistry(toolList...)
	if err != nil {
		return nil, err
	}
	s.registry = reg
	s.described = reg // the same tools, and a catalog reload replaces them in place
	return toolList, nil
}

// requireSealKey refuses a tool that redacts without a seal key.
func requireSealKey(toolList []vendorapi.Tool, sealKey []byte) error {
	for _, t := range toolList {
		if t.Redact != nil && sealKey == nil {
			// Without a key the full arguments would sit in the database in clear until
			// the op settles: redaction would be a promise not kept.
			off := "turn mail redaction off with --redact-mail=false"
			if t.Name != protocol.ToolMail {
				off = "remove its redact from the tool catalog"
			}
			return fmt.Errorf("%s needs a seal key: set ONCEBOX_SEAL_KEY to the same value on every process, oncebox serve and oncebox mcp "+
				"(make one with openssl rand -base64 32), or %s", t.Name, off)
		}
	}
	return nil
}

// outboxConfig is the configuration of this process's outbox, on s.pool, registered
// as s.fleet's member.
func (s *Server) outboxConfig(vendors []vendorapi.Vendor, sealKey []byte) (outbox.Config, error) {
	cfg := s.cfg
	work := cfg.Roles.Worker || cfg.Roles.Periodic
	batched := cfg.BatchedCompletion
	ocfg := outbox.Config{
		Pool:                 s.pool,
		Tools:                s.registry,
		Work:                 &work,
		MaxAttempts:          cfg.MaxAttempts,
		RetryBackoff:         dispatch.CappedBackoff(cfg.RetryMaxBackoff),
		BatchedCompletion:    &batched,
		ClaimCommit:          cfg.ClaimCommit,
		GroupCommit:          outbox.GroupCommit{MaxOps: cfg.GroupCommitOps, Committers: cfg.GroupCommitters},
		AdmissionReadTimeout: cfg.AdmissionReadTimeout,
		MixedVersions:        s.fleet.Mixed,
		ClientID:             s.fleet.ID(),
		RescueStuckJobsAfter: cfg.RescueStuckJobsAfter,
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cfg.FetchPollInterval,
		Queues:               map[string]dispatch.QueueConfig{},
		Observer:             s.metrics,
		Logger:               s.logger,
		SealKey:              sealKey,
		ApprovalExpiry:       cfg.ApprovalExpiry,
		Gate:                 s.gov,
		TracerProvider:       cfg.TracerProvider,
		Reconcile:            s.reconcileConfig(),
	}
	if cfg.NotifyURL != "" {
		if cfg.NotifySecret == "" {
			return outbox.Config{}, errors.New("--notify-url needs --notify-secret (ONCEBOX_NOTIFY_SECRET), the shared secret that signs each notification")
		}
		ocfg.Notify = &notify.Config{URL: cfg.NotifyURL, Secret: []byte(cfg.NotifySecret), LinkBase: strings.TrimRight(cfg.NotifyLinkBase, "/"),
			Timeout: cfg.NotifyTimeout}
	}
	ocfg.Vendors = vendors
	ocfg.NoDispatch = !cfg.Roles.Worker
	for _, v := range vendors {
		q, ok := cfg.Queues[v.Name()]
		if !ok && strings.HasPrefix(v.Name(), catalog.VendorPrefix) {
			q = s.catalogQueue(v)
		}
		ocfg.Queues[v.Name()] = q
	}
	if cfg.Roles.Periodic {
		s.periodicConfig(&ocfg)
	}
	return ocfg, nil
}

// periodicConfig sets the jobs of the periodic role in ocfg beside the sweep the outbox
// runs itself (reconcileConfig): the purge and the vendor events' cleanup.
func (s *Server) periodicConfig(ocfg *outbox.Config) {
	cfg := s.cfg
	ocfg.Purge = &purge.Config{Interval: cfg.PurgeInterval, BatchSize: cfg.PurgeBatch, TombstoneTTL: cfg.TombstoneTTL}
	ocfg.ExtraWorkers = s.events.Register
	ocfg.PeriodicJobs = []*river.PeriodicJob{s.events.PeriodicJob(reconcile.MaintenanceQueue)}
}

// buildOutbox makes this process's outbox (s.outbox), explaining a tool kept less
// long than its vendor's key window in terms of the flags that set it.
func (s *Server) buildOutbox(ocfg outbox.Config) error {
	var err error
	s.outbox, err = outbox.New(ocfg)
	var ttlErr *outbox.TTLError
	if errors.As(err, &ttlErr) {
		return fmt.Errorf("%s is kept %s (--ttl, or --tool-ttl %s=…), less than %s's idempotency key window of %s: "+
			"a retry after the purge would be sent again as a new op; set --ttl or --tool-ttl %s=%s or more",
			ttlErr.Tool, ttlErr.TTL, ttlErr.Tool, ttlErr.Vendor, ttlErr.Window, ttlErr.Tool, ttlErr.Window)
	}
	return err
}

// acceptAccessTokens makes every door accept the access tokens of the configured
// authorization server (OAuthIssuer), if any.
func (s *Server) acceptAccessTokens() error {
	if s.cfg.OAuthIssuer == "" {
		return nil
	}
	v, err := oauth.New(oauth.Config{Issuer: s.cfg.OAuthIssuer, Audience: s.cfg.oauthAudience(), TenantClaim: s.cfg.OAuthTenantClaim})
	if err != nil {
		return fmt.Errorf("--oauth-issuer: %w", err)
	}
	s.oauth = v
	s.tenants.AcceptAccessTokens(v)
	return nil
}

// resourceMetadataURL is the protected resource metadata's URL when access tokens are
// accepted, else "".
func (s *Server) resourceMetadataURL() string {
	if s.oauth == nil {
		return ""
	}
	return s.oauth.MetadataURL()
}

// reconcileConfig is the outbox's reconciler configuration: the reconcile settings, run
// periodically in a process with the periodic role.
func (s *Server) reconcileConfig() reconcile.Config {
	cfg := s.cfg
	return reconcile.Config{Periodic: cfg.Roles.Periodic, Interval: cfg.ReconcileInterval, ResendOnNone: cfg.ResendOnNone,
		Observer: s.metrics, MaxAttempts: cfg.MaxAttempts, Timeout: cfg.ReconcileSweepTimeout,
		RetryLookupAfter: cfg.ReconcileRetryAfter, BatchSize: cfg.ReconcileBatch, Concurrency: cfg.ReconcileConcurrency,
		StuckMargin: cfg.ReconcileStuckMargin}
}

func (s *Server) buildHTTP(ctx context.Context) error {
	cfg := s.cfg
	apiHandler, err := api.New(api.Config{Outbox: s.apiOutbox, Governance: s.apiGov, Tenants: s.tenants, AuditLog: s.apiPool, Logger: s.logger,
		MaxBodyBytes: cfg.MaxBodyBytes, MaxWait: cfg.MaxWait, MaxWaitsPerTenant: cfg.MaxWaitsPerTenant, AuditExports: s.auditExports, Notifications: s.waitHub, WaitSlots: s.slots(),
		UnavailableRetryAfter: cfg.UnavailableRetryAfter, Observer: s.metrics, Tools: s.toolInfos(), Reads: s.reads(),
		Upstreams: s.upstreamHealth(), ResourceMetadataURL: s.resourceMetadataURL()})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	s.api = apiHandler
	events, err := vendorevents.NewHandler(vendorevents.HandlerConfig{Store: s.events, StripeSecret: cfg.StripeWebhookSecret,
		TenantSecrets:     tenantEventSecrets{tenants: s.tenants, settings: s.outbox.VendorSettings()},
		SendGridPublicKey: cfg.SendGridEventPublicKey, SendGridTolerance: cfg.SendGridEventTolerance,
		MaxBodyBytes: cfg.VendorEventMaxBodyBytes, UnavailableRetryAfter: cfg.UnavailableRetryAfter, Logger: s.logger,
		OnEvents: func(ctx context.Context, _ string, opIDs []string) error { return s.outbox.CheckSoon(ctx, opIDs) }})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", apiHandler)
	web, err := console.New(console.Config{Outbox: s.apiOutbox, Tenants: s.tenants, Pool: s.apiPool, Report: s.Report,
		Events: s.events, Replays: s.metrics.Replays, Budgets: s.budgetLines, SessionTTL: cfg.ConsoleSessionTTL, Logger: s.logger,
		AuditDownloads: s.auditExports, SecureCookies: cfg.PublicHTTPS(), TrustForwardedProto: cfg.TrustForwardedProto})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	mux.Handle("/console/", web)
	mux.Handle("GET /console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	mux.Handle("/v1/vendor-events/", events)
	if s.oauth != nil {
		for _, p := range s.oauth.MetadataPaths() {
			mux.Handle(p, s.oauth.MetadataHandler())
		}
	}
	extra, windows := s.catalogMCP()
	if len(s.apiOutbox.Tools().Names()) > 0 || len(extra) > 0 {
		mcp, err := mcpserver.New(mcpserver.Config{Outbox: s.apiOutbox, Tenants: s.tenants, Logger: s.logger, Wait: cfg.MCPWait,
			Notifications: s.waitHub, WaitSlots: s.slots(),
			OnStoreUnavailable: func() { s.metrics.StoreUnavailable("mcp") },
			SessionIdleTimeout: cfg.MCPSessionIdleTimeout, MaxSessionsPerTenant: cfg.MCPMaxSessionsPerTenant,
			DedupeWindows: windows, Tools: extra, AllowedOrigins: cfg.mcpOrigins(), ResourceMetadataURL: s.resourceMetadataURL(),
			ConsoleURL: cfg.consoleURL()})
		if err != nil {
			return fmt.Errorf("mcp: %w", err)
		}
		s.mcp = mcp
		s.logNoWindow()
		s.metrics.WatchMCPSessions(mcp.Sessions)
		mcpHandler := s.endOnShutdown(mcp.HTTPHandler())
		mux.Handle("/mcp", mcpHandler)
		mux.Handle("/mcp/", mcpHandler)
	} else {
		noTools := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "no tool is enabled: configure a vendor (STRIPE_API_KEY, SENDGRID_API_KEY or ONCEBOX_WEBHOOK_TARGETS)", http.StatusServiceUnavailable)
		})
		mux.Handle("/mcp", noTools)
		mux.Handle("/mcp/", noTools)
	}
	mux.Handle("GET /metrics", s.admin(s.metrics.Handler(), false))
	s.health.register(mux)
	ui, err := s.newRiverUI()
	if err != nil {
		return err
	}
	s.riverUI = ui
	// Browsers replay basic auth on cross-site requests, and River UI's API takes
	// bodies a cross-site form can send: refuse every cross-origin request that is
	// not a safe method (Sec-Fetch-Site, else Origin against Host).
	mux.Handle("/riverui/", http.NewCrossOriginProtection().Handler(s.admin(ui, true)))
	s.handler = s.hsts(mux)
	return nil
}

// newRiverUI builds River UI on an insert-only River client of its own on the API's
// pool: it reads and changes River's tables, and works no job.
func (s *Server) newRiverUI() (*riverui.Handler, error) {
	jobs, err := river.NewClient(riverpgxv5.New(s.apiPool), &river.Config{Logger: s.logger})
	if err != nil {
		return nil, fmt.Errorf("river ui: river client: %w", err)
	}
	ui, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(jobs, nil),
		Logger:    s.logger,
		Prefix:    "/riverui",
	})
	if err != nil {
		return nil, fmt.Errorf("river ui: %w", err)
	}
	return ui, nil
}

// hstsValue is the Strict-Transport-Security of an answer over HTTPS: a year, this
// host only (oncebox cannot know its parent domain's other hosts serve HTTPS).
const hstsValue = "max-age=31536000"

// hsts adds Strict-Transport-Security to every answer to a request made over HTTPS:
// over TLS, whenever --public-url is https, or with --trust-forwarded-proto when the
// proxy's X-Forwarded-Proto says https.
func (s *Server) hsts(next http.Handler) http.Handler {
	public := s.cfg.PublicHTTPS()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil || public || (s.cfg.TrustForwardedProto && console.ForwardedHTTPS(r)) {
			w.Header().Set("Strict-Transport-Security", hstsValue)
		}
		next.ServeHTTP(w, r)
	})
}

// tenantEventSecrets finds a tenant's own Stripe signing secret for its own event
// endpoint.
type tenantEventSecrets struct {
	tenants  *tenant.Store
	settings *vendoraccount.Settings
}

// StripeEventSecret implements vendorevents.TenantSecrets.
func (t tenantEventSecrets) StripeEventSecret(ctx context.Context, name string) (int64, string, error) {
	tn, err := t.tenants.ByName(ctx, name)
	if errors.Is(err, tenant.ErrNotFound) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	secret, err := t.settings.Secret(ctx, tn.ID, vendoraccount.StripeEvents)
	return tn.ID, secret, err
}

// budgetLines are the console's Budgets page: the budgets in force for the tenant, what
// each used, and how many ops wait because of it.
func (s *Server) budgetLines(ctx context.Context, tenantID int64) ([]console.BudgetLine, error) {
	usage, err := s.apiGov.BudgetUsage(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	waiting, err := s.apiGov.WaitingByBudget(ctx, tenantID)
	if err != nil {
		return nil, err
	}
	lines := make([]console.BudgetLine, 0, len(usage))
	for _, u := range usage {
		lines = append(lines, console.BudgetLine{Name: u.Budget.Name, Source: string(u.Source), Tool: u.Budget.Tool, Scope: u.Scope,
			Currency: u.Currency, Window: governance.FormatWindow(time.Duration(u.Budget.Window)), Used: u.Used, Limit: u.Limit, Left: u.Left,
			WindowEnd: u.WindowEnd, Waiting: waiting[u.Budget.Name]})
	}
	return lines, nil
}

// governance is the gate of an outbox on pool: the installation's stored approval
// rules and budgets (SeedPolicy stores the flags'), the tenants' own, and the catalogs'
// approval rules under them.
func (s *Server) governance(pool *pgxpool.Pool) (*governance.Governance, error) {
	return governance.New(governance.Config{Pool: pool, Tools: s.registry, Approvals: s.approvals(),
		Observer: s.metrics, Logger: s.logger})
}

// approvals is the catalog's approval rules: the defaults of its tools under the
// installation's stored rules. The flags' rules are not among them: they only seed the
// stored ones (SeedPolicy), so that every process reads the same rule.
func (s *Server) approvals() governance.ApprovalPolicy {
	p := governance.ApprovalPolicy{}
	if s.catalog != nil {
		for tool, r := range s.catalog.Current().Approvals() {
			p[tool] = r
		}
	}
	return p
}

// SeedPolicy stores the approval rules and budgets of the flags (--approval-policy,
// --refund-approval-above, --budgets) that the installation does not store yet under
// their tool or name, and logs what it stored and each stored rule or budget that
// differs from the flags': the stored one stays in force (change it with `oncebox
// policy`). serve, dev and mcp call it at start; the other commands read the stored
// policy only.
func (s *Server) SeedPolicy(ctx context.Context) error {
	host, _ := os.Hostname()
	res, err := s.gov.SeedInstallation(ctx, governance.Seed{Approvals: s.cfg.DefaultApprovals(), Budgets: s.cfg.Budgets,
		By: "seed: flags of a process on " + host})
	if err != nil {
		return err
	}
	for _, name := range res.Stored {
		s.logger.Info("policy: stored the flags' "+name+" as the installation's", slog.String("seeded", name))
	}
	for _, k := range res.Kept {
		s.logger.Warn("policy: the installation's stored "+k.Kind+" "+k.Name+" differs from this process's flags and stays in force: "+
			"flags only seed what is not stored; change it with `oncebox policy`",
			slog.String("stored", string(k.Stored)), slog.String("flags", string(k.Seeded)), slog.String("stored_by", k.UpdatedBy))
	}
	s.logger.Info("policy: approval rules and budgets are read from the database (oncebox policy show)",
		slog.Int("seeded", len(res.Stored)), slog.Int("kept", len(res.Kept)))
	return nil
}

// DefaultApprovals is the configured default approval policy, with the shorthand
// RefundApprovalAbove as the stripe.refund rule when the policy has none.
func (cfg Config) DefaultApprovals() governance.ApprovalPolicy {
	p := governance.ApprovalPolicy{}
	for tool, r := range cfg.ApprovalPolicy {
		p[tool] = r
	}
	if _, ok := p[protocol.ToolRefund]; !ok && cfg.RefundApprovalAbove > 0 {
		p[protocol.ToolRefund] = governance.ApprovalRule{Mode: governance.ApprovalAbove, Above: map[string]int64{governance.AnyCurrency: cfg.RefundApprovalAbove}}
	}
	return p
}

// endOnShutdown ends h's GET requests when shutdown begins: MCP's standalone streams
// stay open for as long as the client listens and would otherwise hold the HTTP server's
// shutdown for the whole grace period. Tool calls (POST) are left to answer: they wait
// at most --mcp-wait.
func (s *Server) endOnShutdown(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		// A standalone stream lives as long as the client listens: the server's write
		// timeout, meant for requests that answer, does not apply to it.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		stop := context.AfterFunc(s.streams, cancel)
		defer stop()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// admin guards operator endpoints: River UI always, /metrics only when --admin-token is
// set. They open to the configured admin token and to API tokens whose role is operator,
// never to a tenant's admin token: operator endpoints span every tenant. The token may come as a bearer token or, for a browser, as the
// password of basic auth.
func (s *Server) admin(next http.Handler, required bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.AdminToken == "" && !required {
			next.ServeHTTP(w, r)
			return
		}
		ok, p, err := s.isAdmin(r)
		if err != nil {
			s.logger.LogAttrs(r.Context(), slog.LevelError, "admin authentication failed", slog.Any("error", err))
			http.Error(w, "authentication is unavailable; retry later", http.StatusServiceUnavailable)
			return
		}
		if ok {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Basic realm="oncebox admin"`)
		w.Header().Add("WWW-Authenticate", `Bearer realm="oncebox admin"`)
		if p != nil {
			http.Error(w, fmt.Sprintf("operator-only: this API token has the role %s; River UI and the other installation-wide "+
				"endpoints show every tenant, so they need the installation's admin token (--admin-token) or an operator token "+
				"(oncebox tenant token create --role operator)", p.Role), http.StatusForbidden)
			return
		}
		http.Error(w, "admin token required", http.StatusUnauthorized)
	})
}

// isAdmin says whether r carries the configured admin token or an API token whose role
// is operator (as a bearer token, or as the password of basic auth). p is the API token's
// principal when r carries a valid one; err is a failure to check, not a refusal.
func (s *Server) isAdmin(r *http.Request) (ok bool, p *tenant.Principal, err error) {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	if _, pw, basic := r.BasicAuth(); basic {
		got = pw
	}
	if got == "" {
		return false, nil, nil
	}
	if want := s.cfg.AdminToken; want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1 {
		return true, nil, nil
	}
	p, err = s.tenants.Authenticate(r.Context(), got)
	if errors.Is(err, tenant.ErrUnauthorized) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, err
	}
	return p.Role.CanOperate(), p, nil
}

// Report builds the finance report of a window, for one tenant (0: every tenant),
// comparing the ops with the objects of the vendors configured in this process. The
// console's finance page and `oncebox reconcile report` both call it.
func (s *Server) Report(ctx context.Context, since, until time.Time, tenantID int64) (*finance.Report, error) {
	return finance.BuildReport(ctx, s.pool, finance.ReportParams{Since: since, Until: until, TenantID: tenantID, Listers: s.listers,
		Unlistable: []string{tools.VendorWebhook}, Events: s.events,
		Payments: func(ctx context.Context, tenantID int64, tool string, args json.RawMessage) (*outbox.Payment, error) {
			return outbox.LookupPayment(ctx, s.pool, s.described, tenantID, tool, args)
		},
		Accounts: s.outbox.VendorSettings().Account})
}

// Handler returns the HTTP handler (nil without the API role).
func (s *Server) Handler() http.Handler { return s.handler }

// Waiting returns how many ?wait= requests the API holds open now (0 without the API
// role).
func (s *Server) Waiting() int {
	if s.api == nil {
		return 0
	}
	return s.api.Waiting()
}

// Outbox returns the outbox.
func (s *Server) Outbox() *outbox.Outbox { return s.outbox }

// Tenants returns the tenant store.
func (s *Server) Tenants() *tenant.Store { return s.tenants }

// Events returns the vendor event store (the finance report's EventSource).
func (s *Server) Events() *vendorevents.Store { return s.events }

// Listers returns the finance-report listers of the configured vendors.
func (s *Server) Listers() map[string]finance.Lister { return s.listers }

// Pool returns the Postgres pool of the workers and periodic jobs.
func (s *Server) Pool() *pgxpool.Pool { return s.pool }

// APIPool returns the Postgres pool of the API role's requests (the workers' pool
// without the API role).
func (s *Server) APIPool() *pgxpool.Pool { return s.apiPool }

// Listen binds the API address and HealthAddr (so a caller can learn a random port
// before Run).
func (s *Server) Listen() (net.Addr, error) {
	if err := s.listenHealth(); err != nil {
		return nil, err
	}
	if s.handler == nil {
		return nil, nil
	}
	if s.listener == nil && s.cfg.Listener != nil {
		s.listener = s.cfg.Listener
	}
	if s.listener == nil {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", s.cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
		}
		s.listener = l
	}
	return s.listener.Addr(), nil
}

// Run runs the configured roles until ctx is done, then shuts down: the HTTP server
// stops taking requests, River stops fetching, running dispatches get ShutdownGrace to
// finish (then they are cancelled and record what they know: unknown, or pending for a
// resend under the same key; nothing is lost). Long polls answer at once and MCP
// streams end.
func (s *Server) Run(ctx context.Context) error {
	// What can fail comes first, so that a failure leaves no worker running. A cell's
	// Server (embedded) is served by the router in front (Cells).
	if s.handler != nil {
		if !s.cfg.embedded {
			if _, err := s.Listen(); err != nil {
				return err
			}
		}
		if s.riverUI != nil {
			if err := s.riverUI.Start(ctx); err != nil {
				return fmt.Errorf("river ui: %w", err)
			}
		}
	}
	if err := s.listenHealth(); err != nil {
		if s.listener != nil {
			_ = s.listener.Close()
		}
		return err
	}
	stopHealth := s.serveHealth(s.healthL)
	defer stopHealth()
	if err := s.SeedPolicy(ctx); err != nil {
		if s.listener != nil {
			_ = s.listener.Close()
		}
		return err
	}
	stopMonitor := runBeside(ctx, s.monitorStore)
	defer stopMonitor()
	stopAudit, err := s.runAudit(ctx)
	if err != nil {
		return err
	}
	defer stopAudit()
	if s.notifications != nil && s.handler != nil {
		stopNotifications := runBeside(ctx, s.notifications.Run)
		defer stopNotifications()
	}
	if err := s.outbox.Start(ctx); err != nil {
		if s.listener != nil {
			_ = s.listener.Close()
		}
		return err
	}
	close(s.started)
	srv, httpErr := s.serveHTTP()
	s.logger.Info("oncebox running", slog.Bool("api", s.cfg.Roles.API), slog.Bool("worker", s.cfg.Roles.Worker),
		slog.Bool("periodic", s.cfg.Roles.Periodic))

	fleetCtx, stopFleet := context.WithCancel(context.WithoutCancel(ctx))
	fleetErr := make(chan error, 1)
	go func() { fleetErr <- s.fleet.Run(fleetCtx) }()
	defer func() { stopFleet(); <-fleetErr }()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-httpErr:
		if !errors.Is(err, http.ErrServerClosed) {
			runErr = fmt.Errorf("http server: %w", err)
		}
	case err := <-fleetErr:
		// Run returns before its context ends only on a schema this binary cannot run on.
		runErr = err
		fleetErr <- nil
	}
	return s.shutdown(ctx, srv, runErr)
}

// runBeside runs f in a goroutine of its own, with a context that outlives ctx's
// cancellation; stop cancels that context and waits for f to return.
func runBeside(ctx context.Context, f func(context.Context)) (stop func()) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { defer close(done); f(fctx) }()
	return func() { cancel(); <-done }
}

// serveHTTP serves the HTTP handler on s.listener, when this process has one; the
// channel gets what Serve returns.
func (s *Server) serveHTTP() (*http.Server, chan error) {
	httpErr := make(chan error, 1)
	if s.handler == nil || s.cfg.embedded {
		return nil, httpErr
	}
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: min(10*time.Second, s.cfg.HTTPReadTimeout),
		ReadTimeout: s.cfg.HTTPReadTimeout, WriteTimeout: s.cfg.HTTPWriteTimeout, IdleTimeout: s.cfg.HTTPIdleTimeout}
	go func() { httpErr <- srv.Serve(s.listener) }()
	s.logger.Info("oncebox serving", slog.String("addr", s.listener.Addr().String()))
	return srv, httpErr
}

// shutdown stops the HTTP server srv (nil: none) and the outbox within the shutdown
// grace, and returns runErr, or else the outbox's error in stopping.
func (s *Server) shutdown(ctx context.Context, srv *http.Server, runErr error) error {
	s.health.stopping.Store(true) // readiness goes false first; liveness stays true
	s.logger.Info("shutting down", slog.Duration("grace", s.cfg.ShutdownGrace))
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	// The HTTP server and the workers stop side by side, each within the grace: long
	// polls answer at once, and running dispatches get the whole grace to finish.
	httpDone := make(chan struct{})
	go func() {
		defer close(httpDone)
		if srv == nil && !s.cfg.embedded {
			return
		}
		if s.api != nil {
			s.api.EndWaits()
		}
		s.endStreams()
		if srv == nil {
			return // the router in front shuts its HTTP server down
		}
		if err := srv.Shutdown(shutdownCtx); err != nil {
			s.logger.Warn("HTTP requests still open at the end of the grace period", slog.Any("error", err))
		}
	}()
	if err := s.outbox.Stop(shutdownCtx); err != nil && runErr == nil {
		runErr = err
	}
	<-httpDone
	s.logger.Info("stopped")
	return runErr
}

// Close releases the pools.
func (s *Server) Close() {
	if s.catalog != nil {
		s.catalog.Close() // the upstream MCP sessions and stdio processes
	}
	if s.apiPool != s.pool {
		s.apiPool.Close()
	}
	s.pool.Close()
}

// monitorStore checks every second that Postgres answers, sets oncebox_store_up, and
// logs when an outage begins and ends (with how long it lasted).
func (s *Server) monitorStore(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	up, downSince := true, time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := s.apiPool.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && up:
			up, downSince = false, time.Now()
			s.metrics.SetStoreUp(false)
			s.logger.Error("the database is unavailable: the API answers 503 store-unavailable until it is back", slog.Any("error", err))
		case err == nil && !up:
			up = true
			s.metrics.SetStoreUp(true)
			s.logger.Info("the database is back", slog.Duration("outage", time.Since(downSince).Round(time.Second)))
		}
	}
}

// errNoAnswer is waitForPostgres's error when Postgres did not answer in time.
var errNoAnswer = errors.New("no answer from Postgres")

// waitForPostgres pings until Postgres answers, so a process started while Postgres
// restarts waits for it instead of exiting.
func waitForPostgres(ctx context.Context, pool *pgxpool.Pool, wait time.Duration, logger *slog.Logger) error {
	deadline := time.Now().Add(wait)
	delay := 100 * time.Millisecond
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := pool.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().Add(delay).After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w within %s: %w", errNoAnswer, wait, err)
		}
		logger.Warn("waiting for Postgres", slog.Any("error", err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// runAudit runs, in a process with the periodic role, the audit log's sealer and, when
// an exporter is configured (--audit-otel-logs), its stream to a SIEM; stop stops both.
func (s *Server) runAudit(ctx context.Context) (stop func(), err error) {
	if !s.cfg.Roles.Periodic {
		return func() {}, nil
	}
	sealer, err := s.auditSealer()
	if err != nil {
		return nil, err
	}
	stopSealer := runBeside(ctx, sealer.Run)
	if s.cfg.AuditLogExporter == nil {
		return stopSealer, nil
	}
	streamer, err := audit.NewStreamer(audit.StreamConfig{Pool: s.pool, Exporter: s.cfg.AuditLogExporter,
		Resource: s.cfg.AuditLogResource, Interval: s.cfg.AuditOTelLogsInterval, Logger: s.logger})
	if err != nil {
		stopSealer()
		return nil, err
	}
	stopStreamer := runBeside(ctx, streamer.Run)
	s.logger.Info("audit log streamed as OpenTelemetry log records", slog.Duration("interval", s.cfg.AuditOTelLogsInterval))
	return func() { stopStreamer(); stopSealer() }, nil
}

// auditSealer is the audit log's sealer (docs/audit.md), run by the periodic role: one
// process seals at a time.
func (s *Server) auditSealer() (*audit.Sealer, error) {
	cfg := audit.Config{Pool: s.pool, Retention: s.cfg.AuditRetention, Logger: s.logger}
	if s.cfg.AuditSigningKey != "" {
		seed, err := base64.StdEncoding.DecodeString(s.cfg.AuditSigningKey)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, errors.New("--audit-signing-key: want the base64 of 32 random bytes (openssl rand -base64 32)")
		}
		cfg.SigningKey = ed25519.NewKeyFromSeed(seed)
	}
	return audit.NewSealer(cfg), nil
}
