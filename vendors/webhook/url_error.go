package webhook

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// targetError replaces net/http's *url.Error, whose text carries the full URL: a
// target's BaseURL may hold a credential in its path (Slack-style hooks), and the text
// of a dispatch error reaches the op's error, its attempt rows, River's job errors and
// the history. It names the target and the tool's path only, and unwraps to the
// transport's own error, so timeouts are still recognised.
type targetError struct {
	op, target, path string
	err              error
	// hide lists strings the wrapped error's text must not show (the target's
	// URL and its path).
	hide []string
}

// Error names the target and the path, never the URL.
func (e *targetError) Error() string {
	msg := e.err.Error()
	for _, h := range e.hide {
		msg = strings.ReplaceAll(msg, h, "[target URL]")
	}
	return fmt.Sprintf("%s to webhook target %q path %q: %s", e.op, e.target, e.path, msg)
}

// Unwrap returns the transport's error (without the URL).
func (e *targetError) Unwrap() error { return e.err }

// hideURL returns err with any *url.Error in it replaced by a targetError naming
// target and path, and with the target's base URL and its path scrubbed from the
// rest of the text.
func hideURL(err error, op, target, path, baseURL string) error {
	if err == nil {
		return nil
	}
	hide := urlForms(baseURL)
	var ue *url.Error
	if errors.As(err, &ue) {
		if op == "" {
			op = ue.Op
		}
		return &targetError{op: op, target: target, path: path, err: ue.Err, hide: hide}
	}
	return &targetError{op: op, target: target, path: path, err: err, hide: hide}
}

// urlForms lists the forms of a base URL an error text might carry, longest first:
// the URL itself, and its path when it has more than "/".
func urlForms(baseURL string) []string {
	forms := []string{baseURL, strings.TrimSuffix(baseURL, "/")}
	if u, err := url.Parse(baseURL); err == nil {
		if p := strings.TrimSuffix(u.EscapedPath(), "/"); len(p) > 1 {
			forms = append(forms, p)
		}
		if p := strings.TrimSuffix(u.Path, "/"); len(p) > 1 {
			forms = append(forms, p)
		}
	}
	return forms
}
