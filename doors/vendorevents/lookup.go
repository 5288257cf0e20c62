package vendorevents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
	"github.com/oncebox/oncebox/vendors/stripe"
)

// WrapVendor returns v with the Store's events as the first lookup source: Lookup
// answers from the events tagged with the op, from the way it was sent, and naming the
// object it is known to have made (its vendor_ref) when they settle what the vendor holds,
// without asking the vendor (no search lag, no Email Activity add-on, no rate limit),
// and asks v otherwise. When v cannot be asked (ErrLookupUnavailable, such as SendGrid's
// 403 without the Activity add-on), an op sent less than lag ago is checked again later
// (a plain error) instead of going to needs_review, since its events may still be on
// their way; past lag, the absence of events is not taken as proof that nothing was
// sent, and v's error stands. Everything else is v's.
func WrapVendor(v vendorapi.Vendor, s *Store, lag time.Duration) vendorapi.Vendor {
	return &eventVendor{Vendor: v, store: s, lag: lag, now: time.Now}
}

type eventVendor struct {
	vendorapi.Vendor
	store *Store
	lag   time.Duration
	now   func() time.Time
}

// Lookup consults the stored events, then the vendor.
func (e *eventVendor) Lookup(ctx context.Context, params vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	evs, err := e.store.ForOp(ctx, e.Name(), params.OpID)
	if err != nil {
		return nil, fmt.Errorf("%s lookup: stored events: %w", e.Name(), err)
	}
	// Only the events of the object the op is known to have made settle it: before its
	// vendor_ref is known, a tagged event proves nothing (anyone sending through the
	// same vendor account can tag an object with this op's id), and the vendor is
	// asked, with the op's own credentials.
	evs = slices.DeleteFunc(evs, func(ev Event) bool { return ev.Unconfirmed })
	if objs, ok := Objects(evs, params.Tool, params.Args); ok {
		return &vendorapi.LookupResult{Objects: objs}, nil
	}
	res, err := e.Vendor.Lookup(ctx, params)
	if err != nil && errors.Is(err, vendorapi.ErrLookupUnavailable) {
		if params.LastSent.IsZero() || e.now().Before(params.LastSent.Add(e.lag)) {
			// Not wrapping ErrLookupUnavailable: the reconciler asks again later.
			return nil, fmt.Errorf("no %s event for op %s yet, and the vendor cannot be asked (%v); the events may still arrive (up to %s after the last send)",
				e.Name(), params.OpID, err, e.lag)
		}
		return nil, fmt.Errorf("no %s event for op %s within %s of its last send: %w", e.Name(), params.OpID, e.lag, err)
	}
	return res, err
}

// Objects turns an op's events into the vendor objects they prove, one per object id
// and of the type the tool creates, each with its most final status (events may
// arrive out of order). ok is false when the events settle nothing: none, or only a
// payment_intent.created for a payment intent created with confirm, whose outcome the
// later events tell.
func Objects(evs []Event, tool string, args json.RawMessage) (objs []vendorapi.VendorObject, ok bool) {
	want := ""
	switch tool {
	case protocol.ToolPaymentIntent:
		want = "payment_intent"
	case protocol.ToolRefund:
		want = "refund"
	case protocol.ToolMail:
		want = ObjectMessage
	default:
		return nil, false
	}
	var confirm struct {
		Confirm bool `json:"confirm"`
	}
	_ = json.Unmarshal(args, &confirm)
	best := map[string]Event{}
	created := map[string]time.Time{}
	settled := map[string]bool{}
	var order []string
	for _, ev := range evs {
		if ev.ObjectType != want {
			continue
		}
		cur, seen := best[ev.ObjectID]
		if !seen {
			order = append(order, ev.ObjectID)
		}
		if !seen || statusRank(want, ev.Status) >= statusRank(want, cur.Status) {
			best[ev.ObjectID] = ev
		}
		t := ev.ObjectCreated
		if t.IsZero() {
			t = ev.OccurredAt
		}
		if c, has := created[ev.ObjectID]; !has || t.Before(c) {
			created[ev.ObjectID] = t
		}
		if want != "payment_intent" || !confirm.Confirm || ev.Type != "payment_intent.created" {
			settled[ev.ObjectID] = true
		}
	}
	for _, id := range order {
		ev := best[id]
		if settled[id] {
			ok = true
		}
		obj := vendorapi.VendorObject{ID: id, OpID: ev.OpTag, Amount: ev.Amount, Currency: ev.Currency,
			Status: ev.Status, Created: created[id], Summary: ev.Summary}
		// What records a refusal is the Stripe adapter's knowledge (a mail has none).
		obj.Refused = want != ObjectMessage && stripe.Refused(obj, args)
		objs = append(objs, obj)
	}
	slices.SortFunc(objs, func(a, b vendorapi.VendorObject) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return objs, ok
}
