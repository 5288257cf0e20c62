package sendgrid

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

// Defaults of Config.
const (
	// DefaultBaseURL is SendGrid's API host.
	DefaultBaseURL = "https://api.sendgrid.com"
	// DefaultTimeout bounds one send or one Email Activity request.
	DefaultTimeout = 10 * time.Second
	// DefaultLookupLag is how long the Email Activity API may still miss a message
	// after it was accepted.
	DefaultLookupLag = 10 * time.Minute
	// DefaultActivityRatePerMinute is the Email Activity API's own limit.
	DefaultActivityRatePerMinute = 6
)

// Config configures a Vendor.
type Config struct {
	// APIKey is the SendGrid API key (SENDGRID_API_KEY). It is never logged and
	// never put in an error or a result. Required.
	APIKey string
	// BaseURL is the API's scheme and host (SENDGRID_API_BASE), such as a fake
	// server's URL in tests. Defaults to "https://api.sendgrid.com".
	BaseURL string
	// Timeout bounds each send and each Email Activity request, from dialling to
	// the end of the answer (the SDK's default client has no timeout at all).
	// Defaults to 10s.
	Timeout time.Duration
	// HTTPClient sends the requests. Whatever client is given, every request is
	// also bounded by Timeout through its context. Defaults to a client with
	// Timeout that follows no redirect to another origin (the API key stays there).
	HTTPClient *http.Client
	// LookupLag is how long after a send the Email Activity API may still miss
	// the message, so that only an older "none found" is trusted. Defaults to
	// 10 minutes.
	LookupLag time.Duration
	// ActivityRatePerMinute caps the requests this Vendor makes to the Email
	// Activity API (GET /v3/messages and GET /v3/messages/{msg_id}), evenly
	// spaced, shared by every Lookup and ListMessages call of the Vendor. A
	// negative value removes the cap (for tests). Defaults to 6, SendGrid's limit.
	ActivityRatePerMinute int
	// Logger receives one debug record per send and per activity request,
	// without the API key, addresses or bodies. Defaults to a logger that
	// discards everything.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.BaseURL == "" {
		c.BaseURL = DefaultBaseURL
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.HTTPClient == nil {
		// The transport's connections are aborted when closed, and it speaks HTTP/1.1
		// only (vendorhttp.HTTP1Transport): a request given up on is not delivered later.
		// SendGrid has no idempotency keys, so a late copy would be a second mail.
		c.HTTPClient = &http.Client{Timeout: c.Timeout, Transport: vendorhttp.HTTP1Transport(), CheckRedirect: sameorigin.CheckRedirect("SendGrid")}
	}
	if c.LookupLag == 0 {
		c.LookupLag = DefaultLookupLag
	}
	if c.ActivityRatePerMinute == 0 {
		c.ActivityRatePerMinute = DefaultActivityRatePerMinute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if strings.TrimSpace(c.APIKey) == "" {
		return errors.New("sendgrid: Config.APIKey is empty: set it from SENDGRID_API_KEY")
	}
	for _, r := range c.APIKey {
		if r <= ' ' || r >= 0x7f {
			return errors.New("sendgrid: Config.APIKey holds white space or non-ASCII characters: paste the key alone")
		}
	}
	u, err := url.Parse(c.BaseURL)
	switch {
	case err != nil:
		return fmt.Errorf("sendgrid: Config.BaseURL is not a URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return fmt.Errorf("sendgrid: Config.BaseURL %q must be an absolute http or https URL such as %s", c.BaseURL, DefaultBaseURL)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("sendgrid: Config.BaseURL %q must not carry credentials, a query or a fragment", c.BaseURL)
	}
	if c.Timeout < 0 {
		return errors.New("sendgrid: Config.Timeout must not be negative")
	}
	if c.LookupLag < 0 {
		return errors.New("sendgrid: Config.LookupLag must not be negative")
	}
	return nil
}
