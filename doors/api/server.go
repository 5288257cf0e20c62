package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/oncebox/oncebox/audit"
	"github.com/oncebox/oncebox/doors/opwait"
	"github.com/oncebox/oncebox/doors/pgavail"
	"github.com/oncebox/oncebox/governance"
	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tenant"
)

// DefaultMaxBodyBytes is Config.MaxBodyBytes' default, stated once: the server's
// configuration, the CLI's --max-body-bytes and the table of docs/configuration.md take it from here.
const DefaultMaxBodyBytes = 64 << 10

// Config configures a Server.
type Config struct {
	// Outbox records and reads ops. Required.
	Outbox *outbox.Outbox
	// Governance holds the budgets GET /v1/budgets lists (the Outbox's gate). Defaults
	// to none: the list is empty.
	Governance *governance.Governance
	// Tenants authenticates bearer tokens. Required.
	Tenants *tenant.Store
	// AuditLog reads the audit log that GET /v1/audit exports (a pool: an export holds
	// one of its connections while it streams). Optional: without it the route is not
	// served (404 no-route).
	AuditLog audit.Querier
	// AuditExports bounds the audit exports streaming at once (shared with the console's
	// downloads), so that exports never take the connections calls need; past it GET
	// /v1/audit answers 429 too-many-exports with Retry-After. Defaults to 2 of its own.
	AuditExports *audit.Slots
	// Logger receives one debug line per request and the real cause of every 500.
	// Tokens and request bodies are never logged. Defaults to discarding logs.
	Logger *slog.Logger
	// MaxBodyBytes bounds a request body; a larger one is refused with 413.
	// Defaults to DefaultMaxBodyBytes (64 KiB).
	MaxBodyBytes int64
	// MaxWait caps the ?wait= parameter; a longer wait is shortened to it. Keep it
	// below the http.Server's WriteTimeout. Defaults to 60 seconds.
	MaxWait time.Duration
	// MaxWaitsPerTenant caps the ?wait= requests one tenant may hold open at once; past
	// it a request with ?wait= is refused with 429 and Retry-After (before anything is
	// recorded). Defaults to 100.
	MaxWaitsPerTenant int
	// WaitSlots counts the waits against MaxWaitsPerTenant; share it with the MCP
	// server so that its tool calls' waits count against the same cap. Defaults to
	// slots of its own.
	WaitSlots *opwait.Slots
	// UnavailableRetryAfter is the Retry-After of a 503 answered while Postgres cannot
	// be reached. Defaults to 5 seconds.
	UnavailableRetryAfter time.Duration
	// Observer is told about answers that metrics count. Optional.
	Observer Observer
	// Notifications, when set and listening, wakes long polls when their op settles;
	// without it (or while it reconnects) they poll Postgres. Optional.
	Notifications *opwait.Hub
	// Tools describes every tool the server offers, for GET /v1/tools. Optional.
	Tools []ToolInfo
	// Reads calls read tools (the tool catalog's): POST /v1/ops naming one answers the
	// target's reply at once, records nothing and needs no Idempotency-Key. Optional.
	Reads Reader
	// Upstreams reports the upstream MCP servers' sessions for GET /healthz, by name
	// (values marshalled as JSON), as the request may see them (their errors only to
	// an admin). Optional.
	Upstreams func(*http.Request) any
	// ResourceMetadataURL, when oncebox accepts an external authorization server's
	// access tokens, is the URL of its protected resource metadata (RFC 9728), named by
	// every 401's WWW-Authenticate (resource_metadata). Optional.
	ResourceMetadataURL string
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.MaxBodyBytes == 0 {
		out.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if out.MaxWait == 0 {
		out.MaxWait = 60 * time.Second
	}
	if out.AuditExports == nil {
		out.AuditExports = audit.NewSlots(2)
	}
	if out.UnavailableRetryAfter <= 0 {
		out.UnavailableRetryAfter = 5 * time.Second
	}
	if out.Observer == nil {
		out.Observer = nopObserver{}
	}
	if out.MaxWaitsPerTenant == 0 {
		out.MaxWaitsPerTenant = 100
	}
	if out.WaitSlots == nil {
		out.WaitSlots = opwait.NewSlots(out.MaxWaitsPerTenant)
	}
	return out
}

func (c *Config) validate() error {
	if c.Outbox == nil {
		return errors.New("api: Config.Outbox is required (build one with outbox.New)")
	}
	if c.Tenants == nil {
		return errors.New("api: Config.Tenants is required (build one with tenant.NewStore)")
	}
	if c.MaxBodyBytes < 0 {
		return fmt.Errorf("api: MaxBodyBytes %d is negative; leave it 0 for the default of %d", c.MaxBodyBytes, DefaultMaxBodyBytes)
	}
	if c.MaxWaitsPerTenant < 0 {
		return fmt.Errorf("api: MaxWaitsPerTenant %d is negative; leave it 0 for the default of 100", c.MaxWaitsPerTenant)
	}
	if c.MaxWait < 0 {
		return fmt.Errorf("api: MaxWait %s is negative; leave it 0 for the 60 s default", c.MaxWait)
	}
	return nil
}

// Observer is told about answers that metrics count. Its methods must be quick and safe
// for concurrent use.
type Observer interface {
	// StoreUnavailable is called for each request answered 503 because Postgres could
	// not be reached; where is "api", "healthz" or "mcp".
	StoreUnavailable(where string)
}

type nopObserver struct{}

func (nopObserver) StoreUnavailable(string) {}

// retryAfter is the Retry-After value, in whole seconds, of a 503.
func (s *Server) retryAfter() string {
	return strconv.Itoa(max(1, int(s.cfg.UnavailableRetryAfter.Round(time.Second)/time.Second)))
}

// Server is the agent-facing HTTP API. It is an http.Handler.
type Server struct {
	cfg    Config
	ob     *outbox.Outbox
	logger *slog.Logger
	mux    *http.ServeMux
	// waits ends when EndWaits is called.
	waits    context.Context
	endWaits context.CancelFunc
	// waiting counts each tenant's open waits (Config.WaitSlots).
	waiting *opwait.Slots
	// tools is GET /v1/tools's list: Config.Tools until SetTools replaces it.
	tools atomic.Pointer[[]ToolInfo]
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: c, ob: c.Outbox, logger: c.Logger, mux: http.NewServeMux(), waiting: c.WaitSlots}
	s.SetTools(c.Tools)
	s.waits, s.endWaits = context.WithCancel(context.Background())
	s.mux.HandleFunc("POST /v1/ops", s.authed(canEnqueue, s.postOp))
	s.mux.HandleFunc("GET /v1/tools", s.authed(canRead, s.listTools))
	s.mux.HandleFunc("GET /v1/ops/{key}", s.authed(canRead, s.getOp))
	s.mux.HandleFunc("POST /v1/ops/{key}/approve", s.authed(canDecide, s.approveOp))
	s.mux.HandleFunc("POST /v1/ops/{key}/reject", s.authed(canDecide, s.rejectOp))
	s.mux.HandleFunc("POST /v1/ops/{key}/resolve", s.authed(canDecide, s.resolveOp))
	s.mux.HandleFunc("GET /v1/approvals", s.authed(canDecide, s.listApprovals))
	s.mux.HandleFunc("GET /v1/budgets", s.authed(canRead, s.listBudgets))
	if c.AuditLog != nil {
		s.mux.HandleFunc("GET /v1/audit", s.authed(canAudit, s.exportAudit))
	}
	s.mux.HandleFunc("GET /openapi.json", s.openAPI)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	return s, nil
}

// EndWaits makes every ?wait= in progress, and every later one, answer at once with
// the op as it stands. Call it when shutting down, so that long polls do not hold the
// HTTP server's shutdown (and the workers' grace period) for up to MaxWait.
func (s *Server) EndWaits() { s.endWaits() }

// Waiting returns how many ?wait= requests are open now, over all tenants.
func (s *Server) Waiting() int { return s.waiting.Open() }

// startWait counts one more open wait of the tenant, or returns the 429 problem when
// the tenant already holds MaxWaitsPerTenant. done must be called when the wait ends.
func (s *Server) startWait(w http.ResponseWriter, tenantID int64) (done func(), p *protocol.Problem) {
	done, ok := s.waiting.Take(tenantID)
	if !ok {
		w.Header().Set("Retry-After", "1")
		return nil, protocol.NewProblem(http.StatusTooManyRequests, protocol.ProblemTooManyWaits, fmt.Sprintf(
			"Your tenant already holds %d requests with ?wait= open, the limit; retry in a second (with the same Idempotency-Key), or send the request without wait and read the op later.",
			s.waiting.Max()))
	}
	return done, nil
}

// wait returns the tenant's op under key once it is settled, or as it stands when d
// runs out, ctx is done or EndWaits is called (opwait.Until: woken by a notification
// when the op settles, polling without one).
func (s *Server) wait(ctx context.Context, tenantID int64, key string, d time.Duration) (*outbox.Op, error) {
	return opwait.Until(ctx, s.cfg.Notifications, s.waits.Done(), tenantID, key, d,
		func(ctx context.Context) (*outbox.Op, error) { return s.ob.Get(ctx, tenantID, key) },
		func(op *outbox.Op) bool { return op.Status.Settled() })
}

// ServeHTTP routes a request and logs one debug line about it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	// The caller's trace context (traceparent) is the parent of the op's spans.
	r = r.WithContext(context.WithValue(tracing.FromHeader(r.Context(), r.Header), recorderKey{}, rec))
	if _, pattern := s.mux.Handler(r); pattern == "" {
		// No route serves the request: the mux answers a plain-text 404 or 405 (or
		// redirects to a cleaned path). Answer the errors as problem documents.
		s.mux.ServeHTTP(&unroutedWriter{ResponseWriter: rec, r: r}, r)
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	if !s.logger.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("method", r.Method),
		slog.String("route", r.Pattern),
		slog.Int("status", rec.status),
		slog.Duration("took", time.Since(start)),
	}
	if rec.tenant != nil {
		attrs = append(attrs, slog.Int64("tenant", rec.tenant.ID))
	}
	if rec.key != "" {
		attrs = append(attrs, slog.String("idempotency_key", rec.key))
	}
	if rec.opID != "" {
		attrs = append(attrs, slog.String("op_id", rec.opID))
		if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	s.logger.LogAttrs(r.Context(), slog.LevelDebug, "http request", attrs...)
}

// unroutedWriter turns the mux's plain-text answers to a request no route serves into
// problem documents: 404 becomes no-route, and 405 method-not-allowed (keeping the
// mux's Allow header). Any other answer, such as a redirect, passes through.
type unroutedWriter struct {
	http.ResponseWriter
	r *http.Request
	// answered is set once the problem is written; the mux's text is then dropped.
	answered bool
}

// WriteHeader implements http.ResponseWriter.
func (u *unroutedWriter) WriteHeader(status int) {
	switch status {
	case http.StatusNotFound:
		writeProblem(u.ResponseWriter, protocol.NewProblem(status, protocol.ProblemNoRoute, fmt.Sprintf(
			"The API serves nothing at %s; GET /openapi.json lists its routes.", u.r.URL.Path)))
	case http.StatusMethodNotAllowed:
		allow := u.Header().Get("Allow")
		writeProblem(u.ResponseWriter, protocol.NewProblem(status, protocol.ProblemMethodNotAllowed, fmt.Sprintf(
			"%s %s is not served; this path allows %s.", u.r.Method, u.r.URL.Path, allow)))
	default:
		u.ResponseWriter.WriteHeader(status)
		return
	}
	u.answered = true
}

// Write implements http.ResponseWriter.
func (u *unroutedWriter) Write(b []byte) (int, error) {
	if u.answered {
		return len(b), nil
	}
	return u.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (u *unroutedWriter) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// recorder remembers what the request log line needs.
type recorder struct {
	http.ResponseWriter
	status int
	tenant *tenant.Tenant
	key    string
	opID   string
}

type recorderKey struct{}

// WriteHeader implements http.ResponseWriter.
func (rec *recorder) WriteHeader(status int) {
	rec.status = status
	rec.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rec *recorder) Unwrap() http.ResponseWriter { return rec.ResponseWriter }

func recorderOf(r *http.Request) *recorder {
	rec, _ := r.Context().Value(recorderKey{}).(*recorder)
	if rec == nil {
		return &recorder{}
	}
	return rec
}

// authedHandlerFunc is a handler that runs for an authenticated token: t is its tenant,
// token id and role.
type authedHandlerFunc func(w http.ResponseWriter, r *http.Request, t *tenant.Principal)

// permission says which roles may use a route, and how to explain a refusal.
type permission struct {
	allows func(tenant.Role) bool
	// refusal is the detail sentence of the 403, given the token's role.
	refusal func(tenant.Role) string
}

var (
	canRead    = permission{allows: func(tenant.Role) bool { return true }}
	canEnqueue = permission{
		allows: tenant.Role.CanEnqueue,
		refusal: func(r tenant.Role) string {
			return fmt.Sprintf("This API token has the role %s; only agent tokens record ops.", r)
		},
	}
	canDecide = permission{
		allows: tenant.Role.CanDecide,
		refusal: func(r tenant.Role) string {
			return fmt.Sprintf("This API token has the role %s; listing approvals and approving, rejecting or resolving ops needs an approver or admin token of the tenant, held by a person.", r)
		},
	}
	canAudit = permission{
		allows: tenant.Role.CanAudit,
		refusal: func(r tenant.Role) string {
			return fmt.Sprintf("This API token has the role %s; reading the audit log needs an auditor or admin token of the tenant, held by a person. Nothing was read.", r)
		},
	}
)

// authed authenticates the bearer token, then checks that its role may use the route,
// before anything else is looked at: a refused request changes nothing.
func (s *Server) authed(perm permission, next authedHandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, given := bearerToken(r)
		if token == "" {
			s.unauthorized(w, given, "send the API token as \"Authorization: Bearer obx_...\"")
			return
		}
		t, err := s.cfg.Tenants.Authenticate(r.Context(), token)
		if errors.Is(err, tenant.ErrUnauthorized) {
			s.unauthorized(w, true, tenant.RefusalReason(err))
			return
		}
		if err != nil {
			s.internal(w, r, fmt.Errorf("authenticate: %w", err))
			return
		}
		recorderOf(r).tenant = &t.Tenant
		if !perm.allows(t.Role) {
			writeProblem(w, protocol.NewProblem(http.StatusForbidden, protocol.ProblemForbidden, perm.refusal(t.Role)))
			return
		}
		next(w, r, t)
	}
}

// bearerToken returns the token of an "Authorization: Bearer" header, and whether an
// Authorization header was sent at all.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(token), true
}

// unauthorized answers 401 with a WWW-Authenticate challenge that names the protected
// resource metadata when external access tokens are accepted.
func (s *Server) unauthorized(w http.ResponseWriter, tokenGiven bool, detail string) {
	challenge := `Bearer realm="oncebox"`
	if u := s.cfg.ResourceMetadataURL; u != "" {
		challenge = `Bearer resource_metadata="` + u + `"`
	}
	if tokenGiven {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeProblem(w, protocol.NewProblem(http.StatusUnauthorized, protocol.ProblemUnauthorized, "Authentication failed: "+detail+"."))
}

// internal logs the real cause of a failure and answers 500 without it.
// A failure to reach Postgres answers 503 store-unavailable with Retry-After instead.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, err error) {
	attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", r.Pattern), slog.Any("error", err)}
	if rec := recorderOf(r); rec.tenant != nil {
		attrs = append(attrs, slog.Int64("tenant", rec.tenant.ID))
	}
	if pgavail.Unavailable(err) {
		s.cfg.Observer.StoreUnavailable("api")
		s.logger.LogAttrs(r.Context(), slog.LevelWarn, "api request failed: the database is unavailable", attrs...)
		w.Header().Set("Retry-After", s.retryAfter())
		writeProblem(w, protocol.NewProblem(http.StatusServiceUnavailable, protocol.ProblemStoreUnavailable, fmt.Sprintf(
			"The database is unavailable. Retry in %s seconds with the same Idempotency-Key: the op may have been recorded before the failure, and the same key never runs it twice.",
			s.retryAfter())))
		return
	}
	s.logger.LogAttrs(r.Context(), slog.LevelError, "api request failed", attrs...)
	writeProblem(w, protocol.NewProblem(http.StatusInternalServerError, protocol.ProblemInternal,
		"The server could not complete the request. It has been logged; retry later with the same Idempotency-Key."))
}

// healthz answers 200 when the database answers a query.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.ob.Ping(ctx); err != nil {
		s.cfg.Observer.StoreUnavailable("healthz")
		s.logger.LogAttrs(r.Context(), slog.LevelWarn, "health check failed", slog.Any("error", err))
		w.Header().Set("Retry-After", s.retryAfter())
		writeJSON(w, http.StatusServiceUnavailable, []byte(`{"ok":false,"error":"database unavailable"}`))
		return
	}
	if s.cfg.Upstreams == nil {
		writeJSON(w, http.StatusOK, []byte(`{"ok":true}`))
		return
	}
	body, err := json.Marshal(struct {
		OK        bool `json:"ok"`
		Upstreams any  `json:"upstreams"`
	}{true, s.cfg.Upstreams(r)})
	if err != nil {
		body = []byte(`{"ok":true}`)
	}
	writeJSON(w, http.StatusOK, body)
}

// openAPI serves the embedded OpenAPI document.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, OpenAPI())
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
