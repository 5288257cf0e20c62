package stripe

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncebox/oncebox/internal/sameorigin"
	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// DefaultBaseURL is Stripe's API base.
const DefaultBaseURL = "https://api.stripe.com"

// Config configures a Vendor.
type Config struct {
	// APIKey is the Stripe secret or restricted key (STRIPE_API_KEY). It is sent
	// only in the Authorization header: never logged, never put in an error or
	// a result. Required.
	APIKey string
	// BaseURL is the API base (STRIPE_API_BASE), such as a fake's or
	// stripe-mock's URL. Defaults to DefaultBaseURL.
	BaseURL string
	// Timeout bounds each dispatch (it is applied to the call's context, so it
	// holds with any HTTPClient) and, through the default HTTPClient, every
	// request, list pages included. Defaults to 20s.
	Timeout time.Duration
	// HTTPClient sends the requests. Defaults to a client with Timeout over a
	// clone of http.DefaultTransport. Keep-alives are fine: net/http's silent
	// resend of a POST carrying an Idempotency-Key on a dead kept-alive
	// connection is safe with Stripe, which deduplicates by that key.
	HTTPClient *http.Client
	// MaxNetworkRetries is how often stripe-go retries a failed request by
	// itself, inside one dispatch. Defaults to 0: every retry goes through
	// oncebox's state machine with the same derived key instead, so each
	// attempt is recorded and the job timeout bounds the call.
	MaxNetworkRetries int64
	// SearchLag is how far Stripe's search index may lag behind writes
	// (usually under a minute; up to an hour in incidents). It is the lookup
	// lag when DisableListScan is set. Defaults to 1 minute.
	SearchLag time.Duration
	// DisableListScan makes Lookup find payment intents through search only,
	// skipping the unlagged list scan; LookupLag is then SearchLag. For tests
	// and for accounts with very many payment intents. Defaults to false.
	DisableListScan bool
	// ListScanMargin is how far before LookupParams.Since the list scan starts,
	// to cover clock skew between oncebox and Stripe. Defaults to 5 minutes.
	ListScanMargin time.Duration
	// Logger receives a debug record per dispatch and lookup, without the key
	// or payloads. Defaults to a logger that discards everything.
	Logger *slog.Logger
}

// defaultLookupLag is the lag reported when the list scan is on: lists are not
// lagged, so this only covers Stripe's replication and clock granularity
// (created is in whole seconds).
const defaultLookupLag = 5 * time.Second

func (c Config) withDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Timeout == 0 {
		c.Timeout = 20 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout:   c.Timeout,
			Transport: vendorhttp.Transport(), // a request given up on is not delivered later
			// The API key stays with the API: no redirect to another origin.
			CheckRedirect: sameorigin.CheckRedirect("Stripe"),
		}
	}
	if c.SearchLag == 0 {
		c.SearchLag = time.Minute
	}
	if c.ListScanMargin == 0 {
		c.ListScanMargin = 5 * time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if strings.TrimSpace(c.APIKey) == "" {
		return errors.New("stripe: Config.APIKey is empty: set STRIPE_API_KEY to a secret key (sk_...) or restricted key (rk_...)")
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil {
		return fmt.Errorf("stripe: Config.BaseURL is not a URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("stripe: Config.BaseURL %q must be an absolute http or https URL such as %s", c.BaseURL, DefaultBaseURL)
	}
	if u.User != nil {
		return errors.New("stripe: Config.BaseURL must not carry credentials: use APIKey")
	}
	if c.Timeout < 0 || c.SearchLag < 0 || c.ListScanMargin < 0 {
		return errors.New("stripe: Config.Timeout, SearchLag and ListScanMargin must not be negative")
	}
	if c.MaxNetworkRetries < 0 || c.MaxNetworkRetries > 10 {
		return fmt.Errorf("stripe: Config.MaxNetworkRetries %d out of range; use 0 to 10", c.MaxNetworkRetries)
	}
	return nil
}
