package protocol

import "encoding/json"

// Names of the built-in tools, as an op's "tool" names them.
const (
	// ToolPaymentIntent creates a Stripe PaymentIntent (PaymentIntentArgs).
	ToolPaymentIntent = "stripe.payment_intent"
	// ToolRefund refunds a Stripe PaymentIntent or Charge (RefundArgs).
	ToolRefund = "stripe.refund"
	// ToolMail sends one email through SendGrid's v3 mail/send (MailArgs).
	ToolMail = "sendgrid.mail"
	// ToolWebhookPost posts a JSON body to an allow-listed webhook target (WebhookArgs).
	ToolWebhookPost = "webhook.post"
)

// The argument types below are what an agent sends; the server validates them with
// the tools package (tools.DecodePaymentIntent and the others), which refuses unknown
// fields and names the offending one.

// PaymentIntentArgs are the arguments of stripe.payment_intent.
type PaymentIntentArgs struct {
	// Amount is in the currency's minor units (cents), from 1 to 99999999.
	Amount int64 `json:"amount"`
	// Currency is a lower-case three-letter ISO code, such as "usd".
	Currency string `json:"currency"`
	// Customer is an optional Stripe customer id ("cus_...").
	Customer string `json:"customer,omitempty"`
	// PaymentMethod is an optional Stripe payment method id; required when Confirm is set.
	PaymentMethod string `json:"payment_method,omitempty"`
	// Confirm asks Stripe to confirm the PaymentIntent on creation.
	Confirm bool `json:"confirm,omitempty"`
	// Description is at most 1000 characters.
	Description string `json:"description,omitempty"`
	// Metadata is at most 49 keys; the key "oncebox_op" is reserved.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// RefundArgs are the arguments of stripe.refund. Exactly one of PaymentIntent and
// Charge is set.
type RefundArgs struct {
	// PaymentIntent is the id ("pi_...") of the PaymentIntent to refund.
	PaymentIntent string `json:"payment_intent,omitempty"`
	// Charge is the id ("ch_..." or "py_...") of the Charge to refund.
	Charge string `json:"charge,omitempty"`
	// Amount is in minor units; 0 (absent) refunds what is left.
	Amount int64 `json:"amount,omitempty"`
	// Reason is "duplicate", "fraudulent" or "requested_by_customer", or empty.
	Reason string `json:"reason,omitempty"`
	// Metadata is at most 49 keys; the key "oncebox_op" is reserved.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// Address is an email address with an optional display name.
type Address struct {
	// Email is a bare address, such as "ada@example.com".
	Email string `json:"email"`
	// Name is an optional display name, such as "Ada Lovelace".
	Name string `json:"name,omitempty"`
}

// MailArgs are the arguments of sendgrid.mail: one message to up to 1000
// recipients, with either a subject and a body (text, html or both) or a template.
type MailArgs struct {
	// From is the sender.
	From Address `json:"from"`
	// To are the recipients, 1 to 1000 distinct addresses.
	To []Address `json:"to"`
	// Subject is at most 998 characters; required unless TemplateID is set.
	Subject string `json:"subject,omitempty"`
	// Text is the plain-text body.
	Text string `json:"text,omitempty"`
	// HTML is the HTML body. Text or HTML is required unless TemplateID is set.
	HTML string `json:"html,omitempty"`
	// TemplateID is a SendGrid template id, such as "d-..." for a dynamic template.
	TemplateID string `json:"template_id,omitempty"`
	// DynamicTemplateData fills the template; only allowed with TemplateID. Numbers
	// are json.Number, so they are sent as written.
	DynamicTemplateData map[string]any `json:"dynamic_template_data,omitempty"`
	// Categories are at most 10 distinct printable-ASCII names of 1 to 255 characters.
	Categories []string `json:"categories,omitempty"`
}

// WebhookArgs are the arguments of webhook.post.
type WebhookArgs struct {
	// Target names a configured webhook target (Config.WebhookTargets); the target,
	// not the agent, decides the scheme and host.
	Target string `json:"target"`
	// Path is the path (and optional query) on the target, starting with "/".
	Path string `json:"path"`
	// Body is the JSON value to post, if any.
	Body json.RawMessage `json:"body,omitempty"`
}
