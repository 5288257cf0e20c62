package finance

import (
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncebox/oncebox/internal/money"
	"github.com/oncebox/oncebox/outbox"
	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// ReportMargin widens the vendor side of a report's window on both ends, so that an op
// created just before the window ends finds its object created just after. An op of the
// window that was sent later (it awaited approval, or was retried) widens its vendor's
// side further, to the end of its last attempt plus ReportMargin.
const ReportMargin = 5 * time.Minute

// The categories of a report line.
const (
	// CategoryMatched: the op succeeded and the vendor holds exactly one object for it,
	// with the op's amount and currency.
	CategoryMatched = "matched"
	// CategoryMissingAtVendor: the op succeeded but the vendor holds nothing for it.
	CategoryMissingAtVendor = "missing_at_vendor"
	// CategoryOrphanAtVendor: the vendor holds an object tagged with an op that did not
	// succeed, or with an id that names no op. A failed op whose objects all record the
	// vendor's refusal (a declined PaymentIntent) is consistent, not an orphan.
	CategoryOrphanAtVendor = "orphan_at_vendor"
	// CategoryDuplicate: the vendor holds two or more objects for one op.
	CategoryDuplicate = "duplicate"
	// CategoryMismatch: the vendor's amount or currency differs from the op's.
	CategoryMismatch = "mismatch"
	// CategoryRefundFailed: the refund op succeeded, but the vendor later reported the
	// refund failed (a refund.failed event): the money did not go back.
	CategoryRefundFailed = "refund_failed"
	// CategoryUnchecked: the op's vendor has no Lister, or its account could not be
	// listed (Report.Unavailable), so the report could not compare it with anything.
	// It makes the report not clean.
	CategoryUnchecked = "unchecked"
)

// Lister lists a vendor's objects created in [since, until), tagged or not (an object
// without a tag has an empty OpID). Vendor adapters that can list implement it.
type Lister interface {
	ListObjects(ctx context.Context, since, until time.Time) ([]vendorapi.VendorObject, error)
}

// ListerFunc adapts a function to Lister.
type ListerFunc func(ctx context.Context, since, until time.Time) ([]vendorapi.VendorObject, error)

// ListObjects calls f.
func (f ListerFunc) ListObjects(ctx context.Context, since, until time.Time) ([]vendorapi.VendorObject, error) {
	return f(ctx, since, until)
}

// EventSource tells a report what stored vendor events say about ops
// (vendorevents.Store implements it).
type EventSource interface {
	// OpStates returns, per op id among opIDs that has events, what they say.
	OpStates(ctx context.Context, opIDs []string) (map[string]EventState, error)
	// OrphanCounts counts, per vendor, the events received in [since, until) whose tag
	// names no op.
	OrphanCounts(ctx context.Context, since, until time.Time) (map[string]int, error)
}

// EventState is what an op's vendor events say about it.
type EventState struct {
	// Delivery is a mail's most final delivery state: processed, deferred, delivered,
	// bounced or dropped; empty without events.
	Delivery string
	// FailedRefunds are the refunds a refund.failed event reported failed after they
	// were created.
	FailedRefunds []string
}

// ReportParams selects what a report compares.
type ReportParams struct {
	// Since and Until bound the ops' creation time: [Since, Until). Required.
	Since, Until time.Time
	// TenantID limits the report to one tenant; 0 reports on every tenant.
	TenantID int64
	// Listers lists each vendor's objects, by vendor name. Ops of a vendor without a
	// Lister are not checked: each gets an unchecked line (and is counted in
	// Report.Unchecked), which makes the report not clean, unless the vendor is in
	// Unlistable.
	Listers map[string]Lister
	// Unlistable names the vendors that offer no way to list their objects, such as
	// "webhook": their ops are only counted, in Report.Unlistable, and leave the
	// report clean.
	Unlistable []string
	// Events, when set, adds what vendor events say: each mail line's delivery state,
	// a refund_failed line for a refund the vendor failed after creating it, and the
	// count of orphan events (Report.OrphanEvents).
	Events EventSource
	// Payments, when set, finds the payment a refund op gives money back from
	// (outbox.Outbox.PaymentOf): a refund's arguments name no currency, so its line
	// takes its payment's. Without it, or for a payment made outside oncebox, a refund
	// line's op currency is empty.
	Payments func(ctx context.Context, tenantID int64, tool string, args json.RawMessage) (*outbox.Payment, error)
	// Accounts, when set, opens the vendor account an op of the tenant recorded
	// (vendoraccount.Settings.Account): each vendor is then listed on every account the
	// window's ops were accepted under (a Lister reads the account from its context,
	// vendorapi.AccountFrom), and on the installation's when the report is on every tenant
	// or an op used it. Without it, each vendor is listed once, on the installation's.
	Accounts func(ctx context.Context, tenantID int64, vendor, ref string) (vendorapi.Account, error)
}

// Line is one finding of a report.
type Line struct {
	// Category is one of the Category constants.
	Category string `json:"category"`
	// OpID is the op's id, or for an orphan whose tag names no op, the tag.
	OpID     string `json:"op_id"`
	Key      string `json:"idempotency_key,omitempty"`
	Tool     string `json:"tool,omitempty"`
	Vendor   string `json:"vendor"`
	TenantID int64  `json:"tenant_id,omitempty"`
	// OpStatus is the op's status, empty when the tag names no op.
	OpStatus string `json:"op_status,omitempty"`
	// VendorIDs are the ids of the vendor's objects for the op, sorted.
	VendorIDs []string `json:"vendor_ids"`
	// OpAmount and OpCurrency come from the op's args ("amount", "currency"); zero
	// when the tool has none. A refund with an amount takes its payment's currency
	// (ReportParams.Payments).
	OpAmount   int64  `json:"op_amount"`
	OpCurrency string `json:"op_currency,omitempty"`
	// FullRefund is set for a refund whose args name no amount: it gives back what was
	// left of its payment, so OpAmount is zero and OpCurrency is the payment's. The
	// payment's own amount is PaymentAmount, when an op of the tenant made the payment
	// (zero otherwise).
	FullRefund    bool  `json:"full_refund,omitempty"`
	PaymentAmount int64 `json:"payment_amount,omitempty"`
	// VendorAmount and VendorCurrency come from the vendor's object (the sum of the
	// objects' amounts for a duplicate).
	VendorAmount   int64  `json:"vendor_amount"`
	VendorCurrency string `json:"vendor_currency,omitempty"`
	// Currency is the line's: the op's, or else the vendor's object's; empty for a
	// line without money (a mail).
	Currency string `json:"currency,omitempty"`
	// Detail is a human sentence.
	Detail string `json:"detail,omitempty"`
	// Delivery is a mail's delivery state from the vendor's events (delivered,
	// bounced, dropped, deferred, processed); empty when no event arrived or events
	// are not configured.
	Delivery string `json:"delivery,omitempty"`
}

// Total is the count and amount of the matched ops of one tool in one currency.
type Total struct {
	Tool     string `json:"tool"`
	Currency string `json:"currency"`
	Count    int    `json:"count"`
	Amount   int64  `json:"amount"`
}

// Net is what the matched payments and refunds of one currency moved.
type Net struct {
	Currency string `json:"currency"`
	// Paid sums the matched payments (stripe.payment_intent), Refunded the matched
	// refunds (stripe.refund), in minor units; Net is Paid minus Refunded.
	Paid     int64 `json:"paid"`
	Refunded int64 `json:"refunded"`
	Net      int64 `json:"net"`
}

// Report compares the ops of a window with the vendors' objects.
type Report struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Lines are every finding, matched ones included, sorted by category, tenant, key,
	// op id and vendor ids.
	Lines []Line `json:"lines"`
	// Totals are the matched ops per tool and currency, sorted.
	Totals []Total `json:"totals"`
	// Nets are the matched refunds netted against the matched payments, per currency,
	// sorted.
	Nets []Net `json:"nets"`
	// Problems counts the lines that are not matched, unchecked ones included.
	Problems int `json:"problems"`
	// Untagged counts, per vendor, the objects of the window that carry no op tag: made
	// outside oncebox, so ignored.
	Untagged map[string]int `json:"untagged,omitempty"`
	// Unchecked counts, per vendor, the ops of the window whose vendor has no Lister
	// or whose account could not be listed (Unavailable); each also has an unchecked
	// line.
	Unchecked map[string]int `json:"unchecked,omitempty"`
	// Unavailable are the vendor accounts that could not be listed (the vendor refused
	// the account, or could not be reached): the ops of the window on each are
	// unchecked lines whose Detail is the account's Reason. The rest of the report
	// stands.
	Unavailable []Unavailable `json:"unavailable,omitempty"`
	// Unlistable counts, per vendor named in ReportParams.Unlistable, the ops of the
	// window that could not be compared with anything.
	Unlistable map[string]int `json:"unlistable,omitempty"`
	// OrphanEvents counts, per vendor, the vendor events received in the window whose
	// oncebox_op tag names no op (kept, not matched to anything).
	OrphanEvents map[string]int `json:"orphan_events,omitempty"`
}

// Clean reports whether the report found no problem: every line matched. An op left
// unchecked for want of a Lister has an unchecked line, so it is a problem too.
func (r *Report) Clean() bool { return r.Problems == 0 }

type reportOp struct {
	id, key, tool, vendor, status, vendorRef string
	tenantID                                 int64
	args                                     json.RawMessage
	// payCurrency is the currency of the payment a refund gives money back from, when
	// its args name none (ReportParams.Payments); payAmount is that payment's amount,
	// read for a full refund (one whose args name no amount: fullRefund).
	payCurrency string
	payAmount   int64
	fullRefund  bool
	// lastSent is the latest moment the vendor may have created an object for the
	// op (see sqlReportOps); nil when the op had no attempt.
	lastSent *time.Time
	// account is the vendor account the op was accepted under (outbox.Op.VendorAccount).
	account string
}

type taggedObject struct {
	vendorapi.VendorObject
	vendor string
}

// BuildReport compares the ops created in [Since, Until) with the objects the vendors
// hold for the same window widened by ReportMargin on both sides, and further up to the
// last attempt of a succeeded or failed op of the window that was sent after it.
//
// Each op is reported in the window of its creation. An object whose op was created
// outside the window is skipped unless it was itself created inside the window and its
// op did not succeed (then it is an orphan), nor failed with the object recording the
// vendor's refusal. An object whose tag names no op is an orphan
// when it was created inside the window, and is reported only when TenantID is 0; with
// TenantID set, orphans are reported only for ops of that tenant.
func BuildReport(ctx context.Context, pool *pgxpool.Pool, params ReportParams) (*Report, error) {
	if params.Since.IsZero() || !params.Until.After(params.Since) {
		return nil, errors.New("finance: report: set Since and an Until after it")
	}
	rep := &Report{Since: params.Since, Until: params.Until, Lines: []Line{}, Totals: []Total{}, Nets: []Net{},
		Untagged: map[string]int{}, Unchecked: map[string]int{}, Unlistable: map[string]int{}}
	ops, err := readReportOps(ctx, pool, params)
	if err != nil {
		return nil, err
	}
	if err := addPaymentCurrencies(ctx, params, ops); err != nil {
		return nil, err
	}
	byOp, failed, err := listObjects(ctx, params, ops, rep)
	if err != nil {
		return nil, err
	}
	addOpLines(params, ops, byOp, failed, rep)
	if params.Events != nil {
		if err := addEvents(ctx, params, rep); err != nil {
			return nil, err
		}
	}
	// What is left are objects whose op is not in the window.
	if err := orphanLines(ctx, pool, params, byOp, rep); err != nil {
		return nil, err
	}
	slices.SortStableFunc(rep.Lines, func(a, b Line) int {
		return cmp.Or(cmp.Compare(a.Category, b.Category), cmp.Compare(a.TenantID, b.TenantID),
			cmp.Compare(a.Key, b.Key), cmp.Compare(a.OpID, b.OpID),
			slices.Compare(a.VendorIDs, b.VendorIDs))
	})
	addTotals(rep)
	return rep, nil
}

// readReportOps reads the ops created in the window.
func readReportOps(ctx context.Context, pool *pgxpool.Pool, params ReportParams) ([]reportOp, error) {
	rows, err := pool.Query(ctx, sqlReportOps, params.Since, params.Until, params.TenantID)
	if err != nil {
		return nil, fmt.Errorf("finance: report: read ops: %w", err)
	}
	ops, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (reportOp, error) {
		var o reportOp
		err := row.Scan(&o.id, &o.tenantID, &o.key, &o.tool, &o.vendor, &o.status, &o.args, &o.vendorRef, &o.lastSent, &o.account)
		return o, err
	})
	if err != nil {
		return nil, fmt.Errorf("finance: report: read ops: %w", err)
	}
	return ops, nil
}

// addPaymentCurrencies sets the currency of each refund op whose args name none: its
// payment's, when oncebox made that payment. A refund whose args name no amount is a
// full refund: it also gets its payment's amount. Ops of other tools are left as they
// are (Payments answers nil for them, without reading anything).
func addPaymentCurrencies(ctx context.Context, params ReportParams, ops []reportOp) error {
	if params.Payments == nil {
		return nil
	}
	for i := range ops {
		op := &ops[i]
		_, hasAmount := argInt(op.args, "amount")
		if _, cur := amountOf(op.args); hasAmount && cur != "" {
			continue
		}
		p, err := params.Payments(ctx, op.tenantID, op.tool, op.args)
		if err != nil {
			return fmt.Errorf("finance: report: the payment of op %s: %w", op.id, err)
		}
		if p == nil {
			continue // not a refund
		}
		op.fullRefund = !hasAmount
		if p.Known {
			op.payCurrency = strings.ToLower(p.Currency)
			if op.fullRefund {
				op.payAmount = p.Amount
			}
		}
	}
	return nil
}

// opAmounts sets the line's op amount, currency and full-refund fields from op.
func (l *Line) opAmounts(op reportOp) {
	l.OpAmount, l.OpCurrency = amountOf(op.args)
	l.OpCurrency = cmp.Or(l.OpCurrency, op.payCurrency)
	l.FullRefund, l.PaymentAmount = op.fullRefund, op.payAmount
}

// listObjects lists every Lister's objects for the window, widened by ReportMargin and
// up to the last attempt of a settled op of the window sent after it, by the op their
// tag names; it counts the untagged ones created in the window in rep.Untagged. It
// returns, per vendor, the accounts that could not be listed, with the reason (listAccounts).
func listObjects(ctx context.Context, params ReportParams, ops []reportOp, rep *Report) (map[string][]taggedObject, map[string]map[listAccount]string, error) {
	// A settled op of the window may have been sent after the window (it awaited
	// approval, or was retried): its vendor is listed up to its last attempt, so that
	// its object is not taken for missing. The objects listed past the window belong
	// to it, or to ops of later windows, which are skipped below.
	listUntil := map[string]time.Time{}
	for _, op := range ops {
		settled := op.status == string(protocol.StatusSucceeded) || op.status == string(protocol.StatusFailed)
		if settled && op.lastSent != nil && op.lastSent.After(params.Until) && op.lastSent.After(listUntil[op.vendor]) {
			listUntil[op.vendor] = *op.lastSent
		}
	}
	byOp := map[string][]taggedObject{}
	failed := map[string]map[listAccount]string{}
	for _, name := range slices.Sorted(maps.Keys(params.Listers)) {
		until := params.Until
		if t, ok := listUntil[name]; ok {
			until = t
		}
		failed[name] = map[listAccount]string{}
		objects, err := listAccounts(ctx, params, ops, name, until, failed[name], rep)
		if err != nil {
			return nil, nil, err
		}
		for _, o := range objects {
			if o.OpID == "" {
				if inWindow(o.Created, params) {
					rep.Untagged[name]++
				}
				continue
			}
			byOp[o.OpID] = append(byOp[o.OpID], taggedObject{VendorObject: o, vendor: name})
		}
	}
	return byOp, failed, nil
}

// listAccount is one account a vendor is listed on: a key's ref is its tenant's.
type listAccount struct {
	tenantID int64
	ref      string
}

// accountOf is the account op's vendor is listed on for it: the one the op was accepted
// under, or the installation's when the report cannot open accounts.
func accountOf(params ReportParams, op reportOp) listAccount {
	if params.Accounts == nil {
		return listAccount{}
	}
	a := listAccount{ref: op.account}
	if strings.HasPrefix(op.account, vendorapi.KeyRefPrefix) {
		a.tenantID = op.tenantID
	}
	return a
}

// listAccounts lists vendor's objects on every account its ops of the window used
// (ReportParams.Accounts), up to until. An account that cannot be opened or listed (the
// vendor refuses it, or is down) does not fail the report: it is added to rep.Unavailable
// and to failed, and the ops on it become unchecked lines (addOpLines).
func listAccounts(ctx context.Context, params ReportParams, ops []reportOp, vendor string, until time.Time,
	failed map[listAccount]string, rep *Report) ([]vendorapi.VendorObject, error) {
	accounts := map[listAccount]bool{}
	if params.TenantID == 0 || params.Accounts == nil {
		accounts[listAccount{}] = true
	}
	for _, op := range ops {
		if op.vendor == vendor {
			accounts[accountOf(params, op)] = true
		}
	}
	if len(accounts) == 0 {
		accounts[listAccount{}] = true
	}
	var all []vendorapi.VendorObject
	for _, a := range slices.SortedFunc(maps.Keys(accounts), func(x, y listAccount) int {
		return cmp.Or(cmp.Compare(x.ref, y.ref), cmp.Compare(x.tenantID, y.tenantID))
	}) {
		objects, err := listOne(ctx, params, vendor, a, until)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("finance: report: list %s objects: %w", vendor, ctx.Err())
			}
			u := unavailable(vendor, a, err)
			failed[a] = u.Reason
			rep.Unavailable = append(rep.Unavailable, u)
			continue
		}
		all = append(all, objects...)
	}
	return all, nil
}

// listOne lists vendor's objects on one account.
func listOne(ctx context.Context, params ReportParams, vendor string, a listAccount, until time.Time) ([]vendorapi.VendorObject, error) {
	actx := ctx
	if a.ref != "" {
		acct, err := params.Accounts(ctx, a.tenantID, vendor, a.ref)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errAccountUnopened, err)
		}
		actx = vendorapi.WithAccount(ctx, acct)
	}
	return params.Listers[vendor].ListObjects(actx, params.Since.Add(-ReportMargin), until.Add(ReportMargin))
}

// addOpLines adds the line of each op of the window, taking its objects out of byOp; an
// op whose vendor has no Lister is counted as unlistable or reported unchecked, and so
// is an op whose account could not be listed (failed, by vendor), with the reason.
func addOpLines(params ReportParams, ops []reportOp, byOp map[string][]taggedObject, failed map[string]map[listAccount]string, rep *Report) {
	for _, op := range ops {
		if _, ok := params.Listers[op.vendor]; !ok {
			if slices.Contains(params.Unlistable, op.vendor) {
				rep.Unlistable[op.vendor]++
				continue
			}
			rep.Unchecked[op.vendor]++
			rep.Lines = append(rep.Lines, uncheckedLine(op))
			continue
		}
		if reason, ok := failed[op.vendor][accountOf(params, op)]; ok {
			delete(byOp, op.id)
			rep.Unchecked[op.vendor]++
			l := uncheckedLine(op)
			l.Detail = "Not checked: " + reason
			rep.Lines = append(rep.Lines, l)
			continue
		}
		objects := byOp[op.id]
		delete(byOp, op.id)
		if l := opLine(op, objects); l.Category != "" {
			rep.Lines = append(rep.Lines, l)
		}
	}
}

// addTotals counts the problems, sets each line's currency, adds up the matched lines
// per tool and currency, and nets the matched refunds against the matched payments.
func addTotals(rep *Report) {
	totals := map[[2]string]*Total{}
	for i := range rep.Lines {
		l := &rep.Lines[i]
		l.Currency = cmp.Or(l.OpCurrency, l.VendorCurrency)
		if l.Category != CategoryMatched {
			rep.Problems++
			continue
		}
		k := [2]string{l.Tool, l.VendorCurrency}
		t := totals[k]
		if t == nil {
			t = &Total{Tool: l.Tool, Currency: l.VendorCurrency}
			totals[k] = t
		}
		t.Count++
		t.Amount += l.VendorAmount
	}
	for _, k := range slices.SortedFunc(maps.Keys(totals), func(a, b [2]string) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		rep.Totals = append(rep.Totals, *totals[k])
	}
	addNets(rep)
}

// addNets nets the matched refunds against the matched payments, per currency, from
// the totals.
func addNets(rep *Report) {
	nets := map[string]*Net{}
	for _, t := range rep.Totals {
		if t.Tool != protocol.ToolPaymentIntent && t.Tool != protocol.ToolRefund {
			continue
		}
		n := nets[t.Currency]
		if n == nil {
			n = &Net{Currency: t.Currency}
			nets[t.Currency] = n
		}
		if t.Tool == protocol.ToolRefund {
			n.Refunded += t.Amount
		} else {
			n.Paid += t.Amount
		}
		n.Net = n.Paid - n.Refunded
	}
	for _, c := range slices.Sorted(maps.Keys(nets)) {
		rep.Nets = append(rep.Nets, *nets[c])
	}
}

// addEvents adds what the vendor events say to the lines of the window's ops: a mail's
// delivery state, and a failed refund, which turns a matched refund into a problem.
func addEvents(ctx context.Context, params ReportParams, rep *Report) error {
	ids := make([]string, 0, len(rep.Lines))
	for _, l := range rep.Lines {
		if l.OpID != "" && (l.Tool == "sendgrid.mail" || l.Tool == "stripe.refund") {
			ids = append(ids, l.OpID)
		}
	}
	states, err := params.Events.OpStates(ctx, ids)
	if err != nil {
		return fmt.Errorf("finance: report: vendor events: %w", err)
	}
	for i := range rep.Lines {
		l := &rep.Lines[i]
		st, ok := states[l.OpID]
		if !ok {
			continue
		}
		l.Delivery = st.Delivery
		if len(st.FailedRefunds) > 0 && l.Category == CategoryMatched {
			l.Category = CategoryRefundFailed
			l.Detail = fmt.Sprintf("the vendor reported refund %s failed after it was created (refund.failed): the money did not go back",
				strings.Join(st.FailedRefunds, ", "))
		}
	}
	orphans, err := params.Events.OrphanCounts(ctx, params.Since, params.Until)
	if err != nil {
		return fmt.Errorf("finance: report: vendor events: %w", err)
	}
	rep.OrphanEvents = orphans
	return nil
}

func inWindow(t time.Time, p ReportParams) bool {
	return !t.Before(p.Since) && t.Before(p.Until)
}

// opLine compares one op of the window with the objects tagged with it. An op that did
// not succeed and has nothing at the vendor is consistent: its line has no category.
func opLine(op reportOp, objects []taggedObject) Line {
	l := Line{OpID: op.id, Key: op.key, Tool: op.tool, Vendor: op.vendor, TenantID: op.tenantID, OpStatus: op.status,
		VendorIDs: []string{}}
	l.opAmounts(op)
	for _, o := range objects {
		l.VendorIDs = append(l.VendorIDs, o.ID)
		l.VendorAmount += o.Amount
		if l.VendorCurrency == "" {
			l.VendorCurrency = o.Currency
		}
	}
	slices.Sort(l.VendorIDs)
	succeeded := op.status == string(protocol.StatusSucceeded)
	switch {
	case op.status == string(protocol.StatusFailed) && len(objects) > 0 && allRefused(objects):
		// The vendor kept a record of its refusal (its adapter says so: a declined
		// payment, a failed refund): consistent with the failed op.
		l.Category = ""
	case len(objects) >= 2:
		l.Category = CategoryDuplicate
		l.Detail = fmt.Sprintf("the vendor holds %d objects for one op (op is %s); vendor_amount is their sum", len(objects), op.status)
	case len(objects) == 1 && !succeeded:
		l.Category = CategoryOrphanAtVendor
		l.Detail = fmt.Sprintf("the vendor holds an object for an op that is %s", op.status)
	case len(objects) == 1:
		o := objects[0]
		var diffs []string
		if _, has := argInt(op.args, "amount"); has && o.Amount != l.OpAmount {
			diffs = append(diffs, fmt.Sprintf("amount %s at the vendor, %s in the op", money.Format(o.Amount, o.Currency),
				money.Format(l.OpAmount, cmp.Or(l.OpCurrency, o.Currency))))
		}
		if l.OpCurrency != "" && !strings.EqualFold(o.Currency, l.OpCurrency) {
			diffs = append(diffs, fmt.Sprintf("currency %q at the vendor, %q in the op", o.Currency, l.OpCurrency))
		}
		if len(diffs) > 0 {
			l.Category = CategoryMismatch
			l.Detail = strings.Join(diffs, "; ")
		} else {
			l.Category = CategoryMatched
		}
	case succeeded:
		l.Category = CategoryMissingAtVendor
		l.Detail = "the op succeeded but the vendor lists no object tagged with it"
		if op.vendorRef != "" {
			l.Detail += " (the op records vendor ref " + op.vendorRef + ")"
		}
	default:
		// Not succeeded and nothing at the vendor: consistent, and not a money matter.
		l.Category = ""
	}
	return l
}

// allRefused reports whether every object records the vendor's refusal of the op (its
// adapter says so: VendorObject.Refused).
func allRefused(objects []taggedObject) bool {
	for _, o := range objects {
		if !o.Refused {
			return false
		}
	}
	return true
}

// uncheckedLine reports an op whose vendor has no Lister.
func uncheckedLine(op reportOp) Line {
	l := Line{Category: CategoryUnchecked, OpID: op.id, Key: op.key, Tool: op.tool, Vendor: op.vendor,
		TenantID: op.tenantID, OpStatus: op.status, VendorIDs: []string{}}
	l.opAmounts(op)
	l.Detail = fmt.Sprintf("no lister for vendor %s: the op (%s) was not compared with the vendor's records", op.vendor, op.status)
	if op.vendorRef != "" {
		l.Detail += " (the op records vendor ref " + op.vendorRef + ")"
	}
	return l
}

// orphanLines reports the objects whose op is not in the window.
func orphanLines(ctx context.Context, pool *pgxpool.Pool, params ReportParams, byOp map[string][]taggedObject, rep *Report) error {
	ids := make([]string, 0, len(byOp))
	for id := range byOp {
		if protocol.IsOpID(id) {
			ids = append(ids, id)
		}
	}
	type known struct {
		tenantID int64
		status   string
		args     json.RawMessage
	}
	found := map[string]known{}
	if len(ids) > 0 {
		rows, err := pool.Query(ctx, sqlReportOpsByID, ids)
		if err != nil {
			return fmt.Errorf("finance: report: read tagged ops: %w", err)
		}
		for rows.Next() {
			var (
				id      string
				k       known
				created time.Time
			)
			if err := rows.Scan(&id, &k.tenantID, &k.status, &created, &k.args); err != nil {
				rows.Close()
				return fmt.Errorf("finance: report: read tagged ops: %w", err)
			}
			found[id] = k
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("finance: report: read tagged ops: %w", err)
		}
	}
	for tag, objects := range byOp {
		var inside []taggedObject
		for _, o := range objects {
			if inWindow(o.Created, params) {
				inside = append(inside, o)
			}
		}
		if len(inside) == 0 {
			continue // margin objects belong to a neighbouring window
		}
		k, exists := found[strings.ToLower(tag)]
		switch {
		case exists && params.TenantID != 0 && k.tenantID != params.TenantID:
			continue
		case exists && k.status == string(protocol.StatusSucceeded):
			continue // reported with its op, in the window of the op's creation
		case exists && k.status == string(protocol.StatusFailed) && allRefused(inside):
			continue // the vendor's record of its refusal: consistent with the failed op
		case !exists && params.TenantID != 0:
			continue
		}
		l := Line{Category: CategoryOrphanAtVendor, OpID: tag, Vendor: inside[0].vendor, VendorIDs: []string{}}
		for _, o := range inside {
			l.VendorIDs = append(l.VendorIDs, o.ID)
			l.VendorAmount += o.Amount
			if l.VendorCurrency == "" {
				l.VendorCurrency = o.Currency
			}
		}
		slices.Sort(l.VendorIDs)
		if exists {
			l.TenantID, l.OpStatus = k.tenantID, k.status
			l.Detail = fmt.Sprintf("tagged with an op created outside the window that is %s", k.status)
		} else {
			l.Detail = "tagged with an id that names no op"
		}
		rep.Lines = append(rep.Lines, l)
	}
	return nil
}

// amountOf reads "amount" and "currency" from an op's args.
func amountOf(args json.RawMessage) (int64, string) {
	amount, _ := argInt(args, "amount")
	var a struct {
		Currency string `json:"currency"`
	}
	_ = json.Unmarshal(args, &a)
	return amount, strings.ToLower(a.Currency)
}

func argInt(args json.RawMessage, name string) (int64, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(args, &m) != nil {
		return 0, false
	}
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

// csvHeader is the first row of WriteCSV, the header of its lines.
var csvHeader = []string{"category", "tenant_id", "op_id", "idempotency_key", "tool", "vendor", "op_status",
	"vendor_ids", "currency", "op_amount", "op_currency", "vendor_amount", "vendor_currency", "detail", "delivery"}

// csvAmount is an amount cell: a decimal in its currency (money.Decimal), empty for a
// line without money (no currency and nothing to count).
func csvAmount(amount int64, currency string) string {
	if currency == "" && amount == 0 {
		return ""
	}
	return money.Decimal(amount, currency)
}

// csvOpAmount is the line's op_amount cell: empty for a full refund, whose args name
// no amount (the vendor_amount column has what it gave back).
func (l Line) csvOpAmount() string {
	if l.FullRefund {
		return ""
	}
	return csvAmount(l.OpAmount, l.OpCurrency)
}

// WriteCSV writes the report's lines as one CSV table under one header (csvHeader), one
// row per line: amounts are decimals in their currency ("20.00" for 2000 usd cents), each
// beside its currency's column, and the line's currency (Line.Currency) is its own
// column; a full refund's op_amount is empty. Vendor ids are separated by spaces. A text
// cell that a spreadsheet would read as a formula is prefixed with a quote. The totals
// are a table of their own: WriteTotalsCSV.
func (r *Report) WriteCSV(w io.Writer) error {
	rows := [][]string{csvHeader}
	for _, l := range r.Lines {
		rows = append(rows, []string{l.Category, strconv.FormatInt(l.TenantID, 10), cell(l.OpID), cell(l.Key), cell(l.Tool),
			cell(l.Vendor), l.OpStatus, cell(strings.Join(l.VendorIDs, " ")), cell(l.Currency), l.csvOpAmount(),
			cell(l.OpCurrency), csvAmount(l.VendorAmount, l.VendorCurrency), cell(l.VendorCurrency), cell(l.Detail), l.Delivery})
	}
	if err := csv.NewWriter(w).WriteAll(rows); err != nil {
		return fmt.Errorf("finance: write csv: %w", err)
	}
	return nil
}

// csvTotalsHeader is the header of WriteTotalsCSV.
var csvTotalsHeader = []string{"kind", "tool", "vendor", "currency", "count", "amount"}

// WriteTotalsCSV writes the report's totals as one CSV table under one header
// (csvTotalsHeader): kind "total" per tool and currency (the matched lines' count and
// amount), kinds "paid", "refunded" and "net" per currency (the matched payments, the
// matched refunds, and the first less the second), "unchecked" per vendor (the ops not
// compared, in count) and "orphan_events" per vendor (vendor events naming no op, in
// count). Amounts are decimals in their currency.
func (r *Report) WriteTotalsCSV(w io.Writer) error {
	rows := [][]string{csvTotalsHeader}
	for _, t := range r.Totals {
		rows = append(rows, []string{"total", cell(t.Tool), "", cell(t.Currency), strconv.Itoa(t.Count), csvAmount(t.Amount, t.Currency)})
	}
	for _, n := range r.Nets {
		for _, kv := range []struct {
			kind   string
			amount int64
		}{{"paid", n.Paid}, {"refunded", n.Refunded}, {"net", n.Net}} {
			rows = append(rows, []string{kv.kind, "", "", cell(n.Currency), "", money.Decimal(kv.amount, n.Currency)})
		}
	}
	for _, c := range []struct {
		kind   string
		counts map[string]int
	}{{"unchecked", r.Unchecked}, {"orphan_events", r.OrphanEvents}} {
		for _, vendor := range slices.Sorted(maps.Keys(c.counts)) {
			rows = append(rows, []string{c.kind, "", cell(vendor), "", strconv.Itoa(c.counts[vendor]), ""})
		}
	}
	if err := csv.NewWriter(w).WriteAll(rows); err != nil {
		return fmt.Errorf("finance: write totals csv: %w", err)
	}
	return nil
}

// cell defuses text a spreadsheet would evaluate as a formula.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// WriteJSON writes the report as one JSON document, with "clean" added.
func (r *Report) WriteJSON(w io.Writer) error {
	type alias Report
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(struct {
		*alias
		Clean bool `json:"clean"`
	}{(*alias)(r), r.Clean()}); err != nil {
		return fmt.Errorf("finance: write json: %w", err)
	}
	return nil
}
