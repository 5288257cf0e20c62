package reconcile

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/oncebox/oncebox/protocol"
	"github.com/oncebox/oncebox/vendorapi"
)

// TestDecide tables the reconciler's decision from a lookup's answer (exactly one object,
// none before or after the lag, several, cannot ask), without Postgres or a vendor.
func TestDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	finished := now.Add(-10 * time.Minute)
	const lag = 5 * time.Minute
	op := func() *candidate {
		return &candidate{id: "op-1", key: "k", tool: "stripe.payment_intent", vendor: "stripe", tenantID: 7,
			status: protocol.StatusUnknown, attempts: 1, createdAt: finished.Add(-time.Minute), lastFinished: &finished}
	}
	obj := func(id string) vendorapi.VendorObject {
		return vendorapi.VendorObject{ID: id, OpID: "op-1", Status: "succeeded", Summary: json.RawMessage(`{"id":"` + id + `"}`)}
	}
	found := func(objs ...vendorapi.VendorObject) *vendorapi.LookupResult {
		return &vendorapi.LookupResult{Objects: objs}
	}
	base := policy{now: now, retryLookupAfter: time.Minute, maxAttempts: 10, resendOnNone: true}

	type want struct {
		name      string
		to        protocol.Status
		vendorRef string
		nextCheck time.Time
		newKey    bool
		ids       []string
	}
	for _, tc := range []struct {
		name   string
		answer func(*lookupAnswer)
		policy func(*policy)
		op     func(*candidate)
		want   want
	}{
		{name: "exactly one object", answer: func(a *lookupAnswer) { a.res = found(obj("pi_1")) },
			want: want{name: Succeeded, to: protocol.StatusSucceeded, vendorRef: "pi_1"}},
		{name: "exactly one object, which records a refusal", answer: func(a *lookupAnswer) {
			o := obj("pi_1")
			o.Status, o.Refused = "requires_payment_method", true
			a.res = found(o)
		}, want: want{name: Refused, to: protocol.StatusFailed, vendorRef: "pi_1"}},
		{name: "several objects", answer: func(a *lookupAnswer) { a.res = found(obj("pi_1"), obj("pi_2")) },
			want: want{name: Duplicate, to: protocol.StatusNeedsReview, ids: []string{"pi_1", "pi_2"}}},
		{name: "an object of another op is none", answer: func(a *lookupAnswer) {
			o := obj("pi_9")
			o.OpID = "op-2"
			a.res = found(o)
		}, want: want{name: Resend, to: protocol.StatusPending}},
		{name: "none before the lag is over", answer: func(a *lookupAnswer) { a.res = found(); a.askedAt = finished.Add(time.Minute) },
			want: want{name: Wait, to: protocol.StatusUnknown, nextCheck: finished.Add(lag)}},
		{name: "none after the lag", answer: func(a *lookupAnswer) { a.res = found() },
			want: want{name: Resend, to: protocol.StatusPending}},
		{name: "none after the lag, stale key", answer: func(a *lookupAnswer) { a.res = found() },
			op:   func(c *candidate) { c.staleKey = true },
			want: want{name: ResendNewKey, to: protocol.StatusPending, newKey: true}},
		{name: "none after the lag, no resend for the vendor", answer: func(a *lookupAnswer) { a.res = found() },
			policy: func(p *policy) { p.resendOnNone = false },
			want:   want{name: NoneReview, to: protocol.StatusNeedsReview}},
		{name: "none after the lag, attempts exhausted", answer: func(a *lookupAnswer) { a.res = found() },
			op:   func(c *candidate) { c.attempts = 10 },
			want: want{name: AttemptsExhausted, to: protocol.StatusNeedsReview}},
		{name: "cannot ask", answer: func(a *lookupAnswer) { a.err = fmt.Errorf("no add-on: %w", vendorapi.ErrLookupUnavailable) },
			want: want{name: LookupUnavailable, to: protocol.StatusNeedsReview}},
		{name: "lookup failed", answer: func(a *lookupAnswer) { a.err = errors.New("rate limited") },
			want: want{name: LookupFailed, to: protocol.StatusUnknown, nextCheck: now.Add(time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := op()
			if tc.op != nil {
				tc.op(c)
			}
			a := lookupAnswer{c: c, askedAt: now, lag: lag, jobTimeout: 30 * time.Second}
			tc.answer(&a)
			p := base
			if tc.policy != nil {
				tc.policy(&p)
			}
			d := decide(a, p)
			ch := d.change
			got := want{name: d.name, to: ch.To, vendorRef: ch.VendorRef, nextCheck: ch.NextCheck,
				newKey: ch.NewVendorKey != "", ids: d.ids}
			require.Equal(t, tc.want, got)
			require.Equal(t, protocol.StatusUnknown, ch.From)
			require.Equal(t, "op-1", ch.OpID)
			require.Equal(t, d.name, ch.Detail.(map[string]any)["decision"], "the event records the decision")
			switch ch.To {
			case protocol.StatusSucceeded:
				require.JSONEq(t, `{"id":"pi_1"}`, string(ch.Result))
			case protocol.StatusFailed:
				require.Contains(t, string(ch.Error), Refused)
			}
			if tc.want.newKey {
				require.Equal(t, vendorapi.VendorKey(7, "k", "stripe.payment_intent", 1), ch.NewVendorKey)
			}
		})
	}
}
