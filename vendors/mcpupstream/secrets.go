package mcpupstream

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// minSecret is the length under which a value is not cut out of text: shorter ones
// (a flag such as "1" or "true") would cut common words to pieces and hide nothing.
const minSecret = 4

// redactedMark replaces a secret in text.
const redactedMark = "[redacted]"

// secretsOf returns what is cut out of an upstream's errors, results and logs,
// longest first: every header and environment value; the ${VAR} values expanded in
// them (Vars); a header value's credential (what follows its scheme, such as the token
// after "Bearer ") and its words of 8 characters or more; and each of these as written
// inside a JSON string, when that differs.
func secretsOf(up Config) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		for _, v := range []string{s, jsonInner(s)} {
			if len(v) >= minSecret && !seen[v] {
				seen[v] = true
				out = append(out, v)
			}
		}
	}
	for _, v := range up.Headers {
		add(v)
		add(strings.TrimSpace(v))
		if _, cred, ok := strings.Cut(strings.TrimSpace(v), " "); ok {
			add(strings.TrimSpace(cred))
		}
		for _, w := range strings.Fields(v) {
			if len(w) >= 8 {
				add(w)
			}
		}
	}
	for _, v := range up.Env {
		add(v)
	}
	for _, v := range up.Vars {
		add(v)
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// jsonInner is s as written inside a JSON string, without the quotes.
func jsonInner(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}

// scrubText cuts secrets out of s.
func scrubText(secrets []string, s string) string {
	for _, v := range secrets {
		if strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, redactedMark)
		}
	}
	return s
}

// containsSecret says whether s holds one of secrets.
func containsSecret(secrets []string, s string) bool {
	for _, v := range secrets {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// scrubbedError is an upstream's error with its secrets cut out of its text and out of
// the JSON-RPC error it carries, which errors.As finds first; the original stays in
// the chain for errors.Is and errors.As of anything else.
type scrubbedError struct {
	msg string
	rpc *jsonrpc.Error
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Unwrap() []error {
	if e.rpc != nil {
		return []error{e.rpc, e.err}
	}
	return []error{e.err}
}

// scrubErr returns err with secrets cut out of its text and its JSON-RPC error's
// message and data.
func scrubErr(secrets []string, err error) error {
	if err == nil || len(secrets) == 0 {
		return err
	}
	msg := err.Error()
	var we *jsonrpc.Error
	hasRPC := errors.As(err, &we)
	if !containsSecret(secrets, msg) && (!hasRPC || !containsSecret(secrets, we.Message+string(we.Data))) {
		return err
	}
	out := &scrubbedError{msg: scrubText(secrets, msg), err: err}
	if hasRPC {
		c := *we
		c.Message = scrubText(secrets, c.Message)
		if len(c.Data) > 0 {
			if c.Data = json.RawMessage(scrubText(secrets, string(c.Data))); !json.Valid(c.Data) {
				c.Data = nil
			}
		}
		out.rpc = &c
	}
	return out
}

// scrubResult cuts secrets out of a tools/call result and its bytes as they came (raw,
// nil when not caught). A result that is no longer valid JSON once cut (a secret
// written as a number, say) becomes a text saying so.
func scrubResult(secrets []string, upstream string, res *mcp.CallToolResult, raw json.RawMessage) (*mcp.CallToolResult, json.RawMessage) {
	if len(secrets) == 0 || res == nil {
		return res, raw
	}
	if raw != nil && containsSecret(secrets, string(raw)) {
		if raw = json.RawMessage(scrubText(secrets, string(raw))); !json.Valid(raw) {
			raw = nil
		}
	}
	b, err := json.Marshal(res)
	if err != nil || !containsSecret(secrets, string(b)) {
		return res, raw
	}
	var clean mcp.CallToolResult
	if err := json.Unmarshal([]byte(scrubText(secrets, string(b))), &clean); err != nil {
		clean = mcp.CallToolResult{IsError: res.IsError, Content: []mcp.Content{&mcp.TextContent{
			Text: "the result of upstream " + upstream + " held one of its secrets and cannot be shown"}}}
		raw = nil
	}
	return &clean, raw
}
