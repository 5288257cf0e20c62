package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Tool is one tool the server offers, as GET /v1/tools lists it.
type Tool struct {
	// Name is the tool's name, as Enqueue and Read take it.
	Name string `json:"name"`
	// Class is "read" (call it with Read: answered at once, no op), "write" (an op)
	// or "unsafe" (an op that waits for a person's approval).
	Class string `json:"class"`
	// Description says what the tool does.
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the tool's arguments.
	InputSchema json.RawMessage `json:"input_schema"`
}

// Tools lists every tool the server offers: the enabled built-in tools and the
// server's tool catalog.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	res, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tools"})
	if err != nil {
		return nil, err
	}
	var list struct {
		Tools []Tool `json:"tools"`
	}
	if err := json.Unmarshal(res.body, &list); err != nil {
		return nil, fmt.Errorf("client: decode tools: %w", err)
	}
	return list.Tools, nil
}

// Read calls a read tool of the server's tool catalog with args (a value marshaled to
// a JSON object, or a json.RawMessage): at once, with no op and no key, so it is safe
// to call again. It returns the target's answer, {"status": <HTTP status>, "body":
// <answer>}. Invalid arguments are a *Problem naming the field; a target that did not
// answer is a *Problem of type read-failed. Write and unsafe tools, catalog or
// built-in, are called by name with Enqueue.
func (c *Client) Read(ctx context.Context, tool string, args any) (json.RawMessage, error) {
	var raw json.RawMessage
	switch a := args.(type) {
	case json.RawMessage:
		raw = a
	case []byte:
		raw = a
	default:
		var err error
		if raw, err = json.Marshal(args); err != nil {
			return nil, fmt.Errorf("client: marshal args of %s: %w", tool, err)
		}
	}
	body, err := json.Marshal(struct {
		Tool string          `json:"tool"`
		Args json.RawMessage `json:"args"`
	}{tool, raw})
	if err != nil {
		return nil, fmt.Errorf("client: marshal request: %w", err)
	}
	res, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/ops", body: body})
	if err != nil {
		return nil, err
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(res.body, &answer); err != nil {
		return nil, fmt.Errorf("client: decode answer of %s: %w", tool, err)
	}
	return answer.Result, nil
}
