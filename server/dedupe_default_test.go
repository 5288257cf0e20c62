package server_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/devkit/fakewebhook"
)

// TestWriteToolsDedupeAcrossSessionsByDefault: with no dedupe setting anywhere, two MCP
// sessions naming no conversation call a catalog HTTP write tool and an upstream MCP
// write tool with the same arguments: one side effect each at the fake target and the
// fake upstream. A tool with dedupe_window: 0s is named in the start log.
func TestWriteToolsDedupeAcrossSessionsByDefault(t *testing.T) {
	t.Parallel()
	hook := fakewebhook.New(fakewebhook.Config{})
	target := httptest.NewServer(hook)
	t.Cleanup(target.Close)
	var logs syncBuffer
	fake := fakemcp.New()
	base, token, _, pool := upstreamOnceboxLogged(t, fake, func(url string) string {
		return `
targets:
  helpdesk:
    base_url: ` + target.URL + `
tools:
  helpdesk.create_ticket:
    description: Open a support ticket for a customer.
    class: write
    target: helpdesk
    path: /tickets
    input_schema:
      type: object
      properties: {subject: {type: string}}
      required: [subject]
  helpdesk.note:
    description: Add a note.
    class: write
    target: helpdesk
    path: /notes
    dedupe_window: 0s
    input_schema: {type: object, properties: {text: {type: string}}}
upstreams:
  mail:
    url: ` + url + `
`
	}, nil, slog.New(slog.NewTextHandler(&logs, nil)))
	calls := []*mcp.CallToolParams{
		{Name: "helpdesk_create_ticket", Arguments: map[string]any{"subject": "Broken"}},
		{Name: "mail_send_mail", Arguments: map[string]any{"to": "ann@example.com", "subject": "Hi"}},
	}
	a, b := mcpSession(t, base, token), mcpSession(t, base, token)
	for _, p := range calls {
		var wg sync.WaitGroup
		for _, cs := range []*mcp.ClientSession{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A copy per call: the SDK's client writes the protocol's _meta into
				// the params it is given (2026-07-28), so two calls must not share them.
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: p.Name, Arguments: p.Arguments})
				require.NoError(t, err)
				require.False(t, res.IsError, "%+v", res.Content)
			}()
		}
		wg.Wait()
	}
	waitStatus(t, pool, "helpdesk.create_ticket", "succeeded")
	waitStatus(t, pool, "mail.send_mail", "succeeded")
	require.Len(t, hook.Effects(), 1, "one ticket at the target")
	require.Len(t, fake.Mails(), 1, "one mail at the upstream")
	require.Contains(t, logs.String(), "no cross-session dedupe")
	require.Contains(t, logs.String(), "helpdesk.note")
	require.NotContains(t, logs.String(), "helpdesk.create_ticket]")
}
