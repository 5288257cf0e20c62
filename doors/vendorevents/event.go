package vendorevents

import (
	"encoding/json"
	"time"
)

// The vendors whose events a Handler accepts, as outbox vendor names.
const (
	VendorStripe   = "stripe"
	VendorSendGrid = "sendgrid"
)

// ObjectMessage is the object type of SendGrid events: one message, by X-Message-Id.
const ObjectMessage = "message"

// Event is what one vendor event says about one vendor object, as stored. The payload
// itself is never stored: it may hold a client secret or an address.
type Event struct {
	// Vendor is VendorStripe or VendorSendGrid.
	Vendor string `json:"vendor"`
	// EventID deduplicates redeliveries of the event: Stripe's evt_ id; for SendGrid a
	// hash of sg_message_id, event, timestamp and recipient (sg_event_id changes between
	// redeliveries).
	EventID string `json:"event_id"`
	// Type is the vendor's event type (payment_intent.succeeded, refund.failed,
	// processed, delivered, bounce, …).
	Type string `json:"type"`
	// OpTag is the event's oncebox_op tag: the id of the op the object belongs to.
	OpTag string `json:"op_tag"`
	// Account is where the event came from: the Stripe Connect account (its
	// "account"), "" for the platform's own endpoint, TenantAccount(id) for a tenant's
	// own endpoint (a tenant on its own Stripe key): the event counts for its op only
	// when the op was sent that way (outbox.Op.VendorAccount).
	Account string `json:"account,omitempty"`
	// ObjectType is "payment_intent", "refund" or "message".
	ObjectType string `json:"object_type"`
	// ObjectID is the vendor object's id (pi_…, re_…, an X-Message-Id).
	ObjectID string `json:"object_id"`
	// Status is the object's status the event reports (a mail's delivery state).
	Status   string `json:"status"`
	Amount   int64  `json:"amount,omitempty"`
	Currency string `json:"currency,omitempty"`
	// ObjectCreated is when the vendor created the object, when the event says.
	ObjectCreated time.Time `json:"object_created,omitzero"`
	// OccurredAt is when the vendor says the event happened.
	OccurredAt time.Time `json:"occurred_at"`
	// Summary is the object as Lookup would report it (no secret), for adoption.
	Summary json.RawMessage `json:"summary,omitempty"`

	// ReceivedAt and Orphan are set by the Store: when the event arrived, and whether
	// its tag named no op then.
	ReceivedAt time.Time `json:"received_at"`
	Orphan     bool      `json:"orphan"`
	// Unconfirmed is set by the Store's reads: the op's vendor_ref is not known yet, so
	// nothing proves the event's object is the op's (anyone sending through the same
	// vendor account can tag an object with any op id). An unconfirmed event is shown,
	// never taken as the op's outcome: Lookup asks the vendor instead.
	Unconfirmed bool `json:"unconfirmed,omitempty"`
}

// The mail delivery states, from SendGrid's event types, most final last.
const (
	DeliveryProcessed = "processed"
	DeliveryDeferred  = "deferred"
	DeliveryDelivered = "delivered"
	DeliveryBounced   = "bounced"
	DeliveryDropped   = "dropped"
)

// deliveryState maps a SendGrid event type to the delivery state it proves, "" for an
// event oncebox does not use.
func deliveryState(event string) string {
	switch event {
	case "processed":
		return DeliveryProcessed
	case "deferred":
		return DeliveryDeferred
	case "delivered", "open", "click", "spamreport", "unsubscribe", "group_unsubscribe", "group_resubscribe":
		// Engagement proves delivery.
		return DeliveryDelivered
	case "bounce", "blocked":
		return DeliveryBounced
	case "dropped":
		return DeliveryDropped
	}
	return ""
}

// statusRank orders the statuses of one object so that the most final one wins when
// events arrive out of order (equal ranks: the later event wins).
func statusRank(objectType, status string) int {
	switch objectType {
	case ObjectMessage:
		switch status {
		case DeliveryProcessed:
			return 1
		case DeliveryDeferred:
			return 2
		case DeliveryDelivered, DeliveryBounced, DeliveryDropped:
			return 3
		}
	case "payment_intent":
		switch status {
		case "requires_payment_method", "requires_confirmation":
			return 1
		case "requires_action", "processing", "requires_capture":
			return 2
		case "succeeded", "canceled":
			return 3
		}
	case "refund":
		switch status {
		case "pending", "requires_action":
			return 1
		case "succeeded":
			return 2
		case "failed", "canceled":
			return 3
		}
	}
	return 0
}
