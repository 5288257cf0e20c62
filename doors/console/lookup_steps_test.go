package console_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/server"
)

// oneStepCatalog is a composite tool of one step, a payment through the built-in
// Stripe tool.
const oneStepCatalog = `
tools:
  shop.checkout:
    description: Check an order out.
    input_schema: {type: object, properties: {amount: {type: integer}}, required: [amount]}
    steps:
      - name: charge
        tool: stripe.payment_intent
        args: {amount: {$from: /call/amount}, currency: usd, payment_method: pm_card_visa, confirm: true}
`

// TestLookupShowsTheStepTree: the lookup of a composite op lists its steps, each with
// its status in words and a link to the step's op named by the caller's key (not the
// op's UUID); its timeline tells each step in a sentence, not bare "steps by steps"
// rows; and the step's own lookup links back to its parent by the caller's key.
func TestLookupShowsTheStepTree(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "tools.yaml")
	require.NoError(t, os.WriteFile(file, []byte(oneStepCatalog), 0o600))
	e := startWith(t, func(c *server.Config) { c.ToolsFile = file })
	parent := e.api(t, "checkout-7", `{"tool":"shop.checkout","args":{"amount":700}}`)
	parentID, _ := parent["id"].(string)
	require.NotEmpty(t, parentID, parent)

	b := newBrowser(t, e.base)
	resp, page := b.signIn(e.approver)
	require.Equal(t, http.StatusOK, resp.StatusCode, page)
	stepKey := "~step/" + parentID + "/charge"
	require.Eventually(t, func() bool {
		_, page = b.get("/console/lookup?q=checkout-7")
		return strings.Contains(page, "<h3>Steps</h3>") && strings.Contains(page, `<strong>charge</strong> <span class="status s-succeeded" data-status="succeeded">done</span>`)
	}, 20*time.Second, 100*time.Millisecond, "the parent's lookup lists its step as done: %s", page)
	require.Contains(t, page, `<code>checkout-7 › charge</code></a>`)
	require.NotContains(t, page, "<code>"+stepKey+"</code>", "the step's link shows the caller's key, not the op's UUID")
	timeline := page[strings.Index(page, `<ol class="timeline">`):]
	require.Contains(t, timeline, "step charge started, as an op of its own")
	require.Contains(t, timeline, "op checkout-7 › charge")
	require.Contains(t, timeline, "steps finished: every step done")
	require.Contains(t, timeline, "settled by its steps: now done")
	require.NotContains(t, timeline, "<strong>steps</strong>", "no bare steps rows")
	require.NotContains(t, timeline, "by steps<", "the step runner is named in words")

	_, page = b.get("/console/lookup?q=" + stepKey)
	require.Contains(t, page, "stripe.payment_intent")
	require.Contains(t, page, `its parent, <code>checkout-7</code>`)
	require.Contains(t, page, `<dd class="amount" id="op-amount">$7.00 USD</dd>`, "the step's payment shows its amount")
}
