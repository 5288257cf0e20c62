package vendorevents

import (
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
	"github.com/stripe/stripe-go/v79/webhook"

	"github.com/oncebox/oncebox/vendors/sendgrid"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// errSignature marks a request whose signature is missing or does not verify.
var errSignature = errors.New("signature refused")

// parsed is what one request carried: the events to store, and how many were left out.
type parsed struct {
	events            []Event
	untagged, ignored int
	// invalid holds why each invalid event was left out (checkEvent).
	invalid []string
}

// add keeps ev, or counts it invalid when checkEvent finds it cannot be stored.
func (p *parsed) add(ev Event, now time.Time, future time.Duration) {
	ev.OpTag = NormalizeTag(ev.OpTag)
	if why := checkEvent(ev, now, future); why != "" {
		p.invalid = append(p.invalid, why)
		return
	}
	p.events = append(p.events, ev)
}

// parseStripe verifies a Stripe webhook with stripe-go's webhook.ConstructEvent (the
// endpoint secret, the timestamp within webhook.DefaultTolerance, the event's API
// version stripe-go's), refuses a signature timestamp more than future after now
// (stripe-go only bounds its age), and reads the object it carries. An event whose
// object cannot be read or stored is counted invalid, not refused: Stripe would only
// send it again.
func parseStripe(payload []byte, header, secret string, now time.Time, future time.Duration) (*parsed, error) {
	if err := webhook.ValidatePayload(payload, header, secret); err != nil {
		return nil, fmt.Errorf("%w: %w", errSignature, err)
	}
	if at, ok := stripeTimestamp(header); ok && at.Sub(now) > future {
		return nil, fmt.Errorf("%w: the signature's timestamp is %s in the future, more than the %s tolerated",
			errSignature, at.Sub(now).Round(time.Second), future)
	}
	ev, err := webhook.ConstructEvent(payload, header, secret)
	if err != nil {
		return nil, fmt.Errorf("the event cannot be read: %w", err)
	}
	p := &parsed{}
	obj, objectType, ok, err := stripe.EventObject(&ev)
	switch {
	case err != nil:
		p.invalid = append(p.invalid, "the event's object cannot be read: "+err.Error())
	case !ok:
		p.ignored++
	case obj.OpID == "":
		p.untagged++
	default:
		p.add(Event{Vendor: VendorStripe, EventID: ev.ID, Type: string(ev.Type), OpTag: obj.OpID, Account: ev.Account,
			ObjectType: objectType, ObjectID: obj.ID, Status: obj.Status, Amount: obj.Amount, Currency: obj.Currency,
			ObjectCreated: obj.Created, OccurredAt: time.Unix(ev.Created, 0).UTC(), Summary: obj.Summary}, now, future)
	}
	return p, nil
}

// stripeTimestamp reads the t= of a Stripe-Signature header (verified before).
func stripeTimestamp(header string) (time.Time, bool) {
	for part := range strings.SplitSeq(header, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			return time.Unix(n, 0), err == nil
		}
	}
	return time.Time{}, false
}

// ParseSendGridKey reads SendGrid's Event Webhook verification key (the base64 of a
// DER ECDSA public key, as the dashboard shows it) with sendgrid-go's helper, after
// checking that it is an ECDSA key (the helper panics on any other).
func ParseSendGridKey(b64 string) (*ecdsa.PublicKey, error) {
	der, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New("the SendGrid event public key is not base64")
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errors.New("the SendGrid event public key is not a DER public key")
	}
	if _, ok := k.(*ecdsa.PublicKey); !ok {
		return nil, errors.New("the SendGrid event public key is not an ECDSA key")
	}
	return eventwebhook.ConvertPublicKeyBase64ToECDSA(b64)
}

// sendGridEvent is the part of one Event Webhook event oncebox reads.
type sendGridEvent struct {
	Event       string          `json:"event"`
	SGMessageID string          `json:"sg_message_id"`
	Email       string          `json:"email"`
	Timestamp   json.Number     `json:"timestamp"`
	Tag         json.RawMessage `json:"oncebox_op"`
}

// parseSendGrid verifies an Event Webhook request with sendgrid-go's
// eventwebhook.VerifySignature (ECDSA over timestamp + payload), refuses a timestamp
// further than tolerance from now (in the past or the future), and reads its events.
// An event that cannot be read or stored is counted invalid; the others are kept.
func parseSendGrid(payload []byte, signature, timestamp string, key *ecdsa.PublicKey, tolerance time.Duration, now time.Time) (*parsed, error) {
	if signature == "" || timestamp == "" {
		return nil, fmt.Errorf("%w: the %s and %s headers are required", errSignature,
			eventwebhook.VerificationHTTPHeader, eventwebhook.TimestampHTTPHeader)
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a Unix time", errSignature, eventwebhook.TimestampHTTPHeader)
	}
	if d := now.Sub(time.Unix(ts, 0)).Abs(); d > tolerance {
		return nil, fmt.Errorf("%w: the timestamp is %s away from now, more than the %s tolerated", errSignature, d.Round(time.Second), tolerance)
	}
	ok, err := eventwebhook.VerifySignature(key, payload, signature, timestamp)
	if err != nil || !ok {
		return nil, fmt.Errorf("%w: the ECDSA signature does not verify", errSignature)
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(payload, &raws); err != nil {
		return nil, fmt.Errorf("the body is not a JSON array of events: %w", err)
	}
	p := &parsed{}
	for _, r := range raws {
		var e sendGridEvent
		if err := json.Unmarshal(r, &e); err != nil {
			p.invalid = append(p.invalid, "the event is not a JSON object of SendGrid's fields: "+err.Error())
			continue
		}
		var tag string
		_ = json.Unmarshal(e.Tag, &tag)
		state := deliveryState(e.Event)
		msgID := sendgrid.MessageID(e.SGMessageID)
		switch {
		case state == "" || msgID == "":
			p.ignored++
			continue
		case tag == "":
			p.untagged++
			continue
		}
		at, _ := e.Timestamp.Int64()
		occurred := time.Unix(at, 0).UTC()
		ev := Event{Vendor: VendorSendGrid, EventID: sendGridEventID(e), Type: e.Event, OpTag: tag,
			ObjectType: ObjectMessage, ObjectID: msgID, Status: state, OccurredAt: occurred,
			Summary: sendgrid.AcceptedSummary(msgID)}
		if state == DeliveryProcessed {
			ev.ObjectCreated = occurred
		}
		p.add(ev, now, tolerance)
	}
	return p, nil
}

// sendGridEventID identifies a SendGrid event across redeliveries, which change its
// sg_event_id: a hash of the recipient's message id, the event and its timestamp (and
// the address, which is hashed, never stored).
func sendGridEventID(e sendGridEvent) string {
	h := sha256.New()
	for _, s := range []string{e.SGMessageID, e.Event, e.Timestamp.String(), e.Email} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "sg_" + hex.EncodeToString(h.Sum(nil)[:20])
}
