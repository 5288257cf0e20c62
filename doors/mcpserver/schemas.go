package mcpserver

import (
	"encoding/json"

	"github.com/oncebox/oncebox/protocol"
)

// toolSpec is how one built-in tool is offered to models.
type toolSpec struct {
	// Tool is the oncebox tool name, such as "stripe.payment_intent".
	Tool        string
	Description string
	// InputSchema is the JSON Schema of the tool's arguments. It has no key field: the
	// server, not the model, mints idempotency keys.
	InputSchema json.RawMessage
}

const metadataSchema = `{
	"type": "object",
	"description": "Optional Stripe metadata: at most 49 string keys (up to 40 characters) with string values (up to 500 characters). The key \"oncebox_op\" is reserved.",
	"maxProperties": 49,
	"additionalProperties": {"type": "string", "maxLength": 500}
}`

const addressSchema = `{
	"type": "object",
	"properties": {
		"email": {"type": "string", "description": "A bare email address, such as \"ada@example.com\"."},
		"name": {"type": "string", "description": "An optional display name, such as \"Ada Lovelace\"."}
	},
	"required": ["email"],
	"additionalProperties": false
}`

// builtinSpecs returns the specs of the four built-in tools.
func builtinSpecs() []toolSpec {
	return []toolSpec{
		{
			Tool: protocol.ToolPaymentIntent,
			Description: "Create a Stripe PaymentIntent (a payment). oncebox makes sure it is created at most once: " +
				"calling again for the same request does not charge again. The result says whether the payment was " +
				"created now, had already been created earlier, is still pending, or was refused.",
			InputSchema: json.RawMessage(`{
	"type": "object",
	"properties": {
		"amount": {"type": "integer", "minimum": 1, "maximum": 99999999, "description": "Amount in the currency's minor units (cents), from 1 to 99999999."},
		"currency": {"type": "string", "pattern": "^[a-z]{3}$", "description": "Three-letter ISO currency code in lower case, such as \"usd\"."},
		"customer": {"type": "string", "description": "Optional Stripe customer id (\"cus_...\")."},
		"payment_method": {"type": "string", "description": "Optional Stripe payment method id; required when confirm is true."},
		"confirm": {"type": "boolean", "description": "Confirm the PaymentIntent on creation (needs payment_method)."},
		"description": {"type": "string", "maxLength": 1000, "description": "Optional description, at most 1000 characters."},
		"metadata": ` + metadataSchema + `
	},
	"required": ["amount", "currency"],
	"additionalProperties": false
}`),
		},
		{
			Tool: protocol.ToolRefund,
			Description: "Refund a Stripe PaymentIntent or Charge, in full or in part. oncebox makes sure the refund is " +
				"made at most once. Large refunds may wait for a person's approval; the result says so.",
			InputSchema: json.RawMessage(`{
	"type": "object",
	"properties": {
		"payment_intent": {"type": "string", "description": "Id (\"pi_...\") of the PaymentIntent to refund. Give exactly one of payment_intent and charge."},
		"charge": {"type": "string", "description": "Id (\"ch_...\" or \"py_...\") of the Charge to refund. Give exactly one of payment_intent and charge."},
		"amount": {"type": "integer", "minimum": 1, "maximum": 99999999, "description": "Amount to refund in minor units (cents); leave it out to refund what is left."},
		"reason": {"type": "string", "enum": ["duplicate", "fraudulent", "requested_by_customer"], "description": "Optional reason for the refund."},
		"metadata": ` + metadataSchema + `
	},
	"additionalProperties": false
}`),
		},
		{
			Tool: protocol.ToolMail,
			Description: "Send one email through SendGrid to 1 to 1000 recipients, with a subject and a text or HTML body, " +
				"or with a SendGrid template. oncebox makes sure the email is sent at most once.",
			InputSchema: json.RawMessage(`{
	"type": "object",
	"properties": {
		"from": ` + addressSchema + `,
		"to": {"type": "array", "minItems": 1, "maxItems": 1000, "items": ` + addressSchema + `, "description": "Recipients, 1 to 1000 distinct addresses."},
		"subject": {"type": "string", "maxLength": 998, "description": "Subject line; required unless template_id is given."},
		"text": {"type": "string", "description": "Plain-text body. Give text, html or template_id."},
		"html": {"type": "string", "description": "HTML body. Give text, html or template_id."},
		"template_id": {"type": "string", "description": "A SendGrid template id, such as \"d-...\"."},
		"dynamic_template_data": {"type": "object", "description": "Values for the template; only with template_id."},
		"categories": {"type": "array", "maxItems": 10, "items": {"type": "string", "minLength": 1, "maxLength": 255}, "description": "At most 10 distinct category names."}
	},
	"required": ["from", "to"],
	"additionalProperties": false
}`),
		},
		{
			Tool: protocol.ToolWebhookPost,
			Description: "POST a JSON body to a configured webhook target (a named system such as a CRM; the target decides " +
				"scheme and host). oncebox makes sure the post is made at most once.",
			InputSchema: json.RawMessage(`{
	"type": "object",
	"properties": {
		"target": {"type": "string", "description": "Name of a configured webhook target."},
		"path": {"type": "string", "maxLength": 2048, "description": "Path (and optional query) on the target, starting with \"/\", such as \"/contacts\"."},
		"body": {"description": "The JSON value to post, if any."}
	},
	"required": ["target", "path"],
	"additionalProperties": false
}`),
		},
	}
}

// mcpToolName is the MCP name of an oncebox tool: dots become underscores, since some
// MCP clients refuse dots in tool names.
func mcpToolName(tool string) string {
	out := []byte(tool)
	for i, c := range out {
		if c == '.' {
			out[i] = '_'
		}
	}
	return string(out)
}

// occurrenceHelp ends every tool's description: how to ask for a deliberate repeat.
const occurrenceHelp = " Identical calls are done once, even when a call is retried or sent again from another session: " +
	"to do the very same thing once more because the user explicitly asks for it, call again with \"occurrence\" " +
	"set to 2 (then 3, and so on); never raise it to retry a call."

// occurrenceSchema is the schema of the optional occurrence argument.
const occurrenceSchema = `{"type": "integer", "minimum": 1, "maximum": 1000, "default": 1, ` +
	`"description": "Leave it out (1). Raise it only when the user explicitly asks to do the same thing again: 2 for the second time, 3 for the third. A retry keeps the same number."}`

// withOccurrence adds the occurrence argument to an input schema.
func withOccurrence(schema json.RawMessage) json.RawMessage {
	var s map[string]json.RawMessage
	if json.Unmarshal(schema, &s) != nil {
		return schema
	}
	var props map[string]json.RawMessage
	if json.Unmarshal(s["properties"], &props) != nil || props == nil {
		props = map[string]json.RawMessage{}
	}
	props[ArgOccurrence] = json.RawMessage(occurrenceSchema)
	b, err := json.Marshal(props)
	if err != nil {
		return schema
	}
	s["properties"] = b
	out, err := json.Marshal(s)
	if err != nil {
		return schema
	}
	return out
}
