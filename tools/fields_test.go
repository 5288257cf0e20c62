package tools_test

import (
	"encoding/json"
	"testing"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
)

// TestArgsShape checks the rules every tool shares: the arguments are one valid
// JSON object, given in UTF-8, with every key given once.
func TestArgsShape(t *testing.T) {
	t.Parallel()

	decoders := map[string]func(json.RawMessage) error{
		protocol.ToolPaymentIntent: func(a json.RawMessage) error { _, err := tools.DecodePaymentIntent(a); return err },
		protocol.ToolRefund:        func(a json.RawMessage) error { _, err := tools.DecodeRefund(a); return err },
		protocol.ToolMail:          func(a json.RawMessage) error { _, err := tools.DecodeMail(a); return err },
		protocol.ToolWebhookPost:   func(a json.RawMessage) error { _, err := tools.DecodeWebhook(a); return err },
	}
	for name, decode := range decoders {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runInvalid(t, []invalidCase{
				{"empty", ``, "args", "must be a valid JSON object"},
				{"not JSON", `{amount: 1}`, "args", "must be a valid JSON object"},
				{"two values", `{} {}`, "args", "must be a valid JSON object"},
				{"truncated", `{"amount":1`, "args", "must be a valid JSON object"},
				{"invalid UTF-8", "{\"x\":\"\xff\"}", "args", "UTF-8"},
				{"null", `null`, "args", "must be a JSON object"},
				{"array", `[{"amount":1}]`, "args", "must be a JSON object"},
				{"string", `"{}"`, "args", "must be a JSON object"},
				{"number", `1`, "args", "must be a JSON object"},
				{"unknown field", `{"typo":1}`, "args.typo", "unknown field; allowed: "},
			}, decode)
		})
	}

	// A key given twice is refused: which of the two values would a vendor see?
	runInvalid(t, []invalidCase{
		{"duplicate amount", `{"amount":1,"currency":"usd","amount":1000}`, "args.amount", "more than once"},
		{"duplicate null", `{"amount":1,"currency":"usd","customer":null,"customer":"cus_1"}`, "args.customer", "more than once"},
	}, decoders[protocol.ToolPaymentIntent])
	runInvalid(t, []invalidCase{
		{"duplicate to", `{"from":{"email":"a@example.com"},"to":[],"to":[{"email":"b@example.com"}],"subject":"s","text":"t"}`, "args.to", "more than once"},
		{"duplicate nested", `{"from":{"email":"a@example.com","email":"c@example.com"},"to":[{"email":"b@example.com"}],"subject":"s","text":"t"}`, "args.from.email", "more than once"},
	}, decoders[protocol.ToolMail])
}
