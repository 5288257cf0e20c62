package stripe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v79"

	"github.com/oncebox/oncebox/internal/tracing"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/tools"
	"github.com/oncebox/oncebox/vendorapi"
)

// listPageSize is the page size of every list and search (Stripe's maximum).
const listPageSize = 100

// LookupLag is how long after creation a Lookup may still miss an object.
// With the list scan on, lists are not lagged, so it is a small margin for
// Stripe's replication and its whole-second created times; with
// DisableListScan, search is the only source and it is Config.SearchLag.
// Refunds are always found through an unlagged list.
func (v *Vendor) LookupLag() time.Duration {
	if v.cfg.DisableListScan {
		return v.cfg.SearchLag
	}
	return defaultLookupLag
}

// Lookup finds every object tagged metadata[oncebox_op] = params.OpID, with
// its status as Stripe reports it. A declined payment intent is among them, in
// status requires_payment_method (Stripe keeps it after the decline): the
// reconciler, not this adapter, decides what such an object means.
//
// Payment intents are found through search (metadata["oncebox_op"]:"<id>")
// and, unless Config.DisableListScan, through a list scan of the payment
// intents created since params.Since minus Config.ListScanMargin (all of
// them when Since is zero), matching the tag here, since lists cannot filter
// on metadata; the two are merged by id. When search is refused (not offered in the account's region) the list
// scan alone answers; with the list scan off that is ErrLookupUnavailable.
//
// Refunds cannot be searched: Lookup lists the refunds of the args'
// payment_intent or charge and matches the tag.
func (v *Vendor) Lookup(ctx context.Context, params vendorapi.LookupParams) (*vendorapi.LookupResult, error) {
	var (
		objs []vendorapi.VendorObject
		err  error
	)
	switch params.Tool {
	case protocol.ToolPaymentIntent:
		objs, err = v.lookupPaymentIntents(ctx, params)
	case protocol.ToolRefund:
		objs, err = v.lookupRefunds(ctx, params)
	default:
		return nil, fmt.Errorf("stripe: lookup of tool %q: the stripe vendor does not dispatch it", params.Tool)
	}
	if err != nil {
		return nil, err
	}
	for i := range objs {
		objs[i].Refused = objs[i].Refused || Refused(objs[i], params.Args)
	}
	slices.SortFunc(objs, func(a, b vendorapi.VendorObject) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	v.logger.Debug("stripe lookup", append(tracing.SpanLogAttrs(ctx), slog.String("op_id", params.OpID), slog.String("tool", params.Tool),
		slog.String("vendor_account", params.Account.Ref), slog.Int("found", len(objs)))...)
	return &vendorapi.LookupResult{Objects: objs}, nil
}

func (v *Vendor) lookupPaymentIntents(ctx context.Context, p vendorapi.LookupParams) ([]vendorapi.VendorObject, error) {
	found := map[string]vendorapi.VendorObject{}
	c := v.conn(p.Account)

	searchErr := v.searchPaymentIntents(ctx, c, p.OpID, found)
	if searchErr != nil {
		if !errors.Is(searchErr, vendorapi.ErrLookupUnavailable) || v.cfg.DisableListScan {
			return nil, searchErr
		}
		v.logger.Warn("stripe search unavailable; relying on the list scan", append(tracing.SpanLogAttrs(ctx), slog.String("op_id", p.OpID),
			slog.String("error", searchErr.Error()))...)
	}

	if !v.cfg.DisableListScan {
		lp := &stripego.PaymentIntentListParams{}
		lp.Context = ctx
		lp.Limit = stripego.Int64(listPageSize)
		if !p.Since.IsZero() {
			lp.CreatedRange = &stripego.RangeQueryParams{GreaterThanOrEqual: p.Since.Add(-v.cfg.ListScanMargin).Unix()}
		}
		c.on(lp)
		it := c.api.PaymentIntents.List(lp)
		for it.Next() {
			if pi := it.PaymentIntent(); pi.Metadata[vendorapi.TagKey] == p.OpID {
				found[pi.ID] = paymentIntentObject(pi)
			}
		}
		if err := it.Err(); err != nil {
			return nil, c.lookupError("list payment intents", err)
		}
	}
	return mapValues(found), nil
}

// searchPaymentIntents adds the payment intents search finds for opID.
func (v *Vendor) searchPaymentIntents(ctx context.Context, c conn, opID string, found map[string]vendorapi.VendorObject) error {
	sp := &stripego.PaymentIntentSearchParams{}
	sp.Context = ctx
	sp.Query = fmt.Sprintf(`metadata[%q]:%q`, vendorapi.TagKey, opID)
	sp.Limit = stripego.Int64(listPageSize)
	c.on(sp)
	it := c.api.PaymentIntents.Search(sp)
	for it.Next() {
		// Search matched the tag; check anyway, as a list scan would.
		if pi := it.PaymentIntent(); pi.Metadata[vendorapi.TagKey] == opID {
			found[pi.ID] = paymentIntentObject(pi)
		}
	}
	if err := it.Err(); err != nil {
		var se *stripego.Error
		if errors.As(err, &se) && (se.HTTPStatusCode == http.StatusNotFound || se.HTTPStatusCode == http.StatusBadRequest) {
			return fmt.Errorf("stripe: search payment intents: %w (%s)", vendorapi.ErrLookupUnavailable, (&safeError{err: err, c: c}).Error())
		}
		return c.lookupError("search payment intents", err)
	}
	return nil
}

func (v *Vendor) lookupRefunds(ctx context.Context, p vendorapi.LookupParams) ([]vendorapi.VendorObject, error) {
	a, err := tools.DecodeRefund(p.Args)
	if err != nil {
		return nil, fmt.Errorf("stripe: lookup refund of op %s: args: %w", p.OpID, err)
	}
	lp := &stripego.RefundListParams{}
	lp.Context = ctx
	lp.Limit = stripego.Int64(listPageSize)
	if a.PaymentIntent != "" {
		lp.PaymentIntent = stripego.String(a.PaymentIntent)
	} else {
		lp.Charge = stripego.String(a.Charge)
	}
	var objs []vendorapi.VendorObject
	c := v.conn(p.Account)
	c.on(lp)
	it := c.api.Refunds.List(lp)
	for it.Next() {
		if re := it.Refund(); re.Metadata[vendorapi.TagKey] == p.OpID {
			objs = append(objs, refundObject(re))
		}
	}
	if err := it.Err(); err != nil {
		return nil, c.lookupError("list refunds", err)
	}
	return objs, nil
}

// ListObjects returns every PaymentIntent and Refund created in [since,
// until), for the finance report, through the unlagged list endpoints. Stripe
// stamps objects in whole seconds, so the bounds are truncated to seconds:
// consecutive windows never overlap nor leave a gap. OpID is "" for an object
// oncebox did not tag. It lists the account ctx carries (vendorapi.WithAccount): the
// installation's by default.
func (v *Vendor) ListObjects(ctx context.Context, since, until time.Time) ([]vendorapi.VendorObject, error) {
	if !until.After(since) {
		return nil, nil
	}
	created := &stripego.RangeQueryParams{GreaterThanOrEqual: since.Unix(), LesserThan: until.Unix()}
	var objs []vendorapi.VendorObject
	c := v.connFrom(ctx)

	pp := &stripego.PaymentIntentListParams{CreatedRange: created}
	pp.Context = ctx
	pp.Limit = stripego.Int64(listPageSize)
	c.on(pp)
	pit := c.api.PaymentIntents.List(pp)
	for pit.Next() {
		objs = append(objs, paymentIntentObject(pit.PaymentIntent()))
	}
	if err := pit.Err(); err != nil {
		return nil, c.lookupError("list payment intents", err)
	}

	rp := &stripego.RefundListParams{CreatedRange: created}
	rp.Context = ctx
	rp.Limit = stripego.Int64(listPageSize)
	c.on(rp)
	rit := c.api.Refunds.List(rp)
	for rit.Next() {
		objs = append(objs, refundObject(rit.Refund()))
	}
	if err := rit.Err(); err != nil {
		return nil, c.lookupError("list refunds", err)
	}
	slices.SortFunc(objs, func(a, b vendorapi.VendorObject) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return objs, nil
}

// lookupError wraps a failed read. A 401 or 403 means the key may not read
// these objects: the vendor cannot be asked, ErrLookupUnavailable.
func (c conn) lookupError(what string, err error) error {
	var se *stripego.Error
	if errors.As(err, &se) && (se.HTTPStatusCode == http.StatusUnauthorized || se.HTTPStatusCode == http.StatusForbidden) {
		return fmt.Errorf("stripe: %s: %w (%s)", what, vendorapi.ErrLookupUnavailable, (&safeError{err: err, c: c}).Error())
	}
	return fmt.Errorf("stripe: %s: %w", what, &safeError{err: err, c: c})
}

// safeText is a short description of a stripe-go error without its body.
func safeText(err error) string {
	var se *stripego.Error
	if errors.As(err, &se) {
		return (&apiError{se: se}).Error()
	}
	return err.Error()
}

// safeError prints a stripe-go error without an embedded object's secrets or
// the API keys, and unwraps to it.
type safeError struct {
	err error
	c   conn
}

func (e *safeError) Error() string { return e.c.hide(safeText(e.err)) }

func (e *safeError) Unwrap() error { return e.err }

func mapValues(m map[string]vendorapi.VendorObject) []vendorapi.VendorObject {
	out := make([]vendorapi.VendorObject, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	return out
}
