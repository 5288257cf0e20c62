// Package sameorigin keeps the credentials oncebox sends with a request at the origin
// they are meant for: an HTTP client's CheckRedirect that follows a redirect only
// within the origin (scheme, host and port) of the first request, and a check
// transports use before they add configured headers.
package sameorigin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// maxRedirects is how many redirects within one origin a request follows, as Go's
// default client does.
const maxRedirects = 10

// Of returns u's origin: "scheme://host:port", the port written out.
func Of(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host + ":" + port
}

// Same says a and b have the same origin.
func Same(a, b *url.URL) bool { return Of(a) == Of(b) }

// CheckRedirect returns an http.Client CheckRedirect that follows up to 10 redirects
// within the first request's origin and refuses one to another origin with an error
// naming what (such as `upstream "mail"`) and both origins, so that no header or body
// meant for the first origin reaches another.
func CheckRedirect(what string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) == 0 {
			return nil
		}
		if from := via[0].URL; !Same(from, req.URL) {
			return fmt.Errorf("%s redirected to %s, another origin than %s: oncebox does not follow redirects to another origin, so that its credentials and bodies stay where they are meant to go",
				what, Of(req.URL), Of(from))
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("%s: stopped after %d redirects", what, maxRedirects)
		}
		return nil
	}
}
