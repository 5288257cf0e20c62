package webhook

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oncebox/oncebox/internal/vendorhttp"
)

// Target is one receiver the webhook tool may reach.
type Target struct {
	// BaseURL is the receiver's absolute http or https URL, such as
	// https://hooks.example.com or https://example.com/hooks; the tool's path
	// is appended to it. Required.
	BaseURL string
	// SecretHeader is the name of the header carrying Secret, such as
	// "Authorization" or "X-Webhook-Secret". Optional, but required with
	// Secret.
	SecretHeader string
	// Secret is the value of SecretHeader. It is never logged and never
	// stored in a result or an error.
	Secret string
}

// Config configures a Vendor.
type Config struct {
	// Targets is the allow-list: the receivers the tool may name, by name.
	// Required.
	Targets map[string]Target
	// Timeout bounds each request, from dialling to the end of the answer.
	// Defaults to 10s.
	Timeout time.Duration
	// HTTPClient sends the requests. It should not follow redirects. Defaults
	// to a client with Timeout that follows no redirects and opens a new
	// connection per request (so that a stale kept-alive connection never
	// turns into an unknown outcome).
	HTTPClient *http.Client
	// NativeIdempotency says whether the targets honour Idempotency-Key.
	// Defaults to false.
	NativeIdempotency bool
	// IdempotencyWindow is how long the targets remember a key. Defaults to
	// 24h when NativeIdempotency, 0 otherwise.
	IdempotencyWindow time.Duration
	// LookupPath, when set, is the path (from a target's BaseURL) that
	// answers GET ?oncebox_op=<op id> with {"objects":[{"id":..,"created":..}]}.
	// Defaults to "" (lookups unavailable).
	LookupPath string
	// LookupLag is how long a created object may stay invisible to a lookup.
	// Defaults to 0.
	LookupLag time.Duration
	// MaxResultBytes caps the response body kept in a result or an error.
	// Defaults to 16 KiB.
	MaxResultBytes int
	// Logger receives a debug record per dispatch and lookup, without
	// secrets or bodies. Defaults to a logger that discards everything.
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{
			Timeout:   c.Timeout,
			Transport: newTransport(),
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	if c.NativeIdempotency && c.IdempotencyWindow == 0 {
		c.IdempotencyWindow = 24 * time.Hour
	}
	if c.MaxResultBytes == 0 {
		c.MaxResultBytes = 16 << 10
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// newTransport returns the default transport: http.DefaultTransport's settings
// without keep-alives, its connections aborted when closed and HTTP/1.1 only
// (vendorhttp.HTTP1Transport), so a request given up on is not delivered later: over
// HTTP/2 a cancel resets the stream and leaves the connection open, and a target
// without native keys would act on the late copy beside the resend (docs/vendors.md).
func newTransport() *http.Transport {
	t := vendorhttp.HTTP1Transport()
	t.DisableKeepAlives = true
	return t
}

func (c Config) validate() error {
	if len(c.Targets) == 0 {
		return errors.New("webhook: Config.Targets is empty: name at least one target")
	}
	for name, t := range c.Targets {
		if strings.TrimSpace(name) == "" {
			return errors.New("webhook: a target has an empty name")
		}
		if err := validateBaseURL(t.BaseURL); err != nil {
			return fmt.Errorf("webhook: target %q: %w", name, err)
		}
		if (t.SecretHeader == "") != (t.Secret == "") {
			return fmt.Errorf("webhook: target %q: set both SecretHeader and Secret, or neither", name)
		}
		if t.SecretHeader != "" && !validHeaderName(t.SecretHeader) {
			return fmt.Errorf("webhook: target %q: SecretHeader %q is not a valid header name", name, t.SecretHeader)
		}
	}
	if c.Timeout < 0 {
		return errors.New("webhook: Config.Timeout must not be negative")
	}
	if c.IdempotencyWindow < 0 || c.LookupLag < 0 {
		return errors.New("webhook: Config.IdempotencyWindow and LookupLag must not be negative")
	}
	if c.MaxResultBytes < 0 {
		return errors.New("webhook: Config.MaxResultBytes must not be negative")
	}
	if c.LookupPath != "" && !strings.HasPrefix(c.LookupPath, "/") {
		return fmt.Errorf("webhook: Config.LookupPath %q must start with /", c.LookupPath)
	}
	return nil
}

// validateBaseURL checks that raw is an absolute http or https URL with a
// host, no credentials, no query and no fragment. Its errors do not repeat the
// URL, whose path may hold a credential.
func validateBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("BaseURL is not a URL")
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return errors.New("BaseURL must be an absolute http or https URL")
	case u.Host == "":
		return errors.New("BaseURL has no host")
	case u.User != nil:
		return errors.New("BaseURL must not carry credentials: use SecretHeader and Secret")
	case u.RawQuery != "" || u.Fragment != "":
		return errors.New("BaseURL must not have a query or a fragment")
	}
	return nil
}

// validHeaderName reports whether name is an HTTP token.
func validHeaderName(name string) bool {
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return name != ""
}
