package fakestripe

import (
	crand "crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/oncebox/oncebox/devkit/eventpost"
	"github.com/oncebox/oncebox/devkit/fakefault"
)

// defaultAPIVersion is the Stripe-Version answered when a request names none;
// it is the version stripe-go v79 pins.
const defaultAPIVersion = "2024-06-20"

// Config configures a Server. The zero value is ready to use.
type Config struct {
	// SearchLag hides objects younger than this from /v1/payment_intents/search,
	// as Stripe's search index lags behind writes. It can be changed later with
	// SetSearchLag. Defaults to 0 (everything is visible at once).
	SearchLag time.Duration

	// HangFor is how long FaultHang holds a request before answering, unless
	// the client goes away first or ReleaseHangs is called. Defaults to 30s.
	HangFor time.Duration

	// Now returns the current time. It stamps the created time of objects and
	// decides what search can see. Defaults to time.Now.
	Now func() time.Time

	// Logger receives one debug record per request. Defaults to a logger that
	// discards everything.
	Logger *slog.Logger

	// AnyAccount connects every Connect account id ("acct_…") a request names on first
	// use, as a platform every account is connected to would, instead of answering 403
	// account_invalid for an account never added (AddAccount). `oncebox dev` and
	// oncebox-fakes set it, so that a tenant set on any account can be charged there.
	// Defaults to false.
	AnyAccount bool
}

func (c Config) withDefaults() Config {
	if c.HangFor <= 0 {
		c.HangFor = 30 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Server is a stateful fake of Stripe's API. It implements http.Handler and is
// safe for concurrent use.
type Server struct {
	cfg Config
	mux *http.ServeMux

	mu          sync.Mutex
	searchLag   time.Duration
	seq         int64
	pis         []*paymentIntentRecord
	pisByID     map[string]*paymentIntentRecord
	pisByCharge map[string]*paymentIntentRecord
	refunds     []*refundRecord
	refundsByID map[string]*refundRecord
	keys        map[string]*idempotencyEntry
	faults      fakefault.Injector[Fault, FaultKind]
	hangs       fakefault.Hangs
	requests    int
	events      eventpost.Holder[EventsConfig]
	// account is the id of a connected account ("" for the platform); accounts and
	// accountKeys are the platform's connected accounts and their own keys (account.go).
	account     string
	accounts    map[string]*Server
	accountKeys map[string]string
}

// New returns a Server with no objects, no stored keys and no faults.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:         cfg,
		searchLag:   cfg.SearchLag,
		pisByID:     make(map[string]*paymentIntentRecord),
		pisByCharge: make(map[string]*paymentIntentRecord),
		refundsByID: make(map[string]*refundRecord),
		keys:        make(map[string]*idempotencyEntry),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payment_intents", func(w http.ResponseWriter, r *http.Request) {
		s.servePost(w, r, s.validatePaymentIntent)
	})
	mux.HandleFunc("GET /v1/payment_intents", s.listPaymentIntents)
	mux.HandleFunc("GET /v1/payment_intents/search", s.searchPaymentIntents)
	mux.HandleFunc("GET /v1/payment_intents/{id}", s.getPaymentIntent)
	mux.HandleFunc("POST /v1/refunds", func(w http.ResponseWriter, r *http.Request) {
		s.servePost(w, r, s.validateRefund)
	})
	mux.HandleFunc("GET /v1/refunds", s.listRefunds)
	mux.HandleFunc("GET /v1/refunds/search", s.notFound) // Stripe cannot search refunds.
	mux.HandleFunc("GET /v1/refunds/{id}", s.getRefund)
	mux.HandleFunc("GET /v1/charges/{id}", s.getCharge)
	mux.HandleFunc("/", s.notFound)
	s.mux = mux
	return s
}

// ServeHTTP answers one request as Stripe would.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Request-Id", newID("req_", 14))
	h.Set("Content-Type", "application/json")
	version := r.Header.Get("Stripe-Version")
	if version == "" {
		version = defaultAPIVersion
	}
	h.Set("Stripe-Version", version)
	if key := strings.TrimSpace(r.Header.Get("Idempotency-Key")); key != "" {
		h.Set("Idempotency-Key", key)
	}

	if r.Method == http.MethodPost {
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
	}

	if !authorized(r) {
		s.writeResult(w, r, (&apiError{
			status:  http.StatusUnauthorized,
			Type:    typeInvalidRequest,
			Message: "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').",
		}).result())
		return
	}
	target, aerr := s.route(r)
	if aerr != nil {
		s.writeResult(w, r, aerr.result())
		return
	}
	if target != s && r.Method == http.MethodPost {
		target.mu.Lock()
		target.requests++
		target.mu.Unlock()
	}
	target.mux.ServeHTTP(w, r)
}

// authorized reports whether r carries a non-empty API key, either as a
// Bearer token or as the user of Basic auth (as curl -u sends it).
func authorized(r *http.Request) bool {
	if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(token) != ""
	}
	user, _, ok := r.BasicAuth()
	return ok && user != ""
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeResult(w, r, (&apiError{
		status:  http.StatusNotFound,
		Type:    typeInvalidRequest,
		Message: "Unrecognized request URL (" + r.Method + ": " + r.URL.Path + "). Please see https://stripe.com/docs or we can help at https://support.stripe.com/.",
	}).result())
}

// result is one HTTP answer: what is written, and what an idempotency key
// stores and replays.
type result struct {
	status int
	body   []byte
	// shouldRetry is the Stripe-Should-Retry header, or "" for none.
	shouldRetry string
}

// jsonResult encodes v as a 200 answer.
func jsonResult(v any) result {
	body, err := json.Marshal(v)
	if err != nil {
		// Every value passed here is built from plain structs and maps.
		panic("fakestripe: encode response: " + err.Error())
	}
	return result{status: http.StatusOK, body: body}
}

func (s *Server) writeResult(w http.ResponseWriter, r *http.Request, res result) {
	if res.shouldRetry != "" {
		w.Header().Set("Stripe-Should-Retry", res.shouldRetry)
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(res.body)
	s.cfg.Logger.Debug("fakestripe request",
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", res.status),
		slog.String("idempotency_key", w.Header().Get("Idempotency-Key")),
		slog.Bool("replayed", w.Header().Get("Idempotent-Replayed") == "true"),
	)
}

// newID returns prefix followed by n random characters, like Stripe's ids.
func newID(prefix string, n int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for b.Len() < len(prefix)+n {
		b.WriteString(crand.Text())
	}
	return b.String()[:len(prefix)+n]
}

// now returns the configured current time.
func (s *Server) now() time.Time {
	return s.cfg.Now()
}

// nextSeq numbers a new object; s.mu must be held.
func (s *Server) nextSeq() int64 {
	s.seq++
	return s.seq
}
