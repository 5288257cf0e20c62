package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// args is the webhook tool's arguments, decoded here rather than through the
// tools package so that the adapter depends on outbox alone.
type args struct {
	Target string          `json:"target"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
	// Method is the HTTP method; empty means POST. webhook.post never sets it (its
	// arguments refuse unknown fields); the tool catalog (package catalog) does.
	Method string `json:"method,omitempty"`
}

// methods are the HTTP methods a request may use.
var methods = map[string]bool{
	http.MethodGet: true, http.MethodPost: true, http.MethodPut: true, http.MethodPatch: true, http.MethodDelete: true,
}

// decodeArgs decodes and checks a tool call's arguments.
func decodeArgs(raw json.RawMessage) (args, error) {
	var a args
	if err := json.Unmarshal(raw, &a); err != nil {
		return args{}, fmt.Errorf("decode webhook args: %w", err)
	}
	if a.Target == "" {
		return args{}, errors.New("webhook args: target is required")
	}
	if a.Path != "" && !strings.HasPrefix(a.Path, "/") {
		return args{}, fmt.Errorf("webhook args: path %q must start with /", a.Path)
	}
	if a.Method == "" {
		a.Method = http.MethodPost
	}
	if !methods[a.Method] {
		return args{}, fmt.Errorf("webhook args: method %q is not one of GET, POST, PUT, PATCH, DELETE", a.Method)
	}
	return a, nil
}

// hasBody says whether the request carries a JSON body: not for GET and DELETE.
func (a args) hasBody() bool { return a.Method != http.MethodGet && a.Method != http.MethodDelete }

// requestBody returns the body to send: {} for an absent or null body, nothing
// for GET and DELETE.
func (a args) requestBody() []byte {
	if !a.hasBody() {
		return nil
	}
	body := bytes.TrimSpace(a.Body)
	if len(body) == 0 || bytes.Equal(body, []byte("null")) {
		return []byte("{}")
	}
	return body
}

// joinURL appends path (and, when set, a query) to base and checks that the
// result stays on base's scheme and host.
func joinURL(base, path string, query url.Values) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", fmt.Errorf("parse base URL: %w", err)
	}
	joined := strings.TrimSuffix(base, "/") + path
	u, err := url.Parse(joined)
	if err != nil {
		return "", fmt.Errorf("path %q does not make a URL: %w", path, err)
	}
	if u.Scheme != b.Scheme || u.Host != b.Host || u.User != nil || u.Fragment != "" {
		return "", fmt.Errorf("path %q leaves the target", path)
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == ".." {
			return "", fmt.Errorf("path %q must not contain a \"..\" segment", path)
		}
	}
	if len(query) > 0 {
		q := u.Query()
		for k, vs := range query {
			q[k] = vs
		}
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}
