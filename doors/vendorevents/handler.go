package vendorevents

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"

	"github.com/oncebox/oncebox/protocol"
)

// The paths a Handler serves.
const (
	PathStripe   = "/v1/vendor-events/stripe"
	PathSendGrid = "/v1/vendor-events/sendgrid"
	// PathStripeTenant is a tenant's own Stripe endpoint, for a tenant that sends with
	// its own Stripe key: its events are verified with the tenant's own signing secret
	// and count only for the ops sent with the tenant's key (PathStripeTenant + name).
	PathStripeTenant = "/v1/vendor-events/stripe/tenants/"
)

// TenantSecrets finds a tenant's own Stripe endpoint signing secret.
type TenantSecrets interface {
	// StripeEventSecret returns the id of the tenant named name and its own Stripe
	// endpoint's signing secret ("" when it has none, or there is no such tenant).
	StripeEventSecret(ctx context.Context, name string) (tenantID int64, secret string, err error)
}

// TenantAccount is the Event.Account of an event that came through the own endpoint
// of tenant tenantID: it counts for the ops sent with that tenant's own key.
func TenantAccount(tenantID int64) string { return "tenant:" + strconv.FormatInt(tenantID, 10) }

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Store keeps the events. Required.
	Store *Store
	// StripeSecret is the Stripe endpoint's signing secret, whsec_…
	// (STRIPE_WEBHOOK_SECRET). Empty: PathStripe answers 404.
	StripeSecret string
	// TenantSecrets finds a tenant's own Stripe signing secret for PathStripeTenant
	// (set with oncebox tenant vendor set TENANT stripe-events). Nil: that path answers
	// 404.
	TenantSecrets TenantSecrets
	// SendGridPublicKey is the Event Webhook's verification key, base64
	// (SENDGRID_EVENT_PUBLIC_KEY). Empty: PathSendGrid answers 404.
	SendGridPublicKey string
	// SendGridTolerance is how far from now an Event Webhook timestamp may be.
	// Defaults to 5 minutes, stripe-go's webhook.DefaultTolerance.
	SendGridTolerance time.Duration
	// FutureTolerance is how far ahead of now a Stripe signature's timestamp, or an
	// event's time, may be (clocks drift); a request signed further ahead is refused,
	// an event dated further ahead is counted invalid. Defaults to 5 minutes.
	FutureTolerance time.Duration
	// MaxBodyBytes bounds one request. Defaults to 4 MiB.
	MaxBodyBytes int64
	// UnavailableRetryAfter is the Retry-After of the 503 answered when the events
	// cannot be stored (Postgres down). Defaults to 5 seconds.
	UnavailableRetryAfter time.Duration
	// OnEvents, when set, is called after new events linked to ops were stored, with
	// those ops' ids (the reconciler checks the unknown ones soon).
	OnEvents func(ctx context.Context, vendor string, opIDs []string) error
	// Logger receives structured logs. Defaults to discarding them.
	Logger *slog.Logger
	// Now returns the current time. Defaults to time.Now.
	Now func() time.Time
}

// Handler serves PathStripe and PathSendGrid.
type Handler struct {
	cfg    HandlerConfig
	sgKey  *ecdsa.PublicKey
	mux    *http.ServeMux
	logger *slog.Logger
}

// NewHandler checks cfg (a SendGrid key that is not an ECDSA public key is refused
// here, not at the first event) and returns the Handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("vendorevents: HandlerConfig.Store is required")
	}
	if cfg.SendGridTolerance == 0 {
		cfg.SendGridTolerance = 5 * time.Minute
	}
	if cfg.FutureTolerance == 0 {
		cfg.FutureTolerance = 5 * time.Minute
	}
	if cfg.SendGridTolerance < 0 || cfg.FutureTolerance < 0 {
		return nil, errors.New("vendorevents: SendGridTolerance and FutureTolerance must not be negative")
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.MaxBodyBytes < 1024 {
		return nil, fmt.Errorf("vendorevents: MaxBodyBytes %d is too small; use 1024 or more", cfg.MaxBodyBytes)
	}
	if cfg.UnavailableRetryAfter <= 0 {
		cfg.UnavailableRetryAfter = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	h := &Handler{cfg: cfg, logger: cfg.Logger, mux: http.NewServeMux()}
	if cfg.SendGridPublicKey != "" {
		k, err := ParseSendGridKey(cfg.SendGridPublicKey)
		if err != nil {
			return nil, fmt.Errorf("SENDGRID_EVENT_PUBLIC_KEY: %w (copy the verification key from the Event Webhook's signature settings)", err)
		}
		h.sgKey = k
	}
	h.mux.HandleFunc("POST "+PathStripe, h.serveStripe)
	h.mux.HandleFunc("POST "+PathSendGrid, h.serveSendGrid)
	h.mux.HandleFunc("POST "+PathStripeTenant+"{tenant}", h.serveStripeTenant)
	for _, p := range []string{PathStripe, PathSendGrid, PathStripeTenant + "{tenant}"} {
		h.mux.HandleFunc(p, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Allow", http.MethodPost)
			writeProblem(w, http.StatusMethodNotAllowed, protocol.ProblemMethodNotAllowed, "vendor events are POSTed")
		})
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, protocol.ProblemNoRoute, "no vendor event endpoint at "+r.URL.Path)
	})
	return h, nil
}

// ServeHTTP routes a vendor event request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) serveStripe(w http.ResponseWriter, r *http.Request) {
	if h.cfg.StripeSecret == "" {
		writeProblem(w, http.StatusNotFound, protocol.ProblemVendorEventsNotConfigured,
			"this server has no Stripe webhook secret (STRIPE_WEBHOOK_SECRET)")
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	p, err := parseStripe(body, r.Header.Get("Stripe-Signature"), h.cfg.StripeSecret, h.cfg.Now(), h.cfg.FutureTolerance)
	h.store(w, r, VendorStripe, p, err)
}

// serveStripeTenant takes the events of a tenant's own Stripe account, verified with
// the tenant's own signing secret (never the platform's): they are stored as from
// TenantAccount, and count only for the ops the tenant sent with its own key.
func (h *Handler) serveStripeTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	var (
		tenantID int64
		secret   string
		err      error
	)
	if h.cfg.TenantSecrets != nil {
		tenantID, secret, err = h.cfg.TenantSecrets.StripeEventSecret(r.Context(), name)
	}
	if err != nil {
		h.logger.Error("a tenant's Stripe signing secret cannot be read", slog.String("error", err.Error()))
		w.Header().Set("Retry-After", strconv.Itoa(int((h.cfg.UnavailableRetryAfter+time.Second-1)/time.Second)))
		writeProblem(w, http.StatusServiceUnavailable, protocol.ProblemStoreUnavailable,
			"the tenant's signing secret cannot be read; send the events again later")
		return
	}
	if secret == "" {
		writeProblem(w, http.StatusNotFound, protocol.ProblemVendorEventsNotConfigured,
			"no tenant of this name has a Stripe signing secret of its own (oncebox tenant vendor set --tenant T stripe-events --key-stdin)")
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	p, err := parseStripe(body, r.Header.Get("Stripe-Signature"), secret, h.cfg.Now(), h.cfg.FutureTolerance)
	if err == nil {
		for i := range p.events {
			// A Connect account's event under the tenant's own account names a
			// sub-account the tenant's ops were not sent to: it matches none.
			p.events[i].Account = TenantAccount(tenantID) + strings.TrimSuffix("/"+p.events[i].Account, "/")
		}
	}
	h.store(w, r, VendorStripe, p, err)
}

func (h *Handler) serveSendGrid(w http.ResponseWriter, r *http.Request) {
	if h.sgKey == nil {
		writeProblem(w, http.StatusNotFound, protocol.ProblemVendorEventsNotConfigured,
			"this server has no SendGrid Event Webhook key (SENDGRID_EVENT_PUBLIC_KEY)")
		return
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	p, err := parseSendGrid(body, r.Header.Get(eventwebhook.VerificationHTTPHeader), r.Header.Get(eventwebhook.TimestampHTTPHeader),
		h.sgKey, h.cfg.SendGridTolerance, h.cfg.Now())
	h.store(w, r, VendorSendGrid, p, err)
}

func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeProblem(w, http.StatusRequestEntityTooLarge, protocol.ProblemPayloadTooLarge,
				fmt.Sprintf("vendor event requests are limited to %d bytes", h.cfg.MaxBodyBytes))
			return nil, false
		}
		writeProblem(w, http.StatusBadRequest, protocol.ProblemInvalidRequest, "the request body could not be read")
		return nil, false
	}
	return body, true
}

// store records what a verified request carried and answers; a refused one stores
// nothing.
func (h *Handler) store(w http.ResponseWriter, r *http.Request, vendor string, p *parsed, err error) {
	log := h.logger.With(slog.String("vendor", vendor))
	if err != nil {
		if errors.Is(err, errSignature) {
			h.cfg.Store.cfg.Observer.VendorEvent(vendor, OutcomeRefused)
			log.Warn("vendor event refused: bad signature", slog.String("error", err.Error()))
			writeProblem(w, http.StatusBadRequest, protocol.ProblemInvalidSignature,
				"the request's signature is missing or does not verify: "+err.Error())
			return
		}
		log.Warn("vendor event refused: unreadable", slog.String("error", err.Error()))
		writeProblem(w, http.StatusBadRequest, protocol.ProblemInvalidEvent, err.Error())
		return
	}
	for range p.untagged {
		h.cfg.Store.cfg.Observer.VendorEvent(vendor, OutcomeUntagged)
	}
	for range p.ignored {
		h.cfg.Store.cfg.Observer.VendorEvent(vendor, OutcomeIgnored)
	}
	for _, why := range p.invalid {
		h.cfg.Store.cfg.Observer.VendorEvent(vendor, OutcomeInvalid)
		log.Warn("vendor event invalid: not stored", slog.String("reason", why))
	}
	rec, err := h.cfg.Store.Record(r.Context(), p.events)
	if err != nil {
		// Not the request's fault: the vendor retries a 503 later.
		log.Error("vendor events not stored", slog.String("error", err.Error()))
		w.Header().Set("Retry-After", strconv.Itoa(int((h.cfg.UnavailableRetryAfter+time.Second-1)/time.Second)))
		writeProblem(w, http.StatusServiceUnavailable, protocol.ProblemStoreUnavailable,
			"the database did not answer; send the events again later")
		return
	}
	if len(rec.OpIDs) > 0 && h.cfg.OnEvents != nil {
		if err := h.cfg.OnEvents(r.Context(), vendor, rec.OpIDs); err != nil {
			// The events are stored: the reconciler finds them at its next regular check.
			log.Warn("vendor events stored, but their ops were not scheduled for a check", slog.String("error", err.Error()))
		}
	}
	log.Debug("vendor events received", slog.Int("stored", rec.Stored), slog.Int("duplicates", rec.Duplicates),
		slog.Int("orphans", rec.Orphans), slog.Int("untagged", p.untagged), slog.Int("ignored", p.ignored), slog.Int("invalid", len(p.invalid)))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]int{"stored": rec.Stored, "duplicates": rec.Duplicates, "orphans": rec.Orphans,
		"untagged": p.untagged, "ignored": p.ignored, "invalid": len(p.invalid)})
}

// writeProblem writes an RFC 9457 problem document of one of protocol's types.
func writeProblem(w http.ResponseWriter, status int, problemType, detail string) {
	body, _ := json.Marshal(protocol.NewProblem(status, problemType, detail))
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
