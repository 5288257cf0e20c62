// Package vendorevents receives, verifies and stores vendor events (Stripe webhooks,
// SendGrid's Event Webhook) and offers them as a lookup source that needs no search,
// no activity add-on and waits out no lag.
//
// Handler serves POST /v1/vendor-events/stripe and POST /v1/vendor-events/sendgrid:
// each request is verified with the vendor SDK's own helper (stripe-go's
// webhook.ConstructEvent, sendgrid-go's eventwebhook ECDSA check), stored once per
// event id by a Store, and answered at once; linked ops are then handed to a callback
// (the reconciler checks them soon). A Store keeps what each event says about one
// vendor object (type, id, status, amount), never the payload, for Config.Retention.
//
// WrapVendor puts the stored events in front of a vendor's own Lookup: the reconciler
// finds an op's objects in the events first and asks the vendor only when none has
// arrived. Store.OpStates and Store.OrphanCounts feed the finance report.
package vendorevents
