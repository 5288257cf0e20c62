package tools_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// Builtin's tools go into an outbox.Registry, whose Validate refuses a bad call
// before anything is stored, naming the field.
func ExampleBuiltin() {
	reg, err := outbox.NewRegistry(tools.Builtin(tools.Config{
		WebhookTargets:      []string{"crm"},
		RefundApprovalAbove: 10000, // refunds above $100.00 wait for a person
	})...)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(reg.Names())

	tool, err := reg.Validate(protocol.ToolRefund, json.RawMessage(`{"payment_intent":"pi_123","amount":25000}`))
	fmt.Println(err, tool.NeedsApproval(json.RawMessage(`{"payment_intent":"pi_123","amount":25000}`)))

	_, err = reg.Validate(protocol.ToolPaymentIntent, json.RawMessage(`{"amount":10.5,"currency":"usd"}`))
	var ve *vendorapi.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Field, "-", ve.Message)
	}

	_, err = reg.Validate(protocol.ToolMail, json.RawMessage(`{"from":{"email":"a@example.com"},"to":[{"email":"b@example.com"}],"subjct":"Hi","text":"x"}`))
	fmt.Println(err)

	_, err = reg.Validate(protocol.ToolWebhookPost, json.RawMessage(`{"target":"billing","path":"/x"}`))
	fmt.Println(err, errors.Is(err, vendorapi.ErrInvalidArgs))

	// Output:
	// [sendgrid.mail stripe.payment_intent stripe.refund webhook.post]
	// <nil> true
	// args.amount - must be an integer greater than 0, in the currency's minor units (no fraction or exponent)
	// args.subjct: unknown field; allowed: from, to, subject, text, html, template_id, dynamic_template_data, categories
	// args.target: is not an allowed webhook target; allowed: crm true
}
