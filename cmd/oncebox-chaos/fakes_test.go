package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/devkit/fakemcp"
	"github.com/oncebox/oncebox/protocol"
)

// post sends one request to a fake and returns its decoded JSON answer.
func post(t *testing.T, rawURL, contentType string, body []byte, header map[string]string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, rawURL, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Less(t, resp.StatusCode, 300, "%s: %s", rawURL, b)
	out := map[string]any{}
	if len(bytes.TrimSpace(b)) > 0 {
		require.NoError(t, json.Unmarshal(b, &out), "%s", b)
	}
	return out
}

func stripePost(t *testing.T, f *fakes, path string, form url.Values) string {
	t.Helper()
	res := post(t, f.stripeURL+path, "application/x-www-form-urlencoded", []byte(form.Encode()),
		map[string]string{"Authorization": "Bearer sk_test_chaos"})
	id, _ := res["id"].(string)
	require.NotEmpty(t, id)
	return id
}

func mail(t *testing.T, f *fakes, opID string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"personalizations": []any{map[string]any{"to": []any{
			map[string]string{"email": "a@example.com"}, map[string]string{"email": "b@example.com"}}}},
		"from":        map[string]string{"email": "chaos@example.com"},
		"subject":     "hello",
		"content":     []any{map[string]string{"type": "text/plain", "value": "hi"}},
		"custom_args": map[string]string{"oncebox_op": opID},
	})
	require.NoError(t, err)
	post(t, f.sendgridURL+"/v3/mail/send", "application/json", body, map[string]string{"Authorization": "Bearer SG.chaos"})
}

func deliver(t *testing.T, base, opID, key string) {
	t.Helper()
	post(t, base+"/hooks/1", "application/json", []byte(`{"n":1}`), map[string]string{"Oncebox-Op": opID, "Idempotency-Key": key})
}

// mcpSend calls the fake MCP upstream's send_mail with ref opID, through the SDK's
// client.
func mcpSend(t *testing.T, f *fakes, opID string) {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: f.mcpURL, MaxRetries: -1}, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_mail",
		Arguments: map[string]any{"to": "a@example.com", "subject": "hello", "ref": opID}})
	require.NoError(t, err)
	require.False(t, res.IsError)
}

// TestObjectsSeeDuplicatesOfEveryKind seeds the real fakes, through their
// HTTP APIs, with two side effects for one op of each kind (payment intents,
// refunds, two-recipient mails, webhook deliveries to the deduplicating and to
// the plain receiver, the MCP upstream's mails) and requires the verdict to see every duplicate; an op
// with one two-recipient mail is one effect, not two.
func TestObjectsSeeDuplicatesOfEveryKind(t *testing.T) {
	t.Parallel()
	f, err := startFakes(0, nil, 1)
	require.NoError(t, err)
	t.Cleanup(f.close)

	charge := func(opID string) string {
		return stripePost(t, f, "/v1/payment_intents", url.Values{"amount": {"1500"}, "currency": {"usd"},
			"payment_method": {"pm_card_visa"}, "confirm": {"true"}, "metadata[oncebox_op]": {opID}})
	}
	pi1, _ := charge("op-pi"), charge("op-pi")
	base := charge("op-base")
	re1 := stripePost(t, f, "/v1/refunds", url.Values{"payment_intent": {base}, "amount": {"100"}, "metadata[oncebox_op]": {"op-re"}})
	stripePost(t, f, "/v1/refunds", url.Values{"payment_intent": {base}, "amount": {"100"}, "metadata[oncebox_op]": {"op-re"}})
	mail(t, f, "op-mail")
	mail(t, f, "op-mail")
	mail(t, f, "op-once")
	// Two keys: the deduplicating receiver performs both.
	deliver(t, f.webhookURL, "op-hook", "key-1")
	deliver(t, f.webhookURL, "op-hook", "key-2")
	// One key twice: the plain receiver performs both.
	deliver(t, f.plainURL, "op-plain", "key-3")
	deliver(t, f.plainURL, "op-plain", "key-3")
	mcpSend(t, f, "op-mcp")
	mcpSend(t, f, "op-mcp")

	objs := f.objects()
	byOp := map[string][]VendorObject{}
	for _, o := range objs {
		byOp[o.OpID] = append(byOp[o.OpID], o)
	}
	require.Len(t, byOp["op-pi"], 2)
	require.Len(t, byOp["op-re"], 2)
	require.Len(t, byOp["op-mail"], 2, "one object per message, whatever its recipients")
	require.Len(t, byOp["op-once"], 1, "a message to two recipients is one side effect")
	require.Len(t, byOp["op-hook"], 2)
	require.Len(t, byOp["op-plain"], 2)
	require.Len(t, byOp["op-mcp"], 2)
	require.Equal(t, int64(1500), *byOp["op-pi"][0].Amount)
	require.Equal(t, int64(100), *byOp["op-re"][0].Amount)

	in := CheckInput{Objects: objs, Accepted: map[string]string{}, Planned: map[string]Plan{}}
	op := func(id, tool, ref string) {
		key := "k-" + id
		in.Ops = append(in.Ops, OpRecord{ID: id, Key: key, Tool: tool, Status: statusSucceeded, VendorRef: ref})
		in.Accepted[key] = tool
		in.Planned[key] = Plan{}
	}
	op("op-pi", protocol.ToolPaymentIntent, pi1)
	op("op-base", protocol.ToolPaymentIntent, base)
	op("op-re", protocol.ToolRefund, re1)
	op("op-mail", protocol.ToolMail, byOp["op-mail"][0].ID)
	op("op-once", protocol.ToolMail, byOp["op-once"][0].ID)
	op("op-hook", protocol.ToolWebhookPost, byOp["op-hook"][0].ID)
	op("op-plain", protocol.ToolWebhookPost, byOp["op-plain"][0].ID)
	op("op-mcp", toolMCP, byOp["op-mcp"][0].ID)

	rep := Check(in)
	require.False(t, rep.OK())
	var dup []string
	for _, d := range rep.Duplicates {
		dup = append(dup, d.OpID)
	}
	require.ElementsMatch(t, []string{"op-pi", "op-re", "op-mail", "op-hook", "op-plain", "op-mcp"}, dup, "%v", rep.Findings())
	require.Empty(t, rep.Lost)
	require.Empty(t, rep.Orphans)
	require.Empty(t, rep.Mismatched, "%v", rep.Findings())
}

// TestStdioObjectsFromTheStateFile: the stdio upstream's mails are read from the state
// file its processes share, each one side effect of the op its ref names; a subject
// with the conflict marker is a leak.
func TestStdioObjectsFromTheStateFile(t *testing.T) {
	t.Parallel()
	h := &harness{mcpStdioState: filepath.Join(t.TempDir(), "state.json")}
	objs, err := h.stdioObjects()
	require.NoError(t, err)
	require.Empty(t, objs, "no file yet: no mail")
	b, err := json.Marshal(fakemcp.State{Mails: []fakemcp.Mail{
		{ID: "mail_1", Ref: "op-1", Subject: "chaos k1"}, {ID: "mail_2", Ref: "op-2", Subject: conflictMarker + " k2"}}})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(h.mcpStdioState, b, 0o600))
	objs, err = h.stdioObjects()
	require.NoError(t, err)
	require.Len(t, objs, 2)
	require.Equal(t, VendorObject{Kind: kindMCPStdioMail, ID: "mail_1", OpID: "op-1", Effect: true, Detail: objs[0].Detail}, objs[0])
	require.True(t, objs[1].Conflict)
	require.Equal(t, kindMCPStdioMail, kindOf(toolMCPStdio))
}

// TestObjectsOnStripeAccounts charges on two Connect accounts of the real fake, through
// its HTTP API with Stripe-Account, and requires the verdict's objects to name the
// account that holds each, the refund picker to pick only its own account's charges,
// and the verdict to flag the charge of tenant a that landed on tenant b's account.
func TestObjectsOnStripeAccounts(t *testing.T) {
	t.Parallel()
	f, err := startFakes(0, nil, 1)
	require.NoError(t, err)
	t.Cleanup(f.close)
	f.stripe.AddAccount(accountA)
	f.stripe.AddAccount(accountB)
	charge := func(account, opID string) string {
		t.Helper()
		form := url.Values{"amount": {"1500"}, "currency": {"usd"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"},
			"metadata[oncebox_op]": {opID}}
		res := post(t, f.stripeURL+"/v1/payment_intents", "application/x-www-form-urlencoded", []byte(form.Encode()),
			map[string]string{"Authorization": "Bearer sk_test_chaos", "Stripe-Account": account})
		return res["id"].(string)
	}
	piA, piB, piWrong := charge(accountA, "op-a"), charge(accountB, "op-b"), charge(accountB, "op-a2")

	accounts := map[string]string{}
	for _, o := range f.objects() {
		accounts[o.ID] = o.Account
	}
	require.Equal(t, map[string]string{piA: accountA, piB: accountB, piWrong: accountB}, accounts)

	picker := &refundPicker{f: f, used: map[string]bool{}}
	args, madeBy, ok := picker.pick(accountA)
	require.True(t, ok)
	require.Equal(t, piA, args["payment_intent"])
	require.Equal(t, "op-a", madeBy, "the op the payment intent is tagged with")
	_, _, ok = picker.pick(accountA)
	require.False(t, ok, "account A holds one charge, already picked")

	ops := []OpRecord{
		{ID: "op-a", Key: "k-a", Tool: protocol.ToolPaymentIntent, Status: statusSucceeded, VendorRef: piA, Tenant: "a"},
		{ID: "op-b", Key: "k-b", Tool: protocol.ToolPaymentIntent, Status: statusSucceeded, VendorRef: piB, Tenant: "b"},
		{ID: "op-a2", Key: "k-a2", Tool: protocol.ToolPaymentIntent, Status: statusSucceeded, VendorRef: piWrong, Tenant: "a"},
	}
	rep := Check(CheckInput{Ops: ops, Objects: f.objects(), AccountTenant: map[string]string{accountA: "a", accountB: "b"}})
	require.Len(t, rep.WrongAccount, 1)
	require.Equal(t, "op-a2", rep.WrongAccount[0].OpID)
	require.Len(t, rep.Lost, 1)
	require.Equal(t, "op-a2", rep.Lost[0].OpID)
}
