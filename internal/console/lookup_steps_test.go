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
// its status and a link to the step's op, and the step's own lookup links back to it.
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
		return strings.Contains(page, "<h3>Steps</h3>") && strings.Contains(page, `<strong>charge</strong> <span class="status s-succeeded">`)
	}, 20*time.Second, 100*time.Millisecond, "the parent's lookup lists its step as succeeded: %s", page)
	require.Contains(t, page, "<code>"+stepKey+"</code>")

	_, page = b.get("/console/lookup?q=" + stepKey)
	require.Contains(t, page, "stripe.payment_intent")
	require.Contains(t, page, "its parent, op "+parentID)
}
