package tools_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

// sha returns "sha256:<hex>" of s.
func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

func TestMailRedact(t *testing.T) {
	t.Parallel()

	const args = `{
		"from": {"email": "Billing@Shop.example", "name": "Shop Billing"},
		"to": [{"email": "ada.lovelace@example.com", "name": "Ada Lovelace"}, {"email": "bob@example.org"}],
		"subject": "Your diagnosis, Ada",
		"text": "Dear Ada, your results are in.",
		"html": "<p>Dear Ada, your results are in.</p>",
		"template_id": "d-42",
		"dynamic_template_data": {"first_name": "Ada", "balance": 12.50},
		"categories": ["results", "agent"]
	}`
	tool := builtinTool(t, tools.Config{}, protocol.ToolMail)
	require.NotNil(t, tool.Redact, "mail is redacted by default")
	require.Nil(t, tool.RedactResult, "the result (an X-Message-Id) is kept as is")

	out := tool.Redact(json.RawMessage(args))
	require.True(t, json.Valid(out), "redacted args must be valid JSON: %s", out)
	for _, secret := range []string{
		"billing@shop.example", "Billing@Shop.example", "Shop Billing", "ada.lovelace", "example.com", "bob@",
		"Ada", "diagnosis", "results are in", "<p>", "first_name", "12.50",
	} {
		require.NotContains(t, string(out), secret)
	}

	var got map[string]any
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, map[string]any{"email": sha("billing@shop.example")}, got["from"], "address lower-cased and hashed, name dropped")
	require.Equal(t, []any{
		map[string]any{"email": sha("ada.lovelace@example.com")},
		map[string]any{"email": sha("bob@example.org")},
	}, got["to"])
	require.Equal(t, map[string]any{"redacted": sha("Your diagnosis, Ada"), "bytes": float64(len("Your diagnosis, Ada"))}, got["subject"])
	require.Equal(t, map[string]any{"redacted": sha("Dear Ada, your results are in."), "bytes": float64(30)}, got["text"])
	require.Equal(t, sha("<p>Dear Ada, your results are in.</p>"), got["html"].(map[string]any)["redacted"])
	require.Equal(t, map[string]any{"redacted": sha(`{"balance":12.50,"first_name":"Ada"}`), "bytes": float64(36)}, got["dynamic_template_data"])
	require.Equal(t, "d-42", got["template_id"], "template_id stays")
	require.Equal(t, []any{"results", "agent"}, got["categories"], "categories stay")
	require.Len(t, got, 8)

	// The redacted form is stable: the same address hashes the same way in every op.
	require.Equal(t, string(out), string(tool.Redact(json.RawMessage(args))))
}

func TestMailRedactAbsentFieldsStayAbsent(t *testing.T) {
	t.Parallel()

	out := builtinTool(t, tools.Config{}, protocol.ToolMail).Redact(json.RawMessage(
		`{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subject":"s","text":"t"}`))
	require.JSONEq(t, `{
		"from": {"email": "`+sha("a@example.com")+`"},
		"to": [{"email": "`+sha("b@example.com")+`"}],
		"subject": {"redacted": "`+sha("s")+`", "bytes": 1},
		"text": {"redacted": "`+sha("t")+`", "bytes": 1}
	}`, string(out))
}

func TestMailRedactUndecodableArgs(t *testing.T) {
	t.Parallel()

	args := `{"from":{"email":"a@example.com"},"to":"secret@example.com"}`
	out := builtinTool(t, tools.Config{}, protocol.ToolMail).Redact(json.RawMessage(args))
	require.True(t, json.Valid(out))
	require.NotContains(t, string(out), "example.com")
	require.JSONEq(t, `{"redacted":"`+sha(args)+`","bytes":`+jsonInt(len(args))+`}`, string(out))
}

func TestMailRedactIsIdempotent(t *testing.T) {
	t.Parallel()

	for _, cfg := range []tools.Config{{}, {RedactKey: []byte("k")}} {
		redact := builtinTool(t, cfg, protocol.ToolMail).Redact
		once := redact(json.RawMessage(`{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subject":"s","text":"t"}`))
		require.Equal(t, string(once), string(redact(once)), "redacting redacted args keeps the hashes")
		whole := redact(json.RawMessage(`{"to":"not a list"}`))
		require.Equal(t, string(whole), string(redact(whole)), "and so does redacting a whole marker")
	}
}

func TestMailRedactKeyed(t *testing.T) {
	t.Parallel()

	key := []byte("0123456789abcdef0123456789abcdef")
	out := builtinTool(t, tools.Config{RedactKey: key}, protocol.ToolMail).Redact(json.RawMessage(
		`{"from":{"email":"A@example.com"},"to":[{"email":"b@example.com"}],"subject":"s","text":"t"}`))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("a@example.com"))
	var got struct {
		From struct{ Email string } `json:"from"`
	}
	require.NoError(t, json.Unmarshal(out, &got))
	require.Equal(t, "hmac-sha256:"+hex.EncodeToString(mac.Sum(nil)), got.From.Email,
		"an address cannot be found by hashing guesses without the key")
	require.NotContains(t, string(out), sha("a@example.com"))
}

func TestMailRedactOff(t *testing.T) {
	t.Parallel()

	require.Nil(t, builtinTool(t, tools.Config{NoMailRedaction: true}, protocol.ToolMail).Redact)
	require.NotNil(t, builtinTool(t, tools.Config{}, protocol.ToolMail).Redact)
}

func TestStripeNotRedacted(t *testing.T) {
	t.Parallel()

	for _, name := range []string{protocol.ToolPaymentIntent, protocol.ToolRefund, protocol.ToolWebhookPost} {
		tool := builtinTool(t, tools.Config{}, name)
		require.Nil(t, tool.Redact, name)
		require.Nil(t, tool.RedactResult, name)
	}
}

// jsonInt formats n as JSON.
func jsonInt(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
