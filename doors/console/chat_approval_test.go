package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
	"github.com/oncebox/oncebox/testkit/oauthas"
)

// TestApprovalLinkInTheChat (issue 45, item 3): a refund asked for over MCP waits for
// approval, and its result gives the person in the chat a link to that op on the
// console's approvals page; the agent's token cannot sign in there; an approver who
// follows the link signs in, sees only that op and approves it with the page's own
// form; the call re-issued over MCP then returns the settled refund, and the fake
// Stripe holds exactly one refund.
func TestApprovalLinkInTheChat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startWith(t, func(c *server.Config) { c.PublicURL = "http://oncebox.test" })
	pay := e.api(t, "pay-chat", `{"tool":"stripe.payment_intent","args":{"amount":9000,"currency":"usd","payment_method":"pm_card_visa","confirm":true}}`)
	require.Equal(t, "succeeded", pay["status"], pay)
	refund := &mcp.CallToolParams{Name: "stripe_refund", Arguments: map[string]any{"payment_intent": pay["vendor_ref"], "amount": 3000}}
	call := func() string {
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "chat", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint: e.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: e.agent}}, MaxRetries: -1}, nil)
		require.NoError(t, err)
		defer cs.Close()
		res, err := cs.CallTool(ctx, refund)
		require.NoError(t, err)
		require.False(t, res.IsError)
		return res.Content[0].(*mcp.TextContent).Text
	}
	text := call()
	require.Contains(t, text, "Waiting for approval")
	m := regexp.MustCompile(`http://oncebox\.test(/console/approvals\?op=\S+) `).FindStringSubmatch(text)
	require.NotNil(t, m, "the result links the op's approval page: %s", text)
	link := m[1]
	key := regexp.MustCompile(`op key (\S+),`).FindStringSubmatch(text)[1]

	agentBrowser := newBrowser(t, e.base)
	resp, _ := agentBrowser.signIn(e.agent)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, "an agent's token never signs in to approve")

	b := newBrowser(t, e.base)
	resp, _ = b.get(link)
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "signed out, the link leads to the sign-in")
	next, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, link, next.Query().Get("next"))
	_, page := b.get(next.RequestURI())
	resp, _ = b.post("/console/signin", url.Values{"csrf": {csrfOf(t, page)}, "token": {e.approver}, "next": {link}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, link, resp.Header.Get("Location"), "signing in returns to the op")
	_, page = b.get(link)
	require.Contains(t, page, `data-key="`+key+`"`)
	require.NotContains(t, page, `data-key="`+e.refundKey+`"`, "only the linked op is shown")
	fingerprint := regexp.MustCompile(`name="fingerprint" value="([^"]+)"`).FindStringSubmatch(page)[1]
	resp, _ = b.post("/console/approvals", url.Values{"csrf": {csrfOf(t, page)}, "key": {key}, "fingerprint": {fingerprint},
		"decision": {"approve"}, "reason": {"asked in the chat"}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)

	text = call()
	require.True(t, strings.Contains(text, "was carried out then"), "the re-issued call returns the settled refund: %s", text)
	require.Len(t, e.stripe.Refunds(), 1, "one refund at Stripe")
	_, page = b.get(link)
	require.Contains(t, page, "no longer waits for approval")
}

// TestConsoleSignsInWithOnceboxTokensOnly (issue 45, item 1): an approver's OAuth
// access token, valid at the API, does not open a console session (which is bound to
// an oncebox token): 400 with the reason, not a server error.
func TestConsoleSignsInWithOnceboxTokensOnly(t *testing.T) {
	t.Parallel()
	as := oauthas.Start()
	t.Cleanup(as.Close)
	e := startWith(t, func(c *server.Config) { c.OAuthIssuer, c.OAuthAudience = as.Issuer(), "https://oncebox.example.com" })
	token := as.Mint(map[string]any{"sub": "alice", "aud": "https://oncebox.example.com", "scope": "oncebox:approver", "oncebox_tenant": "acme"}, time.Hour)
	b := newBrowser(t, e.base)
	resp, page := b.signIn(token)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, page)
	require.Equal(t, "invalid-request", reasonOf(page))
	require.Contains(t, page, "API token (obx_…)")
}
