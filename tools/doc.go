// Package tools defines oncebox's four built-in tools: stripe.payment_intent,
// stripe.refund, sendgrid.mail and webhook.post.
//
// Builtin returns them as vendorapi.Tool values ready for outbox.NewRegistry. Each
// tool's Validate runs before anything is stored and refuses, with an
// *vendorapi.ValidationError naming the field (such as "args.amount" or
// "args.to[2].email"), what the vendor would refuse: a fractional amount, an
// upper-case currency, too many metadata keys, a display name inside an email
// address, a webhook path that climbs out of its target. Arguments must be a JSON
// object; unknown fields are refused, so a typo never passes silently, and so
// are keys given twice. A field set to null counts as absent.
//
// The vendor adapters decode the stored arguments with the same functions
// (DecodePaymentIntent, DecodeRefund, DecodeMail, DecodeWebhook), so what was
// validated is exactly what is sent.
//
// sendgrid.mail arguments hold personal data. Unless Config.NoMailRedaction is set,
// the mail tool's Redact replaces addresses with "sha256:<hex>" of the lower-cased
// address ("hmac-sha256:<hex>" under Config.RedactKey), drops names, and replaces
// subject, text, html and dynamic_template_data with {"redacted":"sha256:<hex>",
// "bytes":N} markers. Redacting arguments already redacted changes nothing.
package tools
