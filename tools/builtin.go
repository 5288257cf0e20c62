package tools

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// Names of the vendors that dispatch the built-in tools (vendorapi.Tool.Vendor).
const (
	// VendorStripe dispatches PaymentIntent and Refund.
	VendorStripe = "stripe"
	// VendorSendGrid dispatches Mail.
	VendorSendGrid = "sendgrid"
	// VendorWebhook dispatches WebhookPost.
	VendorWebhook = "webhook"
)

// Config configures the built-in tools.
type Config struct {
	// WebhookTargets are the names of the webhook targets webhook.post may post to;
	// any other target is refused. Defaults to none, so every webhook.post is refused.
	WebhookTargets []string
	// RefundApprovalAbove makes a refund whose amount (in minor units) is greater
	// than this wait for a person's approval, and so does a refund without an amount
	// (a full refund) whenever this is not 0. A negative value makes every refund
	// wait. Defaults to 0: refunds never wait.
	RefundApprovalAbove int64
	// TTL overrides, per tool name, how long the tool's ops are kept. Defaults to
	// vendorapi.DefaultTTL for every tool.
	TTL map[string]time.Duration
	// NoMailRedaction turns off the redaction of sendgrid.mail arguments once an op
	// is settled (addresses hashed, names dropped, subject and bodies replaced by
	// markers). Defaults to false: mail arguments are redacted.
	NoMailRedaction bool
	// RedactKey, when set, makes the redaction hashes HMAC-SHA256 under this key
	// ("hmac-sha256:<hex>"), so that a stored address cannot be recovered by hashing
	// guesses. Defaults to plain SHA-256 ("sha256:<hex>").
	RedactKey []byte
}

// Builtin returns the four built-in tools configured by cfg.
func Builtin(cfg Config) []vendorapi.Tool {
	targets := slices.Clone(cfg.WebhookTargets)
	slices.Sort(targets)
	targets = slices.Compact(targets)

	ttl := func(name string) time.Duration {
		if d := cfg.TTL[name]; d > 0 {
			return d
		}
		return vendorapi.DefaultTTL
	}

	mail := vendorapi.Tool{
		Name:     protocol.ToolMail,
		Vendor:   VendorSendGrid,
		Validate: func(args json.RawMessage) error { _, err := DecodeMail(args); return err },
		TTL:      ttl(protocol.ToolMail),
		Identity: Identity(protocol.ToolMail),
	}
	if !cfg.NoMailRedaction {
		mail.Redact = mailRedactor{key: cfg.RedactKey}.redact
	}

	return []vendorapi.Tool{
		{
			Name:     protocol.ToolPaymentIntent,
			Vendor:   VendorStripe,
			Validate: func(args json.RawMessage) error { _, err := DecodePaymentIntent(args); return err },
			Amount:   paymentIntentAmount,
			// A payment's charge (ch_…) is the payment too, for lookups and refunds.
			RefAliases: []string{"latest_charge"},
			TTL:        ttl(protocol.ToolPaymentIntent),
			Identity:   Identity(protocol.ToolPaymentIntent),
		},
		{
			Name:          protocol.ToolRefund,
			Vendor:        VendorStripe,
			Validate:      func(args json.RawMessage) error { _, err := DecodeRefund(args); return err },
			NeedsApproval: refundNeedsApproval(cfg.RefundApprovalAbove),
			Amount:        refundAmount,
			RefundOf:      "payment_intent",
			TTL:           ttl(protocol.ToolRefund),
			Identity:      Identity(protocol.ToolRefund),
			// A refund acts on a payment that must be the tenant's (the server sets
			// each Tag to ask Stripe, vendors/stripe's PaymentIntentTag and ChargeTag).
			Objects: []vendorapi.ObjectArg{{Arg: "payment_intent"}, {Arg: "charge"}},
		},
		mail,
		{
			Name:     protocol.ToolWebhookPost,
			Vendor:   VendorWebhook,
			Validate: func(args json.RawMessage) error { return validateWebhook(args, targets) },
			TTL:      ttl(protocol.ToolWebhookPost),
		},
	}
}

// Identity returns the identity fields of a built-in tool (vendorapi.Tool.Identity): the
// arguments that say which operation a call asks for, leaving out the free text a
// re-prompted model rewords. nil for webhook.post and any other name: every argument
// identifies the op.
//
//   - stripe.payment_intent: amount, currency, customer and payment_method, who pays
//     what. description and metadata are wording and bookkeeping; confirm is not part
//     of it either, so that a re-run adding confirm: true to a payment already asked
//     for is told it stands instead of making a second PaymentIntent.
//   - stripe.refund: payment_intent, charge and amount, what is refunded and how much
//     (no amount: the rest). reason and metadata are wording and bookkeeping.
//   - sendgrid.mail: from, to, subject, template_id and dynamic_template_data: who
//     writes to whom about what. The subject is how a reader tells two mails apart (and
//     how mail clients thread them); a template mail is its template and its data (an
//     order number). text and html are the wording a re-prompted model changes;
//     categories are labels.
//   - webhook.post: none. The body is in the target's own format, so oncebox cannot
//     tell its wording from its meaning; a catalog tool for the target can declare
//     identity fields.
func Identity(tool string) []string {
	switch tool {
	case protocol.ToolPaymentIntent:
		return []string{"amount", "currency", "customer", "payment_method"}
	case protocol.ToolRefund:
		return []string{"payment_intent", "charge", "amount"}
	case protocol.ToolMail:
		return []string{"from", "to", "subject", "template_id", "dynamic_template_data"}
	}
	return nil
}

// paymentIntentAmount is the Amount of stripe.payment_intent.
func paymentIntentAmount(args json.RawMessage) (int64, string, bool) {
	p, err := DecodePaymentIntent(args)
	if err != nil {
		return 0, "", false
	}
	return p.Amount, p.Currency, true
}

// refundAmount is the Amount of stripe.refund: its amount without a currency (the
// arguments do not say it), or none for a full refund.
func refundAmount(args json.RawMessage) (int64, string, bool) {
	r, err := DecodeRefund(args)
	if err != nil || r.Amount == 0 {
		return 0, "", false
	}
	return r.Amount, "", true
}

// refundNeedsApproval returns the NeedsApproval of stripe.refund for a threshold.
func refundNeedsApproval(above int64) func(json.RawMessage) bool {
	if above == 0 {
		return nil
	}
	return func(args json.RawMessage) bool {
		r, err := DecodeRefund(args)
		if err != nil {
			return true // Validate refuses it anyway; never let a doubt skip approval.
		}
		return r.Amount == 0 || r.Amount > above
	}
}

// validateWebhook is webhook.post's Validate: the shape, then the allow-list.
func validateWebhook(args json.RawMessage, targets []string) error {
	w, err := DecodeWebhook(args)
	if err != nil {
		return err
	}
	if _, found := slices.BinarySearch(targets, w.Target); !found {
		if len(targets) == 0 {
			return invalid("args.target", "is not an allowed webhook target; no webhook targets are configured")
		}
		return invalid("args.target", "is not an allowed webhook target; allowed: "+strings.Join(targets, ", "))
	}
	return nil
}
