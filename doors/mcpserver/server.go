package mcpserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/oncebox/oncebox/doors/opwait"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// Config configures a Server.
type Config struct {
	// Outbox records and reads ops. Required.
	Outbox *outbox.Outbox
	// Tenants authenticates the bearer tokens of HTTPHandler. Required.
	Tenants *tenant.Store
	// Logger receives one debug line per tool call and the real cause of internal
	// errors. Tokens and arguments are never logged. Defaults to discarding logs.
	Logger *slog.Logger
	// Wait is how long a tool call waits for the vendor's answer before telling the
	// model the op is still pending. Defaults to DefaultWait, 10 seconds.
	Wait time.Duration
	// Notifications, when set and listening, wakes a tool call's wait when its op
	// settles; without it (or while it reconnects) the wait polls Postgres. Optional.
	Notifications *opwait.Hub
	// WaitSlots caps the waits one tenant holds open at once: a tool call past the cap
	// answers at once with its op as it stands (pending). Share the HTTP API's
	// (api.Config.WaitSlots) so that both count against --max-waits-per-tenant.
	// Defaults to slots of its own, 100 per tenant.
	WaitSlots *opwait.Slots
	// Conversation names the conversation of tool calls that name none (no _meta
	// conversation id, no Oncebox-Conversation-Id header or query parameter): oncebox
	// mcp --conversation. Optional: without it such calls are deduplicated by the
	// tool's dedupe window, or, with the window off, within their MCP session or
	// server instance.
	Conversation string
	// SessionIdleTimeout closes an HTTP session that has seen no request for this long
	// (a client that never closes its sessions would otherwise pile them up). Defaults
	// to DefaultSessionIdleTimeout, 5 minutes.
	SessionIdleTimeout time.Duration
	// MaxSessionsPerTenant caps the HTTP sessions one tenant may hold open; one more
	// initialize is refused with the JSON-RPC error CodeTooManySessions. Defaults to
	// DefaultMaxSessionsPerTenant, 100.
	MaxSessionsPerTenant int
	// OnStoreUnavailable is called for each tool call refused because Postgres could
	// not be reached (metrics count them). Optional.
	OnStoreUnavailable func()
	// DedupeWindows is, per oncebox tool name, how long identical calls that name no
	// conversation (no _meta conversation id, no Oncebox-Conversation-Id header or
	// query parameter, no Conversation) are one op, whichever MCP session or process
	// sends them; 0 turns it off for the tool (such calls are then deduplicated within
	// their MCP session, or stdio process, only). Every write or unsafe tool it leaves
	// out, built-in, catalog or upstream, gets DefaultDedupeWindow, or its TTL when
	// shorter. Keep each window below the tool's TTL.
	DedupeWindows map[string]time.Duration
	// Tools are offered besides the built-in tools, such as the tool catalog's.
	// Optional.
	Tools []ExtraTool
	// AllowedOrigins are the origins ("https://agents.example.com") whose browsers may
	// call /mcp, besides loopback ones (localhost, 127.0.0.1, [::1]): a request with
	// any other Origin header is refused with 403 before its token is read (DNS
	// rebinding, the MCP transport's "servers MUST validate the Origin header"). A
	// request without Origin (every non-browser client) is not concerned. Put the
	// server's public URL here. Defaults to none.
	AllowedOrigins []string
	// ResourceMetadataURL, when oncebox accepts an external authorization server's
	// access tokens, is the URL of its protected resource metadata (RFC 9728): a 401
	// or 403 names it in WWW-Authenticate (resource_metadata), so that an MCP client
	// finds where to sign in. Optional.
	ResourceMetadataURL string
	// ConsoleURL is the web console's public URL ("https://oncebox.example.com/console/",
	// from --public-url): a call that waits for a person's approval answers a link to
	// that op on the console's approvals page, where a person signs in as an approver
	// (an agent's token never can). Optional: without it the answer has no link.
	ConsoleURL string
}

// DefaultWait is Config.Wait's default: how long a tool call waits for the vendor's
// answer. A client's timeout for one tool call must be longer (the recipes in examples/
// say so).
const DefaultWait = 10 * time.Second

// DefaultDedupeWindow is the dedupe window of every write and unsafe tool that
// Config.DedupeWindows leaves out (capped by the tool's TTL): identical calls naming
// no conversation are one op for this long; occurrence asks for a deliberate repeat.
const DefaultDedupeWindow = 24 * time.Hour

// DefaultDedupeWindows returns the default Config.DedupeWindows of the built-in
// tools: DefaultDedupeWindow for each, webhook posts included (a workflow that repeats
// one on purpose sets occurrence, or turns the window off with 0).
func DefaultDedupeWindows() map[string]time.Duration {
	return map[string]time.Duration{
		protocol.ToolPaymentIntent: DefaultDedupeWindow,
		protocol.ToolRefund:        DefaultDedupeWindow,
		protocol.ToolMail:          DefaultDedupeWindow,
		protocol.ToolWebhookPost:   DefaultDedupeWindow,
	}
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.WaitSlots == nil {
		out.WaitSlots = opwait.NewSlots(100)
	}
	if out.Wait == 0 {
		out.Wait = DefaultWait
	}
	if out.SessionIdleTimeout == 0 {
		out.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	if out.MaxSessionsPerTenant == 0 {
		out.MaxSessionsPerTenant = DefaultMaxSessionsPerTenant
	}
	return out
}

func (c *Config) validate() error {
	if c.Outbox == nil {
		return errors.New("mcpserver: Config.Outbox is required (build one with outbox.New)")
	}
	if c.Tenants == nil {
		return errors.New("mcpserver: Config.Tenants is required (build one with tenant.NewStore)")
	}
	if c.SessionIdleTimeout < 0 || c.MaxSessionsPerTenant < 0 {
		return errors.New("mcpserver: SessionIdleTimeout and MaxSessionsPerTenant must not be negative; leave them 0 for the defaults")
	}
	if c.Wait < 0 {
		return fmt.Errorf("mcpserver: Wait %s is negative; leave it 0 for the 10 s default", c.Wait)
	}
	for tool, d := range c.DedupeWindows {
		if d < 0 {
			return fmt.Errorf("mcpserver: the dedupe window of %s is negative (%s); 0 turns it off", tool, d)
		}
	}
	return nil
}

// ErrNoTools is returned by New when no vendor is configured, so no tool is enabled.
var ErrNoTools = errors.New("no tool is enabled: configure a vendor (STRIPE_API_KEY, SENDGRID_API_KEY or ONCEBOX_WEBHOOK_TARGETS)")

// Server exposes the outbox's built-in tools over MCP.
type Server struct {
	cfg    Config
	ob     *outbox.Outbox
	logger *slog.Logger
	// specs are the built-in tools the outbox's registry holds.
	specs []toolSpec

	httpOnce    sync.Once
	httpHandler http.Handler

	// extra is the extra tools in force and the dedupe windows (Config.Tools and
	// Config.DedupeWindows until SetTools replaces them).
	extra atomic.Pointer[extraSet]

	mu      sync.Mutex
	tenants map[int64]*mcp.Server // one MCP server per tenant, for HTTPHandler
	// instances is the instance name of each tenant's server in tenants.
	instances map[int64]string
	// initGates lets one initialize of a tenant at a time pass limitSessions.
	initGates map[int64]chan struct{}
}

// New builds a Server from cfg. It offers those of the four built-in tools that the
// outbox's registry holds, and fails when it holds none of them.
func New(cfg Config) (*Server, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: c, ob: c.Outbox, logger: c.Logger, tenants: map[int64]*mcp.Server{}, instances: map[int64]string{},
		initGates: map[int64]chan struct{}{}}
	s.extra.Store(&extraSet{tools: c.Tools, windows: c.DedupeWindows})
	for _, spec := range builtinSpecs() {
		if _, ok := c.Outbox.Tools().Lookup(spec.Tool); ok {
			s.specs = append(s.specs, spec)
		}
	}
	if err := s.checkExtra(c.Tools, c.Outbox.Tools()); err != nil {
		return nil, err
	}
	if len(s.specs) == 0 && len(c.Tools) == 0 {
		return nil, ErrNoTools
	}
	return s, nil
}

// MCPServer returns a new MCP server offering the tools to one tenant. Every op it
// records belongs to tenantID.
func (s *Server) MCPServer(tenantID int64) *mcp.Server {
	srv, _ := s.mcpServer(tenantID, false)
	return srv
}

// mcpServer is MCPServer, which also returns the server's instance name. With tasks
// (HTTPHandler's servers, in front of which tasksFront answers tasks/*), it offers
// the tasks extension.
func (s *Server) mcpServer(tenantID int64, tasks bool) (*mcp.Server, string) {
	var caps *mcp.ServerCapabilities
	if tasks {
		// The SDK's default capabilities ({"logging":{}}) and the tasks extension.
		caps = &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Extensions: map[string]any{ExtensionTasks: map[string]any{}}}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "oncebox", Title: "oncebox", Version: "1"}, &mcp.ServerOptions{
		Instructions: "These tools perform real side effects (payments, refunds, emails, webhooks) at most once. " +
			"Read each result's text: it says whether the action was carried out now, had already been requested earlier and was " +
			"not repeated, is not confirmed yet, was refused, awaits a person's approval, or is held for review. " +
			"Never call a tool again to retry an action. To do the same action once more because the user explicitly asks for it, " +
			"call again with \"occurrence\" raised to 2 (then 3, and so on).",
		Logger:       s.logger,
		Capabilities: caps,
	})
	if tasks {
		srv.AddReceivingMiddleware(s.tasksMiddleware)
	}
	instance := "instance:" + randomID()
	for _, spec := range s.specs {
		destructive, openWorld := true, true
		srv.AddTool(&mcp.Tool{
			Name:        mcpToolName(spec.Tool),
			Description: spec.Description + occurrenceHelp,
			InputSchema: withOccurrence(spec.InputSchema),
			Annotations: &mcp.ToolAnnotations{
				Title:           spec.Tool,
				DestructiveHint: &destructive,
				IdempotentHint:  true,
				OpenWorldHint:   &openWorld,
			},
		}, s.toolHandler(tenantID, spec.Tool, instance))
	}
	s.addExtra(srv, tenantID, instance, s.extra.Load().tools)
	return srv, instance
}

// HTTPHandler returns the streamable HTTP handler, to be mounted at /mcp. Every request
// must carry "Authorization: Bearer <token>" of a tenant (401 otherwise) whose role is
// agent (403 "insufficient scope" for approver and admin tokens: MCP tools enqueue ops,
// which only agents do), and a session can only be used with a token of the tenant that
// opened it. No MCP tool approves or rejects anything. A 401 carries WWW-Authenticate:
// Bearer. The conversation may be named per request with the Oncebox-Conversation-Id
// header or the conversation_id query parameter.
func (s *Server) HTTPHandler() http.Handler {
	s.httpOnce.Do(func() {
		h := mcp.NewStreamableHTTPHandler(s.serverForRequest, &mcp.StreamableHTTPOptions{
			Logger:         s.logger,
			SessionTimeout: s.cfg.SessionIdleTimeout,
		})
		// The 2026-07-28 revision has no sessions: the SDK serves it statelessly only.
		// A request that names it (MCP-Protocol-Version, server/discover included) goes
		// to a stateless handler; every earlier revision keeps its sessions.
		stateless := mcp.NewStreamableHTTPHandler(s.serverForRequest, &mcp.StreamableHTTPOptions{Logger: s.logger, Stateless: true})
		sessions := s.limitSessions(h)
		byRevision := s.tasksFront(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Mcp-Protocol-Version") >= statelessRevision {
				stateless.ServeHTTP(w, r)
				return
			}
			sessions.ServeHTTP(w, r)
		}))
		authed := auth.RequireBearerToken(s.verifyToken, &auth.RequireBearerTokenOptions{
			AllowMissingExpiration: true,
			Scopes:                 []string{agentScope},
			ResourceMetadataURL:    s.cfg.ResourceMetadataURL,
		})(byRevision)
		s.httpHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if origin := r.Header.Get("Origin"); origin != "" && !s.originAllowed(origin) {
				refuseOrigin(w, origin)
				return
			}
			if r.Header.Get("traceparent") != "" {
				r = r.WithContext(tracing.FromHeader(r.Context(), r.Header))
			}
			if c := r.URL.Query().Get(QueryConversationID); c != "" && r.Header.Get(HeaderConversationID) == "" {
				r = r.Clone(r.Context())
				r.Header.Set(HeaderConversationID, c)
			}
			r, unavailable := withAuthOutcome(r)
			authed.ServeHTTP(&challenger{ResponseWriter: w, unavailable: unavailable}, r)
		})
	})
	return s.httpHandler
}

// statelessRevision is the first protocol revision without sessions or initialize
// (server/discover instead), which the SDK serves with a stateless handler only.
const statelessRevision = "2026-07-28"

// challenger adds "WWW-Authenticate: Bearer" to a 401 that has none, and turns the
// 500 of a token check that failed for want of Postgres into 503 with Retry-After.
type challenger struct {
	http.ResponseWriter
	unavailable *atomic.Bool
}

func (c *challenger) WriteHeader(code int) {
	if code == http.StatusInternalServerError && c.unavailable != nil && c.unavailable.Load() {
		code = http.StatusServiceUnavailable
		c.Header().Set("Retry-After", "5")
	}
	if code == http.StatusUnauthorized && c.Header().Get("WWW-Authenticate") == "" {
		c.Header().Set("WWW-Authenticate", `Bearer realm="oncebox"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer (flushes of streams).
func (c *challenger) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// RunStdio serves the tools to one tenant over standard input and output until the
// client disconnects or ctx is done.
func (s *Server) RunStdio(ctx context.Context, tenantID int64) error {
	if err := s.MCPServer(tenantID).Run(ctx, &mcp.StdioTransport{}); err != nil {
		return fmt.Errorf("mcpserver: stdio: %w", err)
	}
	return nil
}

// tokenTenantKey is the TokenInfo.Extra key holding the tenant id, tokenIDKey the
// token's id.
const (
	tokenTenantKey = "oncebox_tenant"
	tokenIDKey     = "oncebox_token"
)

// agentScope is the scope verifyToken grants to agent tokens only, and HTTPHandler
// requires.
const agentScope = "oncebox:agent"

// verifyToken is the auth.TokenVerifier of HTTPHandler. Its UserID is the tenant, so
// the SDK refuses a session's requests made with another tenant's token.
func (s *Server) verifyToken(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	t, err := s.cfg.Tenants.Authenticate(ctx, token)
	if errors.Is(err, tenant.ErrUnauthorized) {
		return nil, fmt.Errorf("%w: %s", auth.ErrInvalidToken, tenant.RefusalReason(err))
	}
	if err != nil {
		noteUnavailable(ctx, err)
		s.logger.LogAttrs(ctx, slog.LevelError, "mcp authentication failed", slog.Any("error", err))
		return nil, errors.New("authentication is unavailable; retry later")
	}
	info := &auth.TokenInfo{
		UserID: "tenant:" + strconv.FormatInt(t.ID, 10),
		Extra:  map[string]any{tokenTenantKey: t.ID, tokenIDKey: t.TokenID},
	}
	if t.Role == tenant.RoleAgent {
		info.Scopes = []string{agentScope}
	}
	return info, nil
}

// serverForRequest returns the MCP server of the request's tenant, or nil (a 400) when
// the request carries no authenticated tenant, which RequireBearerToken rules out.
func (s *Server) serverForRequest(r *http.Request) *mcp.Server {
	id, ok := tenantOf(auth.TokenInfoFromContext(r.Context()))
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	srv, ok := s.tenants[id]
	if !ok {
		srv, s.instances[id] = s.mcpServer(id, true)
		s.tenants[id] = srv
	}
	return srv
}

// tenantOf returns the tenant id a TokenInfo made by verifyToken carries.
func tenantOf(ti *auth.TokenInfo) (int64, bool) {
	if ti == nil {
		return 0, false
	}
	id, ok := ti.Extra[tokenTenantKey].(int64)
	return id, ok
}

// randomID returns 128 random bits in hex.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	return hex.EncodeToString(b[:])
}
